"""The `pstbench` argument parser: a usage error is one line naming the (sub)command and its `--help`, an option
or name that is not known is answered with the closest known one; and the argument types the commands share."""

from __future__ import annotations

import argparse
import re

from pytest_pstbench.core.errors import did_you_mean, suggest


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (`pstbench score: error: argument -j: invalid int value: 'x'; fix:
    see `pstbench score --help``, exit 2) instead of the usage block and the error: bad input is one line. A value
    of more than 60 characters is shown cut. Every subcommand's parser is one of these (add_subparsers).
    An option the command does not have is named with the closest one it has and the command's own help
    (`pstbench score: error: unknown option --nmae (did you mean --name?); fix: see `pstbench score --help``),
    also when it hides a required one (`--trak demo`: `--track` is required; did you mean it?)."""

    argv: list[str] = []  # the command line being parsed (`main` sets it): where the typo hints look

    def error(self, message):
        target, message = self, " ".join(str(message).split())
        if message.startswith("unrecognized arguments:"):  # raised by the top parser for its subcommand's words
            target = command_parser(self, Parser.argv)
            typos = target.unknown_options(Parser.argv)
            if typos:
                message = "; ".join(
                    f"unknown option {word}{did_you_mean(word, target.long_options())}" for word in typos
                )
        else:
            typos = self.unknown_options(Parser.argv)
            if typos:
                message += f" ({typos[0]} is not an option of {self.prog}{suggest(typos[0], self.long_options())})"
            choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
            if choice:  # a subcommand or a --net value: the closest of the choices
                message += suggest(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        message = re.sub(r"'([^'\n]{60})[^'\n]{4,}'", r"'\1...'", message)
        self.exit(2, f"{target.prog}: error: {message}; fix: see `{target.prog} --help`\n")

    def long_options(self) -> list[str]:
        return [o for a in self._actions for o in a.option_strings if o.startswith("--")]

    def unknown_options(self, argv) -> list[str]:
        """The words of `argv` written as options (`--x`, `--x=v`, `-x`) that this parser does not know, not
        even as an abbreviation."""
        known = [o for a in self._actions for o in a.option_strings]
        out = []
        for word in argv:
            if word == "--":
                break
            name = word.split("=", 1)[0]
            if re.match(r"^--?[A-Za-z]", name) and not any(
                k == name or (name.startswith("--") and k.startswith(name)) for k in known
            ):
                out.append(name)
        return out


def positive_int(text: str) -> int:
    """argparse type of a count: a whole number >= 1 (argparse names the option in its one-line error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text[:60]!r}: expected a whole number >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid count {value}: expected a whole number >= 1")
    return value


def command_parser(parser: argparse.ArgumentParser, argv) -> argparse.ArgumentParser:
    """The (sub)command parser that `argv` reaches: `pstbench vab score ...` -> the parser of `vab score`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for i, word in enumerate(argv):
                if word in action.choices:
                    return command_parser(action.choices[word], argv[i + 1 :])
    return parser

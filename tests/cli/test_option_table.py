"""One option table (pytest_pstbench/options.py) serves both front doors, help written once; every option of every
`pstbench` command (walking the parser `build_parser` makes from the commands' tables) is written in docs/cli.md where
the page speaks of that command; and the package declares its options in tables, not by hand (one builder,
`options.add_args`, holds the add_argument call)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pytest_pstbench.cli import build_parser
from pytest_pstbench.options import PLUGIN, SCORING


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_score_takes_every_scoring_option_with_the_tables_help():
    actions = {s: a for a in _subparser("score")._actions for s in a.option_strings}
    for o in SCORING:
        action = actions[f"--{o.name}"]
        assert action.help == o.help + o.cli_note, o.name
        assert isinstance(action, argparse._StoreTrueAction) == (o.kind == "flag"), o.name
        assert isinstance(action, argparse._AppendAction) == (o.kind == "list"), o.name
    assert (
        actions["--track"].required
        and actions["--results"].default == "results"
        and actions["--device"].default == "cpu"
    )


def test_the_plugin_takes_every_option_of_the_table(pytester):
    result = pytester.runpytest_inprocess("--help")
    text = " ".join(result.stdout.str().split())
    for o in PLUGIN:
        assert f"--pstbench-{o.name}" in text, o.name
        assert " ".join((o.help + o.pytest_note).split())[:60] in text, o.name
        if o.ini:
            assert f"pstbench_{o.name.replace('-', '_')} (" in text, o.name  # the ini key, with its type


ROOT = Path(__file__).resolve().parents[2]
MAX_ADD_ARGUMENT_CALLS = 6  # issue 51: every option declared once in a table; argparse built from it


def _commands(parser, path=()):
    """(command words, its parser) for `pstbench` and every (sub)command below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _where_the_page_speaks_of(page: str, words: tuple[str, ...]) -> str:
    """The lines of docs/cli.md naming `pstbench WORDS` (its rows in the command tables), and its own
    `## pstbench WORDS options` section (a row may name several commands: `vab run\\|score`) when the page has one."""
    command = " ".join(("pstbench", *words))
    named = re.escape(command) + r"(?![\w-])"
    if words:  # `pstbench vab run\|score ...` speaks of both
        last = re.escape(words[-1])
        named = re.escape(" ".join(("pstbench", *words[:-1]))) + rf" (?:[\w-]+\\\|)*{last}(?:\\\|[\w-]+)*(?![\w-])"
    out = [line for line in page.splitlines() if re.search(named, line)]
    section = re.search(r"^## `" + re.escape(command) + r"` options\n(.*?)(?=^## |\Z)", page, re.S | re.M)
    if section:
        out.append(section.group(1))
    return "\n".join(out)


def test_every_option_of_every_command_is_in_the_cli_page():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = []
    for words, parser in _commands(build_parser()):
        text = _where_the_page_speaks_of(page, words)
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            if not any(re.search(re.escape(o) + r"(?![\w-])", text) for o in action.option_strings):
                missing.append(f"pstbench {' '.join(words)} {'/'.join(action.option_strings)}")
    assert not missing, "options not in docs/cli.md where it speaks of their command: " + ", ".join(missing)


def _add_argument_calls(source: str) -> int:
    return len(re.findall(r"\.add_argument\(", source))


def test_the_package_declares_its_options_in_tables():
    calls = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / "pytest_pstbench").rglob("*.py"))
        if (n := _add_argument_calls(p.read_text(encoding="utf-8")))
    }
    assert sum(calls.values()) <= MAX_ADD_ARGUMENT_CALLS, calls


def test_the_count_sees_a_call_written_by_hand():
    assert _add_argument_calls('p.add_argument("--x")\nparser.add_argument(*a.flags, **a.keywords)\n') == 2

"""The one exception type for user errors (bad input, missing data, bad options).

Its message names the file (or option), the rule that was broken and the fix. Front doors
(CLI, pytest plugin) print it as one line without a traceback. A message quotes what it found (a file's
field, a server's reply): its control characters are shown escaped (`core.text.for_terminal`), wherever
the message is printed or recorded.
"""

from pytest_pstbench.core.text import for_terminal


class UserError(Exception):
    """A problem with the user's input, not a bug in pstbench."""

    def __init__(self, *args):
        super().__init__(*(for_terminal(a) if isinstance(a, str) else a for a in args))


def closest(word, choices) -> str | None:
    """The known name closest to `word` (difflib's ratio of at least 0.6), or None: every lookup of a name
    (track, protocol, metric, judge, option) suggests the one meant."""
    import difflib

    found = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word, choices) -> str:
    """` (did you mean NAME?)` after a name that is not known, or ""."""
    name = closest(word, choices)
    return f" (did you mean {name}?)" if name else ""


def suggest(word, choices) -> str:
    """`; did you mean NAME?` at the end of a message that already lists `choices`, or ""."""
    name = closest(word, choices)
    return f"; did you mean {name}?" if name else ""

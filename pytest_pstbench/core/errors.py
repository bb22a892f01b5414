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

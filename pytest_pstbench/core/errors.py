"""The one exception type for user errors (bad input, missing data, bad options).

Its message names the file (or option), the rule that was broken and the fix. Front doors
(CLI, pytest plugin) print it as one line without a traceback.
"""


class UserError(Exception):
    """A problem with the user's input, not a bug in pstbench."""

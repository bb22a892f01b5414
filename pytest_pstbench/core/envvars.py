"""A number read from an environment variable (a timeout, a limit): the one reader, so that every variable
the kit reads is checked by one rule and refused in one line naming the variable, what it expects and the
fix."""

from __future__ import annotations

import os

from pytest_pstbench.core.errors import UserError


def env_number(name: str, default, *, unit: str, example, zero_ok: bool = False, whole: bool = False):
    """$`name` as a number (`whole`: digits only, an int), or `default` when it is unset or empty. A value
    that is not a finite number above 0 (at least 0 with `zero_ok`) is one UserError:
    `NAME='raw': expected a number of <unit> > 0; fix: set it to e.g. <example> or unset it`."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    try:
        value = (int(raw) if raw.isdigit() else -1) if whole else float(raw)
    except ValueError:  # not a number, or more digits than int() converts
        value = -1
    if not ((value >= 0 if zero_ok else value > 0) and value < float("inf")):
        raise UserError(
            f"{name}={raw!r}: expected a number of {unit} {'>=' if zero_ok else '>'} 0; fix: set it to e.g. "
            f"{example} or unset it"
        )
    return value

"""The one reader of JSON (run.json, summary.json, cache entries, lock files, answers lines, the model
endpoint's replies, analysis.json, ...): every JSON text the kit parses goes through `loads` or
`read_json`, and nowhere else (tests/core/test_file_loaders.py keeps it so).

Bounded: text over `max_bytes`, nesting deeper than `max_depth` (checked before parsing: the C parser
would end in a RecursionError) and an integer of more than `max_int_digits` digits (Python refuses
4300 only, after the work) raise `JSONLimitError`. A syntax error is json's own JSONDecodeError, as
before; both are ValueErrors, and so is a UnicodeDecodeError of a file that is not UTF-8, so a caller
that turned a ValueError into a one-line error or a cache miss does so for every limit too.
NaN and Infinity are accepted as json.loads accepts them; the caller checks its values.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from pathlib import Path

MAX_BYTES = 64 * 1024 * 1024  # the largest JSON text read (a run.json of a large track fits many times over)
MAX_DEPTH = 64  # the kit's own files nest a few levels
MAX_INT_DIGITS = 64  # the longest integer (a size, a time in ns, a seed) has about 20 digits

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JSONLimitError(json.JSONDecodeError):
    """A limit of this module broken: a JSONDecodeError (so `except json.JSONDecodeError` and `except
    ValueError` catch it), whose `msg` and str are the rule broken."""

    def __init__(self, msg: str):
        ValueError.__init__(self, msg)
        self.msg, self.doc, self.pos, self.lineno, self.colno = msg, "", 0, 1, 1

    def __reduce__(self):
        return self.__class__, (self.msg,)


def _depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text` (brackets inside strings not counted)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.get, brackets)), default=0)


def loads(
    text: str | bytes | bytearray,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_int_digits: int = MAX_INT_DIGITS,
):
    """json.loads with bounds (see the module's docstring). Bytes are decoded as json.loads decodes them."""
    if len(text) > max_bytes:
        raise JSONLimitError(f"{len(text)} bytes, over the limit of {max_bytes} bytes")
    if not isinstance(text, str):
        text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
    if text.count("[") + text.count("{") > max_depth and _depth(text) > max_depth:
        raise JSONLimitError(f"nested deeper than {max_depth} levels")

    def parse_int(digits: str) -> int:
        if len(digits) - digits.startswith("-") > max_int_digits:
            raise JSONLimitError(
                f"an integer of {len(digits) - digits.startswith('-')} digits (at most {max_int_digits})"
            )
        return int(digits)

    try:
        return json.loads(text, parse_int=parse_int)
    except RecursionError:  # not reached after the depth check; kept so no input can end in a traceback
        raise JSONLimitError(f"nested deeper than {max_depth} levels") from None


def read_json(
    path: Path | str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, max_int_digits: int = MAX_INT_DIGITS
):
    """The data of the UTF-8 JSON file `path` (read no further than `max_bytes` + 1 bytes). OSError when it
    cannot be read; ValueError (UnicodeDecodeError, JSONDecodeError, JSONLimitError) when it is not JSON
    within the bounds."""
    with open(path, "rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise JSONLimitError(f"more than {max_bytes} bytes, over the limit")
    return loads(raw.decode("utf-8"), max_bytes=max_bytes, max_depth=max_depth, max_int_digits=max_int_digits)

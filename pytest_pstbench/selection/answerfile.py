"""An answers file's text, written and read one way, and its one writer.

Encoding: `jsonl_line` is the only way a line is written (JSON, UTF-8, newline-terminated; characters that
break lines for some reader (U+2028, U+0085, ...) and lone surrogates (half of a character, e.g. `\\ud83d`
from a model that cut an emoji) escaped as `\\uXXXX`, so the file is valid UTF-8 and each line stays one
line); `clean_line` is how every line read is handed on (a lone surrogate in a string becomes U+FFFD, so
run files, tables and messages can be written and printed).

Writing: `answers_writer(path)` holds the file's one-writer lock (`core.files.lock.writer_lock`, namespace
"answers": a second `pstbench vab run` on the same file waits up to $PSTBENCH_LOCK_TIMEOUT seconds, then
stops with one line), completes the last line (`complete_last_line`), and appends lines.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import JSONLimitError, loads
from pytest_pstbench.core.files.lock import writer_lock

# Characters str.splitlines() breaks lines at that json.dumps(ensure_ascii=False) leaves raw, and lone
# surrogates (which UTF-8 cannot encode): escaped when an answers line is written.
_ESCAPED = re.compile("[\x1c\x1d\x1e\x85\u2028\u2029\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def answers_folder(answers_path: Path) -> None:
    """Create the answers file's folder (one line when it cannot be made)."""
    try:
        answers_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"{answers_path.parent}: cannot create the answers file's folder ({exc}); "
            "fix: give --answers a writable path"
        ) from None


def jsonl_line(obj: dict) -> bytes:
    """One answers-file line (UTF-8, newline-terminated): JSON with every line-breaking character and every
    lone surrogate escaped (JSON `\\uXXXX`: read back as the same text)."""
    text = _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(obj, ensure_ascii=False))
    return (text + "\n").encode("utf-8")


def clean_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (the text can then be encoded as UTF-8)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def clean_line(obj):
    """An answers line as read (json.loads), its string values (and string keys) passed through `clean_text`."""
    if not isinstance(obj, dict):
        return obj
    return {
        clean_text(k) if isinstance(k, str) else k: clean_text(v) if isinstance(v, str) else v for k, v in obj.items()
    }


def _is_whole(tail: bytes) -> bool:
    """Whether the bytes after the last newline are a whole line. A line cut short by an interrupted write
    (a prefix of a JSON object) never parses; a line that does is whole (it only lacks its newline)."""
    try:
        loads(tail.decode("utf-8"))
    except JSONLimitError:  # parses as far as JSON goes, over the kit's bounds: the reader's rules judge it
        return True
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    except (ValueError, RecursionError):
        return True
    return True


def complete_last_line(path: Path) -> None:
    """Before appending: a last line without its newline gets one when it is a whole line (a file written
    by hand or by another tool); a line cut short by an interrupted run is dropped (it is asked again).
    Nothing else in the file changes."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"{path}: cannot read the answers file ({exc}); fix: give --answers a readable file") from None
    if not data or data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    try:
        if _is_whole(data[cut:].strip()):
            with open(path, "ab") as fh:
                fh.write(b"\n")
        else:
            os.truncate(path, cut)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the answers file ({exc}); fix: give --answers a writable file") from None


class AnswersWriter:
    """Appends lines to an answers file (see `answers_writer`)."""

    def __init__(self, fh):
        self._fh = fh

    def append(self, obj: dict) -> None:
        self._fh.write(jsonl_line(obj))
        self._fh.flush()


@contextmanager
def answers_writer(path: Path) -> Iterator[AnswersWriter]:
    """The one writer of an answers file: under its lock, the last line completed, then lines appended."""
    path = Path(path)
    with writer_lock(
        path,
        namespace="answers",
        what="answers file",
        writes="the answers file",
        fix="wait for it to finish, or give --answers another file",
        where="give --answers a writable path",
    ):
        complete_last_line(path)
        try:
            fh = open(path, "ab")
        except OSError as exc:
            raise UserError(
                f"{path}: cannot write the answers file ({exc}); fix: give --answers a writable file"
            ) from None
        with fh:
            yield AnswersWriter(fh)

"""The damage kinds of tests/contract/test_damaged_inputs.py: each turns one input file (by its format) into a
damaged one, in place. A damage kind lists the formats it applies to; adding one is an entry in
`DAMAGES` (and, when the kit accepts that damage for some input by design, an entry in the harness's
`ACCEPTED` table with the reason).

Formats: yaml, json, jsonl, csv, png, py (a judge module), pt (a binary cache file).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

TEXT = ("yaml", "json", "jsonl", "csv", "py")
STRUCTURED = ("yaml", "json", "jsonl")
ALL = (*TEXT, "png", "pt")

SURROGATE = "\ud83d"  # the first half of a UTF-16 surrogate pair, alone: no Unicode character
HUGE_INT = "9" * 5000  # more digits than Python converts to an int (4300) by default
HUGE_FLOAT = "1.0e+400"  # a float literal past the largest double: inf in JSON and YAML
DEEP = "[" * 100_000 + "]" * 100_000  # nesting far past Python's recursion limit

# 6 lines of 9 aliases each: 250 bytes of YAML that expand to 9**6 strings
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, n in zip("abcde", "bcdef")
)


@dataclass(frozen=True)
class Damage:
    name: str
    formats: tuple[str, ...]
    apply: Callable[[Path, str, Path], None]  # (file, its format, a folder outside the world for link targets)
    doc: str


# ---- structural edits: parse, change every leaf of a kind, write back in the same format ------------
_MARK = "@@pstbench-damage:{}@@"
_MARK_RE = re.compile(r"""["']?@@pstbench-damage:(.*?)@@["']?""")


_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when there: the harness parses a lot
_loaded: dict[tuple[str, str], list] = {}  # (format, text) -> its documents: the same pristine files, over and over


def _load(text: str, fmt: str):
    key = (fmt, text)
    if key not in _loaded:
        if fmt == "yaml":
            _loaded[key] = [yaml.load(text, Loader=_SafeLoader)]
        elif fmt == "json":
            _loaded[key] = [json.loads(text)]
        else:
            _loaded[key] = [json.loads(line) for line in text.splitlines() if line.strip()]
    return copy.deepcopy(_loaded[key])


def _dump(docs: list, fmt: str) -> str:
    if fmt == "yaml":  # a lone surrogate is escaped ("\uD83D"), not written raw (libyaml's emitter cannot)
        return yaml.safe_dump(docs[0], sort_keys=False, allow_unicode=False)
    if fmt == "json":
        return json.dumps(docs[0], indent=2) + "\n"
    return "".join(json.dumps(d) + "\n" for d in docs)


def _walk(value, leaf: Callable, depth: int = 0):
    if isinstance(value, dict):
        return {k: _walk(v, leaf, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, leaf, depth + 1) for v in value]
    return leaf(value, depth)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _numbers_to(token: Callable[[str], str]):
    """Every number (a JSON/YAML number, a CSV cell that reads as one) becomes `token(its text)`."""

    def apply(path: Path, fmt: str, _outside: Path) -> None:
        text = path.read_text(encoding="utf-8")
        if fmt == "csv":
            rows = list(csv.reader(io.StringIO(text)))
            for row in rows[1:]:
                for i, cell in enumerate(row):
                    try:
                        float(cell)
                    except ValueError:
                        continue
                    row[i] = token(cell)
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(rows)
            path.write_text(buf.getvalue(), encoding="utf-8")
            return
        docs = [_walk(d, lambda v, _d: _MARK.format(repr(v)) if _is_number(v) else v) for d in _load(text, fmt)]
        path.write_text(_MARK_RE.sub(lambda m: token(m.group(1)), _dump(docs, fmt)), encoding="utf-8")

    return apply


def _quoted(fmt_text: str) -> str:
    return json.dumps(fmt_text)  # "30.5": a string in JSON and in YAML


def _strings_with_surrogate(path: Path, fmt: str, _outside: Path) -> None:
    """Every string value ends in an escaped lone surrogate (JSON `\\ud83d`, YAML `"\\uD83D"`); a CSV's
    text cells get the surrogate's bytes (ED A0 BD: not UTF-8), as a file written with surrogatepass has."""
    text = path.read_text(encoding="utf-8")
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        for row in rows[1:]:
            row[:] = [cell if _floaty(cell) else cell + SURROGATE for cell in row]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        path.write_bytes(buf.getvalue().encode("utf-8", "surrogatepass"))
        return
    docs = [_walk(d, lambda v, _d: v + SURROGATE if isinstance(v, str) else v) for d in _load(text, fmt)]
    path.write_text(_dump(docs, fmt), encoding="ascii")


def _floaty(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def _raw_surrogate_bytes(path: Path, fmt: str, _outside: Path) -> None:
    """The bytes of a lone surrogate (ED A0 BD, not UTF-8) in the middle of the text."""
    raw = path.read_bytes()
    cut = raw.find(b"\n", len(raw) // 2)
    cut = len(raw) // 2 if cut < 0 else cut
    path.write_bytes(raw[:cut] + SURROGATE.encode("utf-8", "surrogatepass") + raw[cut:])


def _objects_as_lists(path: Path, fmt: str, _outside: Path) -> None:
    """Every mapping below the top level becomes the list of its values (a list where an object is expected)."""

    def inner(value, depth=0):
        if isinstance(value, dict):
            items = {k: inner(v, depth + 1) for k, v in value.items()}
            return list(items.values()) if depth > 0 else items
        if isinstance(value, list):
            return [inner(v, depth + 1) for v in value]
        return value

    docs = [inner(d) for d in _load(path.read_text(encoding="utf-8"), fmt)]
    path.write_text(_dump(docs, fmt), encoding="utf-8")


def _top(replace: Callable):
    def apply(path: Path, fmt: str, _outside: Path) -> None:
        docs = [replace(d) for d in _load(path.read_text(encoding="utf-8"), fmt)]
        path.write_text(_dump(docs, fmt), encoding="utf-8")

    return apply


def _strings_as_dates(path: Path, fmt: str, _outside: Path) -> None:
    """Every string value a YAML date (`2024-01-02`: YAML reads a date, which JSON has no type for)."""
    import datetime

    docs = [
        _walk(d, lambda v, _d: datetime.date(2024, 1, 2) if isinstance(v, str) else v)
        for d in _load(path.read_text(encoding="utf-8"), fmt)
    ]
    path.write_text(_dump(docs, fmt), encoding="utf-8")


def _deep(path: Path, fmt: str, _outside: Path) -> None:
    if fmt == "jsonl":  # the first line nested 100000 deep, the others as they were
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text(DEEP + "\n" + "".join(lines[1:]), encoding="utf-8")
    elif fmt == "yaml":
        path.write_text(path.read_text(encoding="utf-8") + "x_deep: " + DEEP + "\n", encoding="utf-8")
    else:
        path.write_text(DEEP, encoding="utf-8")


def _laughs(path: Path, _fmt: str, _outside: Path) -> None:
    """A top-level key holding aliases of aliases (the billion-laughs pattern, 9**6 values)."""
    block = "".join("  " + line + "\n" for line in LAUGHS.splitlines())
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\nx_laughs:\n" + block, encoding="utf-8")


def _recursive_alias(path: Path, _fmt: str, _outside: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\nx_loop: &loop [1, *loop]\n", encoding="utf-8")


# ---- bytes and the file system -----------------------------------------------------------------------
def _truncated(path: Path, _fmt: str, _outside: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])


def _empty(path: Path, _fmt: str, _outside: Path) -> None:
    path.write_bytes(b"")


def _folder(path: Path, _fmt: str, _outside: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x").write_text("a folder where a file belongs\n")


def _dangling(path: Path, _fmt: str, outside: Path) -> None:
    path.unlink()
    path.symlink_to(outside / "no-such-file")


def _loop(path: Path, _fmt: str, _outside: Path) -> None:
    path.unlink()
    path.symlink_to(path.name)  # a link to itself: ELOOP


def _link_out(path: Path, _fmt: str, outside: Path) -> None:
    """The same bytes, but as a link to a file outside the folder the file belongs to."""
    target = outside / f"{path.parent.name}-{path.name}"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)


def _not_png(path: Path, _fmt: str, _outside: Path) -> None:
    path.write_bytes(b"this is text, not an image\n")


def png_claiming(width: int, height: int) -> bytes:
    """A small PNG whose header claims width x height RGB pixels (a decompression bomb's header)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\x00" + b"\x00" * 3 * min(width, 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(row * 4)) + chunk(b"IEND", b"")


def _png_bomb(path: Path, _fmt: str, _outside: Path) -> None:
    path.write_bytes(png_claiming(60_000, 60_000))


DAMAGES: dict[str, Damage] = {
    d.name: d
    for d in [
        Damage("truncated", ALL, _truncated, "the first half of the bytes"),
        Damage("empty", ALL, _empty, "no bytes"),
        Damage("folder", ALL, _folder, "a folder where the file belongs"),
        Damage("dangling-link", ALL, _dangling, "a symlink to a file that does not exist"),
        Damage("link-loop", ALL, _loop, "a symlink to itself"),
        Damage("link-out", ("png",), _link_out, "the same image as a symlink to a file outside its folder"),
        Damage("not-utf8", TEXT, _raw_surrogate_bytes, "the bytes of a lone surrogate (ED A0 BD) in the text"),
        Damage(
            "lone-surrogate", (*STRUCTURED, "csv"), _strings_with_surrogate, "every string ends in an escaped \\ud83d"
        ),
        Damage(
            "top-list", STRUCTURED, _top(lambda d: [d]), "the document inside a list (a list where an object belongs)"
        ),
        Damage("top-string", STRUCTURED, _top(lambda d: "text"), "a string where the document's object belongs"),
        Damage("inner-lists", STRUCTURED, _objects_as_lists, "every nested object replaced by the list of its values"),
        Damage("numbers-as-text", (*STRUCTURED, "csv"), _numbers_to(lambda t: _quoted(t)), "every number a string"),
        Damage("huge-int", (*STRUCTURED, "csv"), _numbers_to(lambda _t: HUGE_INT), "every number a 5000-digit integer"),
        Damage("huge-float", (*STRUCTURED, "csv"), _numbers_to(lambda _t: HUGE_FLOAT), "every number 1.0e+400 (inf)"),
        Damage("deep", STRUCTURED, _deep, "100000 levels of ["),
        Damage("yaml-inf", ("yaml",), _numbers_to(lambda _t: ".inf"), "every number .inf (YAML's infinity)"),
        Damage("yaml-dates", ("yaml",), _strings_as_dates, "every string a date (2024-01-02)"),
        Damage("yaml-laughs", ("yaml",), _laughs, "aliases of aliases (billion laughs)"),
        Damage("yaml-recursive-alias", ("yaml",), _recursive_alias, "an alias inside the value it names"),
        Damage("not-png", ("png",), _not_png, "text in a .png file"),
        Damage("png-bomb", ("png",), _png_bomb, "a PNG header claiming 60000 x 60000 pixels"),
    ]
}


def applies(damage: Damage, fmt: str) -> bool:
    return fmt in damage.formats


def apply(damage: Damage, path: Path, fmt: str, outside: Path) -> None:
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(path)
    damage.apply(path, fmt, outside)

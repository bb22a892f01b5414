"""The one reader of YAML files (protocols, track manifests, method.yaml, dataset manifests, variants,
the demo tracks' manifests): every YAML the kit reads is parsed here, and nowhere else
(tests/core/test_file_loaders.py keeps it so).

Safe constructors only (no Python objects), and bounded: a file over MAX_BYTES, nesting deeper than
MAX_DEPTH, an integer of more than MAX_INT_DIGITS digits (the JSON reader's bound, so that what is
read here can be written to run.json and read back), and aliases (`*name`) that expand the data by
more than MAX_ALIAS_NODES nodes are refused.
Anchors and aliases are YAML's way to repeat a value, and a few repeats are fine; but aliases of
aliases multiply (nine lines of nine aliases each are 9**9 values), and the data is written out in
full, e.g. a method.yaml into run.json: 332 bytes became a 7.7 MB run.json. So the composer counts
each node's size with its aliases expanded (and its depth), and refuses the file as soon as the
expansion passes the bound, before anything is built. A recursive alias (a value that contains
itself) is refused too. Every problem (syntax, encoding, the limits, an integer too long for Python)
is one UserError line naming the file, what it is, the rule and the fix; so is a float literal too large for
a double (`1e400`, which would read as inf), a string holding a lone
surrogate (a `"\\uD83D"` escape: half a character, which no file or terminal can take) and a file that
cannot be read (missing, a folder, a broken or looping link).
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import MAX_INT_DIGITS

MAX_BYTES = 64 * 1024 * 1024  # the largest YAML file read (a track manifest of many thousand items fits)
MAX_DEPTH = 64  # collections nested deeper than this (aliases expanded) are refused; the kit's files nest a few levels
MAX_ALIAS_NODES = 10_000  # the most nodes that aliases may add to a file's own (each repeat counts in full)


_SURROGATE = re.compile("[\ud800-\udfff]")


class _Refused(Exception):
    """A limit of this module broken while composing (the message says which)."""


def _record_expansion(expanded: dict, node, mark) -> None:
    """Record `node`'s size and depth with its aliases expanded (its children's are recorded already); refuse the
    file when either passes its bound."""
    import yaml

    children = (
        node.value
        if isinstance(node, yaml.SequenceNode)
        else ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else [])
    )
    sizes = [expanded[id(c)] for c in children]
    size, depth = 1 + sum(n for n, _ in sizes), 1 + max((d for _, d in sizes), default=0)
    expanded[id(node)] = (size, depth)
    if depth > MAX_DEPTH:
        raise _Refused(
            f"nested deeper than {MAX_DEPTH} levels once its aliases are expanded (line {mark.line + 1}); "
            "fix: write the value out in full where it is used"
        )
    if size > len(expanded) + MAX_ALIAS_NODES:
        raise _Refused(
            f"its aliases expand it by more than {MAX_ALIAS_NODES} values (at line {mark.line + 1}); "
            "fix: write the values out in full where they are used, without aliases of aliases"
        )


def _bounded_int(value: int, node) -> int:
    if abs(value) >= 10**MAX_INT_DIGITS:
        raise _Refused(
            f"an integer of more than {MAX_INT_DIGITS} digits (line {node.start_mark.line + 1}); "
            "fix: write a smaller number (or quote it as text)"
        )
    return value


def _finite_float(value: float, node) -> float:
    if not math.isfinite(value) and node.value.lower().lstrip("+-") not in (".inf", ".nan"):
        raise _Refused(
            f"the number {node.value} is too large for a float (line {node.start_mark.line + 1}); "
            "fix: write a smaller number (or quote it as text)"
        )
    return value


def _whole_characters(value: str, node) -> str:
    if _SURROGATE.search(value):  # a pair written as two escapes ("\\uD83D\\uDE00") is one character
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
    if _SURROGATE.search(value):
        raise _Refused(
            f"a lone surrogate ({ascii(_SURROGATE.search(value).group())}, half a character) in a "
            f"string (line {node.start_mark.line + 1}); fix: write the whole character, or drop it"
        )
    return value


def _loader_class():
    import yaml

    class BoundedSafeLoader(yaml.SafeLoader):
        """yaml.SafeLoader whose composer tracks each node's expanded size and depth (aliases counted in
        full) and refuses the file when either passes its bound."""

        _nesting = 0

        def compose_document(self):
            self._expanded: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, depth) with aliases expanded
            return super().compose_document()

        def fetch_flow_collection_start(self, TokenClass):
            """`[` or `{`: refused past MAX_DEPTH open ones as soon as it is scanned (the scanner's look-ahead over
            possible simple keys is quadratic in the open brackets: 100000 of them took seconds to refuse)."""
            if self.flow_level >= MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels (line {self.line + 1}); fix: flatten the file")
            super().fetch_flow_collection_start(TokenClass)

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                node = self.anchors.get(event.anchor)
                if node is not None and id(node) not in self._expanded:
                    raise _Refused(
                        f"the alias *{event.anchor} (line {event.start_mark.line + 1}) is inside the value it "
                        "repeats; fix: write the value out without a recursive alias"
                    )
                return super().compose_node(parent, index)
            mark = self.peek_event().start_mark
            self._nesting += 1
            try:
                if self._nesting > MAX_DEPTH:
                    raise _Refused(
                        f"nested deeper than {MAX_DEPTH} levels (line {mark.line + 1}); fix: flatten the file"
                    )
                node = super().compose_node(parent, index)
            finally:
                self._nesting -= 1
            _record_expansion(self._expanded, node, mark)
            return node

        def construct_yaml_int(self, node):
            """An integer as JSON may hold it (core.files.jsonfile's digit bound): `0x` + a million digits is an int
            that run.json could neither write nor read back."""
            return _bounded_int(super().construct_yaml_int(node), node)

        def construct_yaml_float(self, node):
            """A float literal too large for a double (`1e400`) is refused, as a too-long integer is: it would read
            as infinity, which the file does not say. `.inf` and `.nan`, written as such, are read; the reader of
            each file checks its values (a protocol's rules name the key; run.json holds neither)."""
            return _finite_float(super().construct_yaml_float(node), node)

        def construct_yaml_str(self, node):
            """A string that is Unicode text: a `\\uD83D` escape alone (half of a UTF-16 pair) is no character, and
            no file or terminal the kit writes it to can encode it."""
            return _whole_characters(super().construct_yaml_str(node), node)

    BoundedSafeLoader.add_constructor("tag:yaml.org,2002:int", BoundedSafeLoader.construct_yaml_int)
    BoundedSafeLoader.add_constructor("tag:yaml.org,2002:str", BoundedSafeLoader.construct_yaml_str)
    BoundedSafeLoader.add_constructor("tag:yaml.org,2002:float", BoundedSafeLoader.construct_yaml_float)
    return BoundedSafeLoader


def parse_yaml(raw: bytes | str, source: Path | str, what: str):
    """The data of YAML text `raw` (bytes are read as UTF-8), read from `source`, a `what` (for the
    message). Any problem is a UserError naming `source`."""
    import yaml

    if len(raw) > MAX_BYTES:
        raise UserError(
            f"{source}: a {what} of {len(raw)} bytes is over the limit of {MAX_BYTES} bytes; fix: give a smaller file"
        )
    key = hashlib.sha256(raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")).hexdigest()
    if key in _PARSED:
        return copy.deepcopy(_PARSED[key])
    loader = None
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        loader = _loader_class()(text)
        data = loader.get_single_data()
    except _Refused as exc:
        raise UserError(f"{source}: not accepted as a YAML {what}: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{source}: not a valid YAML {what} ({str(exc).splitlines()[0]}); fix the file's syntax"
        ) from None
    except (ValueError, OverflowError, RecursionError) as exc:  # an integer of too many digits, a date out of range
        raise UserError(f"{source}: not a valid YAML {what} ({str(exc).splitlines()[0]}); fix the value") from None
    finally:
        if loader is not None:
            loader.dispose()
    if len(raw) <= _CACHED_BYTES:
        if len(_PARSED) >= 256:
            _PARSED.clear()
        _PARSED[key] = copy.deepcopy(data)
    return data


def yaml_line(path: Path, keys: tuple = ()) -> int | None:
    """The 1-based line of the value at `keys` (mapping keys and list indices, e.g. ("pairs", 0, "best")) in
    the YAML file `path`, or of the deepest part of it that exists; None if the file cannot be composed.
    For messages: called after `read_yaml` read the same file, so the file is known to be within the bounds."""
    import yaml

    try:
        text = Path(path).read_bytes().decode("utf-8")
        loader = _loader_class()(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except (OSError, UnicodeDecodeError, yaml.YAMLError, _Refused, ValueError, RecursionError):
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for key in keys:
        if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
        elif isinstance(node, yaml.MappingNode):
            found = [v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(key)]
            if not found:
                break
            node = found[0]
        else:
            break
        line = node.start_mark.line + 1
    return line


# sha256 of a YAML text -> its data: the pure-Python parser is the slow part of reading the kit's files (every
# track lookup reads the dataset manifests), so a text already parsed in this process is not parsed again. Keyed
# by content, never by name; each caller gets its own copy.
_PARSED: dict[str, object] = {}
_CACHED_BYTES = 1024 * 1024


def json_ready(data, source: Path | str, what: str):
    """`data` read from a YAML file, as a JSON file (run.json) can hold it: dates and times as ISO 8601 text
    (JSON has no date; `trained: 2024-05-01` is kept as "2024-05-01"). A float that is not finite (`.inf`,
    `.nan`), bytes (`!!binary`), a set or a key that is neither text nor a number is one UserError naming
    `source`, the key and the fix: nothing is scored that could not be recorded."""
    import datetime as _dt

    def walk(value, at: str):
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise UserError(
                        f"{source}: the key {k!r} under {at or 'the top level'} of this {what} is not text; "
                        "fix: write the key as text"
                    )
                out[k] = walk(v, f"{at}.{k}" if at else str(k))
            return out
        if isinstance(value, list):
            return [walk(v, f"{at}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, (_dt.date, _dt.datetime)):
            return value.isoformat()
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(
                f"{source}: {at} is {value}, which run.json cannot record (JSON has no inf or nan); "
                "fix: write a finite number, or the value as text"
            )
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        raise UserError(
            f"{source}: {at} is a YAML {type(value).__name__}, which run.json cannot record; "
            "fix: write it as text, a number or a list"
        )

    return walk(data, "")


def read_yaml(path: Path, what: str):
    """Parse the file `path`, a `what` (e.g. "method.yaml", "track manifest"); a problem is one UserError line."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:  # missing, a folder, a link to nowhere or to itself, unreadable
        from pytest_pstbench.core.files.write import os_reason

        raise UserError(
            f"{path}: cannot read the {what} ({os_reason(exc)}); fix: give the path of a readable file"
        ) from None
    return parse_yaml(raw, path, what)

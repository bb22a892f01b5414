"""The one reader of YAML files (protocols, track manifests, method.yaml, dataset manifests, variants,
the demo tracks' manifests): every YAML the kit reads is parsed here, and nowhere else
(tests/test_audit3_loaders.py keeps it so).

Safe constructors only (no Python objects), and bounded: a file over MAX_BYTES, an alias (`*name`,
which a few bytes can expand into gigabytes once the data is written out as JSON) or nesting deeper
than MAX_DEPTH is refused. Every problem (syntax, encoding, the limits, an integer too long for
Python) is one UserError line naming the file, what it is, the rule and the fix.
"""
from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError

MAX_BYTES = 64 * 1024 * 1024  # the largest YAML file read (a track manifest of many thousand items fits)
MAX_DEPTH = 64  # collections nested deeper than this are refused (the kit's files nest a few levels)


class _Refused(Exception):
    """A limit of this module broken while composing (the message says which)."""


def _loader_class():
    import yaml

    class BoundedSafeLoader(yaml.SafeLoader):
        """yaml.SafeLoader that refuses aliases and deep nesting while composing the node tree."""

        _depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _Refused(f"an alias (*{event.anchor}, line {event.start_mark.line + 1}) is not accepted; "
                               "fix: write the value out in full where it is used")
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise _Refused(f"nested deeper than {MAX_DEPTH} levels (line {mark.line + 1}); fix: flatten the file")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return BoundedSafeLoader


def parse_yaml(raw: bytes | str, source: Path | str, what: str):
    """The data of YAML text `raw` (bytes are read as UTF-8), read from `source`, a `what` (for the
    message). Any problem is a UserError naming `source`."""
    import yaml

    if len(raw) > MAX_BYTES:
        raise UserError(f"{source}: a {what} of {len(raw)} bytes is over the limit of {MAX_BYTES} bytes; fix: give a smaller file")
    loader = None
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        loader = _loader_class()(text)
        return loader.get_single_data()
    except _Refused as exc:
        raise UserError(f"{source}: not accepted as a YAML {what}: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(f"{source}: not a valid YAML {what} ({str(exc).splitlines()[0]}); fix the file's syntax") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # an integer of too many digits, a date out of range
        raise UserError(f"{source}: not a valid YAML {what} ({str(exc).splitlines()[0]}); fix the value") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(path: Path, what: str):
    """Parse the file `path`, a `what` (e.g. "method.yaml", "track manifest"); a problem is one UserError line."""
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    return parse_yaml(raw, path, what)

"""Local track manifests (`track.yaml`): the part every track kind shares.

A kind's manifest is a YAML mapping with an `id` (the folder name under results/), optional `dataset`
(default: the id), `revision` (default: a digest of the listed files, `files_digest`), `name`,
`generator` and `description` (kept in the track's info), and a non-empty list of items under the
kind's key (`pairs`, `tasks`): mappings with a unique `id` and files given relative to the manifest.
`TrackManifest` reads and checks all of that; the kind reads its own fields from each item
(`TrackManifest.items`, `TrackManifest.file`) and builds its track. `ManifestForm` holds what differs
between kinds: the words of its messages, its item key and fields, and its id rule.

Two id rules: `FolderNameIds` is the documented one (docs/tracks-and-data.md, "Bad input" in
docs/run-files-and-guarantees.md): an id is a plain folder or file name, not null or empty, without
'/' or '\\', not starting with '.', without control characters, a track id at most 200 bytes.
`PatternIds` is stricter (letters, digits, `. _ + -`, an int or a string): selection manifests have
always used it, and a task id is also a permutation seed. Each kind keeps the rule it had, so a
manifest one of them accepted is still accepted.

Remote tracks are read from data that `pstbench data fetch` wrote; the kinds look them up in
pytest_pstbench.data (which core does not import) and describe them with `not_remote`,
`fetched_provenance` and `fetched_note`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.yamlfile import json_ready, read_yaml
from pytest_pstbench.core.store.names import control_char

MANIFEST_NAME = "track.yaml"
TRACK_ID_MAX_BYTES = 200  # a track id becomes a folder name under results/
INFO_KEYS = ("name", "generator", "description")  # manifest keys kept in the track's info
PLAIN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def manifest_path(path: Path) -> Path:
    """A track given as its folder means the folder's track.yaml."""
    return path / MANIFEST_NAME if path.is_dir() else path


@dataclass
class TrackBase:
    """What a track of every kind has; the kind's subclass adds its items (a keyword-only field named
    ITEMS, each item with an `id`) and names `item_ids` / `item` after them (`pair_ids`, `pair`)."""

    ITEMS: ClassVar[str]
    id: str
    dataset_id: str
    revision: str
    source: str  # "demo" | "local" | "remote"
    manifest: Path | None = None
    info: dict = field(default_factory=dict)

    @property
    def item_ids(self) -> list[str]:
        return [x.id for x in getattr(self, self.ITEMS)]

    def item(self, item_id: str):
        for x in getattr(self, self.ITEMS):
            if x.id == item_id:
                return x
        raise KeyError(item_id)


# ---- ids -----------------------------------------------------------------------------------------
def _folder_name(text: str) -> bool:
    return bool(text) and "/" not in text and "\\" not in text and not text.startswith(".")


def plain_id(value) -> bool:
    """An int or a string of letters, digits and `. _ + -`, starting with a letter or digit."""
    return isinstance(value, (str, int)) and not isinstance(value, bool) and bool(PLAIN_ID.match(str(value)))


def _twice(form: ManifestForm, item_id: str) -> str:
    return f"{form.item} id {item_id!r} appears twice; {form.item} ids must be unique"


class FolderNameIds:
    """The documented rule: ids are plain folder / file names (numbers are taken as their text)."""

    def track_id(self, raw, bad: Callable[[str], UserError]) -> str:
        if raw is None or isinstance(raw, (bool, list, dict)):
            raise bad(
                f"`id` must be a string (a plain name), not {'null' if raw is None else type(raw).__name__}; "
                "fix: give the track an id such as my-track"
            )
        text = str(raw)
        if not _folder_name(text):
            raise bad(f"`id` {text!r} must be a non-empty plain name (it becomes a folder under results/)")
        if control_char(text) or len(text.encode("utf-8", "surrogatepass")) > TRACK_ID_MAX_BYTES:
            raise bad(
                f"`id` {text!r} must be a plain name without control characters, at most {TRACK_ID_MAX_BYTES} "
                "bytes (it becomes a folder under results/)"
            )
        return text

    def item_id(self, raw, index: int, seen: set[str], form: ManifestForm, bad: Callable[[str], UserError]) -> str:
        text = str(raw)
        if text in seen:  # a repeated id is named before the rule (as paired manifests always did)
            raise bad(_twice(form, text))
        if raw is None or not _folder_name(text) or control_char(text):
            raise bad(f"{form.item} id {text!r} must be a plain file name stem")
        return text


class PatternIds:
    """The stricter rule: ids are `plain_id`s (an int id stays an int in the item, e.g. as a seed)."""

    def track_id(self, raw, bad: Callable[[str], UserError]) -> str:
        if not plain_id(raw):
            raise bad(
                f"`id` {raw!r} must be a plain name (letters, digits, . _ + -; it becomes a folder under results/)"
            )
        return str(raw)

    def item_id(self, raw, index: int, seen: set[str], form: ManifestForm, bad: Callable[[str], UserError]) -> str:
        if not plain_id(raw):
            raise bad(f"{form.items}[{index}]: {form.item} id {raw!r} must be a plain name (letters, digits, . _ + -)")
        text = str(raw)
        if text in seen:
            raise bad(_twice(form, text))
        return text


# ---- the manifest --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ManifestForm:
    """What one kind's manifest looks like, as far as the shared reader needs to know."""

    what: str  # the file, in messages: "track manifest"
    items: str  # the key of the item list: "pairs"
    item: str  # one item, in messages: "pair"
    fields: tuple[str, ...]  # an item's fields, as the messages list them
    required: tuple[str, ...]  # the fields every item must have
    keys: str  # the top-level rule, after "it must be a mapping with "
    ids: FolderNameIds | PatternIds
    example: str = ""  # what a good manifest looks like, in one line of YAML (every error ends with it)


class TrackManifest:
    """A local track.yaml, read and checked in the part every kind shares; `bad` makes the kind's errors."""

    def __init__(self, path: Path, form: ManifestForm):
        path = Path(path)
        if not path.is_file():
            raise UserError(f"{path}: {form.what} not found; fix: give the path of an existing track.yaml")
        self.path, self.form, self.base = path, form, path.parent
        self.data = read_yaml(path, form.what)
        self._index: dict[str, int] = {}  # item id -> its position in the item list (for an error's line)
        if not isinstance(self.data, dict) or "id" not in self.data or form.items not in self.data:
            raise self.bad(f"it must be a mapping with {form.keys}")

    def bad(self, rule: str, at: tuple = (), item: str | None = None) -> UserError:
        """The error `rule` about this manifest: `path:line` of the value at `at` (keys from the top, or from
        item `item`'s entry), the rule, and an example of a good manifest."""
        from pytest_pstbench.core.files.yamlfile import yaml_line

        if item is not None and item in self._index:
            at = (self.form.items, self._index[item], *at)
        line = yaml_line(self.path, at)
        where = f"{self.path}:{line}" if line is not None else f"{self.path}"
        example = f"; expected e.g. `{self.form.example}`" if self.form.example else ""
        return UserError(f"{where}: invalid {self.form.what}: {rule}{example}")

    def track_id(self) -> str:
        return self.form.ids.track_id(self.data["id"], lambda rule: self.bad(rule, ("id",)))

    def items(self) -> Iterator[tuple[str, dict]]:
        """(item id, item mapping) in manifest order, each mapping with the required fields, ids unique."""
        form = self.form
        raw = self.data[form.items]
        if not isinstance(raw, list) or not raw:
            raise self.bad(f"`{form.items}` must be a non-empty list of {{{', '.join(form.fields)}}}", (form.items,))
        seen: set[str] = set()
        for i, entry in enumerate(raw):
            if not isinstance(entry, dict):
                raise self.bad(f"{form.items}[{i}] must be a mapping with {', '.join(form.fields)}", (form.items, i))
            missing = [key for key in form.required if key not in entry]
            if missing:
                raise self.bad(
                    f"{form.items}[{i}] lacks {', '.join(missing)}; fix: give every {form.item} "
                    f"{', '.join(form.required)}",
                    (form.items, i),
                )
            item_id = form.ids.item_id(
                entry["id"], i, seen, form, lambda rule, i=i: self.bad(rule, (form.items, i, "id"))
            )
            seen.add(item_id)
            self._index[item_id] = i
            yield item_id, entry

    def file(self, relative: str, item_id: str, role: str) -> Path:
        """The existing file `relative` (to the manifest's folder) that item `item_id` gives as its `role`."""
        # realpath, not Path.resolve(): a link to itself raises RuntimeError there (Python 3.11), and is a missing file here
        f = Path(os.path.realpath(self.base / relative))
        if not f.is_file():
            why = "is a link that loops or leads nowhere" if os.path.islink(f) else "does not exist"
            raise self.bad(
                f"{self.form.item} {item_id}: {role} file {f} {why}; fix the path (relative to the manifest)",
                (role,),
                item=item_id,
            )
        return f

    def track_fields(self, track_id: str, digest: Callable[[], str]) -> dict:
        """id, dataset_id, revision (the manifest's, else `digest()`), manifest and info of the track."""
        revision = self.data.get("revision")
        if revision is None:
            revision = digest()
        return {
            "id": track_id,
            "dataset_id": str(self.data.get("dataset", track_id)),
            "revision": str(revision),
            "manifest": self.path.resolve(),
            "info": json_ready({k: v for k, v in self.data.items() if k in INFO_KEYS}, self.path, self.form.what),
        }


def files_digest(parts: Iterable[tuple[str, Iterable[Path]]]) -> str:
    """A track's default revision: sha256 over its (header, files) parts in order, each part the header's
    bytes then each file's sha256 digest; the first 12 hex digits."""
    h = hashlib.sha256()
    for header, files in parts:
        h.update(header.encode())
        for f in files:
            h.update(hashlib.sha256(Path(f).read_bytes()).digest())
    return h.hexdigest()[:12]


# ---- remote tracks -------------------------------------------------------------------------------
def not_remote(track_id: str, what: str, track_ids: Iterable[str]) -> UserError:
    return UserError(f"--track {track_id}: not a {what}; fix: use one of {', '.join(track_ids)}")


def fetched_provenance(m, root: Path, lock: dict, lock_name: str, **own) -> dict:
    """The info of a remote track read from fetched data: its dataset (`m`, a remote dataset manifest),
    the pinned revision, the kind's `own` keys, where the data lies, and any revision override."""
    info = {
        "dataset": m.name,
        "pinned_revision": m.revision,
        **own,
        "data_root": str(root),
        "lock": str(root / lock_name),
        "source": lock.get("source", "hub"),
    }
    if lock.get("revision_override"):
        info["revision_override"] = dict(lock["revision_override"])
    return info


def fetched_note(track_id: str, count: str, m, lock: dict, where: Path) -> str:
    """The progress line of a remote track: `count` (e.g. "50 pairs") from which revision, and where."""
    return f"track {track_id}: {count} from {m.repo_id}@{lock['revision'][:12]} in {where}"

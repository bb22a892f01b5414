"""Dataset manifests of the remote benchmark data (PST50, AceTone-Bench, VAB).

A remote dataset is described by a manifest in ``protocols/tracks/<name>.yaml`` (repo id, pinned
revision, split folders, file naming, pair mapping, the tracks built from it); extra manifests come
from ``$PSTBENCH_REMOTE_MANIFESTS``. A manifest's ``kind`` names a registered track kind, whose KindSpec
declares the manifest's layout (``dataset_layout``, one of LAYOUTS): ``pairs``, image folders whose files
map to pairs (the paired kind), or ``tasks``, parquet files of task rows (the selection kind: VAB). This
module reads the layout through the kind registry (core.kinds) and never imports a kind.
``resolve_layout`` resolves a manifest's pair mapping against a file list (the Hub's, or a local copy's).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.progress import shown

MANIFESTS_ENV = "PSTBENCH_REMOTE_MANIFESTS"  # extra folder of dataset manifests (override shipped ones by name)
HEX_RE = re.compile(r"^[0-9a-f]{7,40}$")
_ROLES = ("content", "style", "reference")
PAIRS, TASKS = "pairs", "tasks"  # the dataset layouts a KindSpec may declare (`dataset_layout`)


@dataclass
class DatasetManifest:
    name: str
    path: Path
    repo_id: str
    repo_type: str
    revision: str | None  # None: unpinned
    splits: dict[str, dict]
    pairs: dict
    default_splits: list[str]
    tracks: dict[str, dict]
    data: dict = field(repr=False, default_factory=dict)
    kind: str = ""  # the registered track kind it names (`kind:`, else the default kind)
    layout: str = PAIRS  # that kind's dataset layout: PAIRS (image folders -> pairs) or TASKS (parquet rows -> tasks)

    @property
    def pinned(self) -> bool:
        return self.revision is not None

    def fetch_command(self, splits: list[str] | None = None, extra: str = "") -> str:
        cmd = f"pstbench data fetch {self.name}"
        if splits and set(splits) != set(self.default_splits):
            cmd += " --splits " + " ".join(splits)
        return cmd + extra


def manifest_dirs() -> list[Path]:
    from pytest_pstbench.core.protocol import protocols_dir

    dirs = [protocols_dir() / "tracks"]
    extra = os.environ.get(MANIFESTS_ENV)
    if extra:
        dirs.append(Path(extra).expanduser())
    return dirs


def load_manifests() -> dict[str, DatasetManifest]:
    """Dataset name -> manifest. Files in $PSTBENCH_REMOTE_MANIFESTS replace shipped ones of the same name."""
    found: dict[str, DatasetManifest] = {}
    for d in manifest_dirs():
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.yaml")):
            m = _load_manifest(path)
            found[m.name] = m
    track_owner: dict[str, str] = {}
    for m in found.values():
        for tid in m.tracks:
            if tid in track_owner and track_owner[tid] != m.name:
                raise UserError(
                    f"{m.path}: track id {tid!r} is also defined by dataset {track_owner[tid]}; track ids must be unique"
                )
            track_owner[tid] = m.name
    return found


def _load_manifest(path: Path) -> DatasetManifest:
    from pytest_pstbench.core.files.yamlfile import read_yaml

    data = read_yaml(path, "dataset manifest")

    def bad(rule: str) -> UserError:
        return UserError(f"{path}: invalid remote dataset manifest: {rule}; fix the file")

    if not isinstance(data, dict):
        raise bad("it must be a mapping")
    from pytest_pstbench.core.kinds import default_kind, registered

    specs, default = registered(), default_kind()
    kind = str(data.get("kind", default))
    if kind not in specs or specs[kind].dataset_layout not in LAYOUTS:
        others = [n for n, s in specs.items() if n != default and s.dataset_layout in LAYOUTS]
        raise bad(f"`kind` {kind!r} must be {default} (the default) or {' or '.join(others)}")
    return LAYOUTS[specs[kind].dataset_layout](path, data, bad, kind)


def _load_pairs_manifest(path: Path, data: dict, bad, kind: str) -> DatasetManifest:
    """The `pairs` layout: splits of image folders whose files map to pairs (see protocols/tracks/pst50.yaml)."""
    name, revision, splits = _head(data, bad, "pairs", "{folder, file_patterns | extensions}")
    for sname, spec in splits.items():
        if not isinstance(spec, dict) or "folder" not in spec:
            raise bad(f"split {sname!r} needs a `folder`")
    pairs = data["pairs"]
    if not isinstance(pairs, dict) or "id" not in pairs or not ({"numbered", "sorted"} & set(pairs)):
        raise bad("`pairs` needs `id` and one of `numbered: {first, last}` or `sorted: {count}`")
    _check_pairs(pairs, bad)
    if "numbered" in pairs:
        for sname, spec in splits.items():
            if not spec.get("file_patterns"):
                raise bad(f"split {sname!r} needs `file_patterns` (e.g. ['{{n}}.png']) for numbered pairs")
    tracks = data["tracks"]
    if not isinstance(tracks, dict) or not tracks:
        raise bad("`tracks` must map track ids to {content, style, reference}")
    for tid, spec in tracks.items():
        if not isinstance(spec, dict) or any(spec.get(r) not in splits for r in _ROLES):
            raise bad(f"track {tid!r} must name a split for each of content, style, reference")
    return _manifest(path, data, bad, name, revision, splits, pairs, tracks, kind, PAIRS)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_pairs(pairs: dict, bad) -> None:
    """`pairs.numbered` {first, last} or `pairs.sorted` {count}: whole numbers in range (a string, an inf or a
    5000-digit number is refused here, not met as a traceback when the layout is resolved); `pairs.id` a
    format of the pair's number (`{n}`, numbered) or position (`{i}`, sorted)."""
    if "numbered" in pairs:
        num, key = pairs["numbered"], "n"
        if (
            not isinstance(num, dict)
            or not (_whole(num.get("first")) and _whole(num.get("last")))
            or not 0 <= num["first"] <= num["last"] <= MAX_PAIRS
        ):
            raise bad(f"`pairs.numbered` must be {{first, last}}: whole numbers with 0 <= first <= last <= {MAX_PAIRS}")
    else:
        srt, key = pairs["sorted"], "i"
        count = srt.get("count") if isinstance(srt, dict) else None
        if not isinstance(srt, dict) or (count is not None and not (_whole(count) and 1 <= count <= MAX_PAIRS)):
            raise bad(f"`pairs.sorted` must be {{count}}: a whole number from 1 to {MAX_PAIRS} (or left out)")
    try:
        ok = isinstance(pairs["id"], str) and pairs["id"].format(**{key: 1}) != pairs["id"].format(**{key: 2})
    except (KeyError, IndexError, ValueError, TypeError):
        ok = False
    if not ok:
        raise bad(f"`pairs.id` {pairs['id']!r} must be a text with {{{key}}} (e.g. 'pst50-{{{key}:03d}}')")


MAX_PAIRS = 1_000_000  # the most pairs a numbered or sorted layout may have


def _manifest(
    path: Path,
    data: dict,
    bad,
    name: str,
    revision: str | None,
    splits: dict,
    pairs: dict,
    tracks: dict,
    kind: str,
    layout: str,
) -> DatasetManifest:
    """The checks and fields both layouts of manifest share: default splits, then the manifest object."""
    default_splits = list(data.get("default_splits") or splits)
    for s in default_splits:
        if s not in splits:
            raise bad(f"default split {s!r} is not in `splits`")
    return DatasetManifest(
        name=name,
        path=path.resolve(),
        repo_id=str(data["repo_id"]),
        repo_type=str(data.get("repo_type", "dataset")),
        revision=revision,
        splits=splits,
        pairs=pairs,
        default_splits=default_splits,
        tracks={str(k): v for k, v in tracks.items()},
        data=data,
        kind=kind,
        layout=layout,
    )


def _head(data: dict, bad, items_key: str, split_fields: str) -> tuple[str, str | None, dict]:
    """What both kinds of manifest open with: their keys present (`items_key`: `pairs` or `tasks`), then
    the name, the revision and `splits`, a non-empty mapping of split names to `split_fields`."""
    for key in ("name", "repo_id", "splits", items_key, "tracks"):
        if key not in data:
            raise bad(f"missing key `{key}`")
    name, revision = _name_and_revision(data, bad)
    splits = data["splits"]
    if not isinstance(splits, dict) or not splits:
        raise bad(f"`splits` must map split names to {split_fields}")
    return name, revision, splits


def _name_and_revision(data: dict, bad) -> tuple[str, str | None]:
    name = str(data["name"])
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise bad(f"`name` {name!r} must be a plain name")
    revision = data.get("revision")
    if revision is not None:
        revision = str(revision).lower()
        if not HEX_RE.match(revision):
            raise bad(
                f"`revision` {data.get('revision')!r} is not a commit (7 to 40 hex digits); a branch or tag is not a pin "
                "(use null while no commit is known)"
            )
    return name, revision


#: Columns a selection manifest's `tasks.columns` must map (pstbench's name -> the dataset's column).
SELECTION_COLUMNS = ("id", "domain", "topic", "n_images", "images", "labels", "best", "worst")


def _load_tasks_manifest(path: Path, data: dict, bad, kind: str) -> DatasetManifest:
    """The `tasks` layout: splits of parquet files whose rows are tasks (see protocols/tracks/vab.yaml)."""
    name, revision, splits = _head(data, bad, "tasks", "{folder, file_glob}")
    for sname, spec in splits.items():
        if not isinstance(spec, dict) or not spec.get("folder") or not isinstance(spec.get("file_glob"), str):
            raise bad(f"split {sname!r} needs a `folder` and a `file_glob` (e.g. 'test-*.parquet')")
    tasks = data["tasks"]
    cols = tasks.get("columns") if isinstance(tasks, dict) else None
    if not isinstance(cols, dict) or any(not isinstance(cols.get(c), str) for c in SELECTION_COLUMNS):
        raise bad(f"`tasks.columns` must map each of {', '.join(SELECTION_COLUMNS)} to a column name")
    rng = tasks.get("n_images")
    if (
        not isinstance(rng, dict)
        or any(isinstance(rng.get(b), bool) or not isinstance(rng.get(b), int) for b in ("min", "max"))
        or not 2 <= rng["min"] <= rng["max"]
    ):
        raise bad("`tasks.n_images` must be {min, max} with 2 <= min <= max")
    count = tasks.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise bad("`tasks.count` must be a positive integer (or absent)")
    tracks = data["tracks"]
    if not isinstance(tracks, dict) or not tracks:
        raise bad("`tracks` must map track ids to {split}")
    for tid, spec in tracks.items():
        if not isinstance(spec, dict) or spec.get("split") not in splits:
            raise bad(f"track {tid!r} must name one of the splits ({', '.join(splits)}) as `split`")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", str(tid)):
            raise bad(f"track id {tid!r} must be a plain name")
    return _manifest(path, data, bad, name, revision, splits, {}, tracks, kind, TASKS)


#: Dataset layout -> the loader of a manifest of that layout (path, data, bad, kind).
LAYOUTS = {PAIRS: _load_pairs_manifest, TASKS: _load_tasks_manifest}


def _of_kind(m: DatasetManifest, kind: str | None) -> bool:
    """`m` is of `kind` (a kind's name; "": the default kind; None: any kind)."""
    if kind == "":
        from pytest_pstbench.core.kinds import default_kind

        kind = default_kind()
    return kind is None or m.kind == kind


def remote_track_ids(kind: str | None = "") -> list[str]:
    """Track ids of the remote manifests of `kind` (the default kind when not given: pst50-paired ...; a kind's
    name, e.g. the selection kind's: vab; None: all)."""
    return [tid for m in load_manifests().values() if _of_kind(m, kind) for tid in m.tracks]


def find_track(track_id: str, kind: str | None = "") -> tuple[DatasetManifest, dict] | None:
    """The manifest of remote track `track_id` among those of `kind` (as `remote_track_ids`) and its track entry."""
    for m in load_manifests().values():
        if _of_kind(m, kind) and track_id in m.tracks:
            return m, m.tracks[track_id]
    return None


def get_manifest(name: str) -> DatasetManifest:
    manifests = load_manifests()
    if name not in manifests:
        owner = find_track(name, kind=None)
        hint = f" (track {name} belongs to dataset {owner[0].name})" if owner else ""
        raise UserError(
            f"dataset {name!r}: unknown remote dataset{hint}; fix: use one of {', '.join(sorted(manifests)) or '(none)'}"
        )
    return manifests[name]


def resolve_layout(m: DatasetManifest, listing: dict[str, dict], splits: list[str]) -> dict[str, dict[str, str]]:
    """split -> {pair id -> path in the repo}, from the manifest's rules and the revision's file list.

    For a selection manifest: split -> {file name -> path} of the files matching the split's
    `file_glob` directly under its folder, sorted (their rows, in this order, are the tasks).
    """
    if m.layout == TASKS:
        return _resolve_selection_layout(m, listing, splits)
    out: dict[str, dict[str, str]] = {}
    id_fmt = str(m.pairs["id"])
    for split in splits:
        spec = m.splits[split]
        folder = str(spec["folder"]).strip("/")
        mapping: dict[str, str] = {}
        if "numbered" in m.pairs:
            first, last = int(m.pairs["numbered"]["first"]), int(m.pairs["numbered"]["last"])
            missing = []
            for n in range(first, last + 1):
                cands = [f"{folder}/{pat.format(n=n)}" for pat in spec["file_patterns"]]
                found = [c for c in cands if c in listing]
                if len(found) > 1:
                    raise UserError(
                        f"{m.path}: split {split}: image {n} matches several files at this revision "
                        f"({', '.join(found)}); fix: keep one of the file_patterns"
                    )
                if not found:
                    missing.append(f"{n} (tried {', '.join(cands)})")
                    continue
                mapping[id_fmt.format(n=n)] = found[0]
            if missing:
                raise UserError(
                    f"{m.path}: split {split}: no file at this revision for image {shown(missing, 3)}; "
                    f"fix: correct `file_patterns` of split {split} to the layout the revision has"
                )
        else:
            exts = tuple(e.lower() for e in spec.get("extensions") or [".png"])
            files = sorted(p for p in listing if p.startswith(folder + "/") and p.lower().endswith(exts))
            want = m.pairs["sorted"].get("count")
            if want is not None and len(files) != int(want):
                raise UserError(
                    f"{m.path}: split {split}: {len(files)} files with extensions {', '.join(exts)} under {folder}/ "
                    f"at this revision, expected {want}; fix: correct the split's folder/extensions or pairs.sorted.count"
                )
            for i, p in enumerate(files):
                mapping[id_fmt.format(i=i)] = p
        out[split] = mapping
    ids = {s: list(v) for s, v in out.items()}
    ref = next(iter(ids.values()), [])
    for s, v in ids.items():
        if v != ref:
            raise UserError(
                f"{m.path}: split {s} has {len(v)} pairs, other splits {len(ref)}; the pair mapping must line up"
            )
    return out


def _resolve_selection_layout(
    m: DatasetManifest, listing: dict[str, dict], splits: list[str]
) -> dict[str, dict[str, str]]:
    import fnmatch

    out: dict[str, dict[str, str]] = {}
    for split in splits:
        spec = m.splits[split]
        folder = str(spec["folder"]).strip("/")
        pattern = str(spec["file_glob"])
        files = sorted(
            p
            for p in listing
            if p.startswith(folder + "/")
            and "/" not in p[len(folder) + 1 :]
            and fnmatch.fnmatchcase(p[len(folder) + 1 :], pattern)
        )
        if not files:
            raise UserError(
                f"{m.path}: split {split}: no file matching {folder}/{pattern} at this revision; "
                f"fix: correct the split's folder/file_glob to the layout the revision has"
            )
        out[split] = {p.rsplit("/", 1)[-1]: p for p in files}
    return out

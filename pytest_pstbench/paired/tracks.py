"""Tracks and pairs: the built-in demo track, local manifest tracks, and remote tracks (PST50,
AceTone-Bench) from data fetched by `pstbench data fetch` (pytest_pstbench.data).

A track is an ordered list of pairs, each with a content, a style and a reference image, plus
a dataset id and revision that run files record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_pstbench.core.errors import UserError, did_you_mean
from pytest_pstbench.core.files.images import sniff_format
from pytest_pstbench.core.tracks import (
    FolderNameIds,
    ManifestForm,
    TrackBase,
    TrackManifest,
    fetched_note,
    fetched_provenance,
    files_digest,
    manifest_path,
    not_remote,
)

BUILTIN_TRACKS = ("demo",)
ROLES = ("content", "style", "reference")
#: A paired track's manifest: `id` and `pairs`, each pair with an id and a file per role (docs/tracks-and-data.md).
PAIRED_MANIFEST = ManifestForm(
    what="track manifest",
    items="pairs",
    item="pair",
    fields=("id", *ROLES),
    required=("id", *ROLES),
    keys="keys `id` and `pairs`",
    ids=FolderNameIds(),
    example="{id: my-track, pairs: [{id: p01, content: content/p01.png, style: style/p01.png, reference: reference/p01.png}]}",
)


@dataclass(frozen=True)
class Pair:
    id: str
    content: Path
    style: Path
    reference: Path
    cluster: str | None = (
        None  # the manifest's optional `cluster` (pairs that share an input image; paired/clusters.py)
    )


@dataclass
class Track(TrackBase):
    """A paired track: id, dataset id and revision, source, manifest and info (TrackBase), and its pairs."""

    ITEMS: ClassVar[str] = "pairs"
    pairs: list[Pair] = field(kw_only=True)
    pair_ids = TrackBase.item_ids  # [pair id, ...] in track order
    pair = TrackBase.item  # pair(pair_id) -> Pair; KeyError when the track has no such pair


def resolve_track(spec: str, progress=None) -> Track:
    """`demo`, a remote track id (protocols/tracks/*.yaml), or a path to a local track manifest."""
    if spec == "demo":
        from pytest_pstbench.paired.demo import build_demo_track

        manifest = build_demo_track(progress=progress)
        return load_manifest(manifest, source="demo")
    from pytest_pstbench.data.manifest import remote_track_ids

    remote_ids = remote_track_ids()
    if spec in remote_ids:
        return load_remote_track(spec, progress=progress)
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_manifest(manifest_path(path), source="local")
    raise UserError(
        f"--track {spec}: unknown track{did_you_mean(spec, [*BUILTIN_TRACKS, *remote_ids])}; give a built-in track ({', '.join(BUILTIN_TRACKS)}), "
        f"a remote track ({', '.join(remote_ids)}) "
        "or the path to a local track manifest (a YAML file with `id` and `pairs`)"
    )


def load_remote_track(track_id: str, progress=None):
    """The remote track `track_id` from data already fetched; fails fast (with the fetch command) otherwise.

    Checks presence and size of every file the track uses (and any hash failure `verify` recorded);
    never touches the network.
    """
    from pytest_pstbench.data.dataset_lock import LOCK_NAME
    from pytest_pstbench.data.manifest import find_track, remote_track_ids
    from pytest_pstbench.data.verify import checked_data

    found = find_track(track_id)
    if found is None:
        raise not_remote(track_id, "remote track", remote_track_ids())
    m, spec = found
    roles = {r: str(spec[r]) for r in ROLES}
    needed = list(dict.fromkeys(roles.values()))
    root, lock, cmd, paths = checked_data(m, track_id, needed)
    ids = list(lock["pairs"][roles["content"]])
    for r in ("style", "reference"):
        if list(lock["pairs"][roles[r]]) != ids:
            raise UserError(
                f"{root / LOCK_NAME}: pair ids of split {roles[r]} do not line up with {roles['content']}; fix: fetch again"
            )
    pairs = [Pair(pid, *(Path(os.path.realpath(root / lock["pairs"][roles[r]][pid])) for r in ROLES)) for pid in ids]
    info = fetched_provenance(
        m, root, lock, LOCK_NAME, description=spec.get("description"), splits=roles, content_split=roles["content"]
    )
    decoders = image_decoders_info(root / p for p in paths)  # JPEG etc.: read as dataset images, decoders recorded
    if decoders:
        info["image_decoders"] = decoders
    if progress:
        progress(fetched_note(track_id, f"{len(pairs)} pairs", m, lock, root))
    return Track(
        id=track_id,
        dataset_id=m.repo_id,
        revision=lock["revision"],
        pairs=pairs,
        source="remote",
        manifest=m.path,
        info=info,
    )


def load_manifest(path: Path, source: str = "local") -> Track:
    """The local paired track at `path` (a track.yaml; see docs/tracks-and-data.md)."""
    manifest = TrackManifest(path, PAIRED_MANIFEST)
    track_id = manifest.track_id()
    pairs = [
        Pair(
            pid, *(manifest.file(str(entry[r]), pid, r) for r in ROLES), cluster=declared_cluster(manifest, pid, entry)
        )
        for pid, entry in manifest.items()
    ]
    undeclared = [p.id for p in pairs if p.cluster is None]
    if undeclared and len(undeclared) < len(pairs):
        raise manifest.bad(
            f"pair {undeclared[0]} has no cluster but other pairs declare one; a track declares a cluster "
            "for every pair or for none; fix: give every pair a `cluster` (a pair alone may have its own)",
            item=undeclared[0],
        )
    fields = manifest.track_fields(track_id, lambda: files_revision(pairs))
    decoders = image_decoders_info(f for p in pairs for f in (p.content, p.style, p.reference))
    if decoders:
        fields["info"]["image_decoders"] = decoders
    return Track(pairs=pairs, source=source, **fields)


def declared_cluster(manifest: TrackManifest, pair_id: str, entry: dict) -> str | None:
    """A pair's optional `cluster`: a non-empty string naming the group of pairs that share an input image."""
    if "cluster" not in entry:
        return None
    value = entry["cluster"]
    if not isinstance(value, str) or not value.strip():
        raise manifest.bad(
            f"pair {pair_id}: cluster {value!r} is not a name; a cluster is a non-empty string (e.g. the "
            "shared content image's name); fix: write cluster: NAME, quoted if it looks like a number",
            ("cluster",),
            item=pair_id,
        )
    return value


def image_decoders_info(paths) -> dict | None:
    """None when every dataset image is a PNG; else the formats present and the decoders that read them
    (recorded in run.json as dataset.image_decoders). Reads the first bytes of each file only."""
    formats = {sniff_format(Path(p)) for p in paths}
    if formats <= {"PNG"}:
        return None
    from pytest_pstbench.paired.imageio import dataset_decoders

    return dataset_decoders(formats - {"other"})


def files_revision(pairs: list[Pair]) -> str:
    """sha256 over every listed file (pair id, role and bytes, in track order); first 12 hex digits."""
    return files_digest((f"{p.id}\0{role}\0", (getattr(p, role),)) for p in pairs for role in ROLES)


def resolve_outputs(track: Track, outputs_dir: Path, allow_outside_links: bool = False) -> dict[str, Path]:
    """Map pair id -> expected output path in `outputs_dir` (`<pair_id>.png`).

    PNGs not named after a pair of the track are refused (listed in the error); other file types
    are ignored. A missing output is not an error here: that pair fails when it is scored.
    """
    outputs_dir = Path(outputs_dir)
    if not outputs_dir.is_dir():
        raise UserError(
            f"{outputs_dir}: outputs folder not found; fix: give a folder with one <pair_id>.png per pair "
            f"of track {track.id}"
        )
    known = set(track.pair_ids)
    stray = sorted(p.name for p in outputs_dir.iterdir() if p.suffix.lower() == ".png" and p.stem not in known)
    if stray:
        shown = ", ".join(stray[:10]) + (f" and {len(stray) - 10} more" if len(stray) > 10 else "")
        raise UserError(
            f"{outputs_dir}: PNG files not named after a pair of track {track.id}: {shown}; "
            f"fix: name outputs <pair_id>.png (e.g. {track.pair_ids[0]}.png) or move the others away"
        )
    outputs = {pid: outputs_dir / f"{pid}.png" for pid in track.pair_ids}
    for path in outputs.values():
        check_inside_outputs(path, outputs_dir, allow=allow_outside_links)
    return outputs


def missing_output_error(out_path: Path, pair_id: str) -> UserError:
    """The error for a pair whose `<pair_id>.png` is not there, naming a file of that pair under another
    name (another extension, another case: `demo-03.jpg`, `demo-03.PNG`) and the rule it breaks."""
    out_path = Path(out_path)
    head = f"{out_path} (output): missing output for pair {pair_id}"
    try:
        near = sorted(
            e.name
            for e in os.scandir(out_path.parent)
            if e.name != out_path.name and (e.name.lower() == out_path.name.lower() or Path(e.name).stem == pair_id)
        )[:3]
    except OSError:
        near = []
    if not near:
        return UserError(f"{head}; fix: write {pair_id}.png into the outputs folder")
    found = ", ".join(near)
    if any(Path(n).suffix.lower() == ".png" for n in near):
        return UserError(
            f"{head}; found {found}: an output's name must be exactly <pair_id>.png (lower-case .png); "
            f"fix: rename it {pair_id}.png"
        )
    return UserError(
        f"{head}; found {found}: outputs must be PNG files named <pair_id>.png (a JPEG or other format "
        f"is not read); fix: save the output as PNG, {pair_id}.png (lossless, not a renamed JPEG)"
    )


def check_inside_outputs(path: Path, outputs_dir: Path, allow: bool = False) -> str | None:
    """An output must be a file inside the outputs folder once links are resolved: a link that leaves
    the folder (e.g. to the track's ground truth) is refused, unless `allow` (--allow-outside-links),
    when the link's target is returned (for run.json)."""
    path = Path(path)
    if not path.is_symlink():
        return None
    # realpath, not Path.resolve(): a link to itself raises RuntimeError there (Python 3.11)
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(outputs_dir))
    if real != root and root not in real.parents:
        if allow:
            return str(real)
        raise UserError(
            f"{path} (output): is a link to {real}, outside the outputs folder {root}; outputs must be files inside "
            "the outputs folder; fix: copy the image into the outputs folder instead of linking to it "
            "(or pass --allow-outside-links, recorded in run.json)"
        )
    return None

"""Tracks and pairs: the built-in demo track, local manifest tracks, and remote tracks (PST50,
AceTone-Bench) from data fetched by `pstbench data fetch` (pytest_pstbench.data).

A track is an ordered list of pairs, each with a content, a style and a reference image, plus
a dataset id and revision that run files record.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.images import sniff_format
from pytest_pstbench.core.runs import _control_char

BUILTIN_TRACKS = ("demo",)
ROLES = ("content", "style", "reference")


@dataclass(frozen=True)
class Pair:
    id: str
    content: Path
    style: Path
    reference: Path


@dataclass
class Track:
    id: str
    dataset_id: str
    revision: str
    pairs: list[Pair]
    source: str  # "demo" | "local" | "remote"
    manifest: Path | None = None
    info: dict = field(default_factory=dict)

    @property
    def pair_ids(self) -> list[str]:
        return [p.id for p in self.pairs]

    def pair(self, pair_id: str) -> Pair:
        for p in self.pairs:
            if p.id == pair_id:
                return p
        raise KeyError(pair_id)


def resolve_track(spec: str, progress=None) -> Track:
    """`demo`, a remote track id (protocols/tracks/*.yaml), or a path to a local track manifest."""
    if spec == "demo":
        from pytest_pstbench.data.demo import build_demo_track

        manifest = build_demo_track(progress=progress)
        return load_manifest(manifest, source="demo")
    from pytest_pstbench.data.manifest import remote_track_ids

    remote_ids = remote_track_ids()
    if spec in remote_ids:
        return load_remote_track(spec, progress=progress)
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if path.is_dir():
            path = path / "track.yaml"
        return load_manifest(path, source="local")
    raise UserError(
        f"--track {spec}: unknown track; give a built-in track ({', '.join(BUILTIN_TRACKS)}), "
        f"a remote track ({', '.join(remote_ids)}) "
        "or the path to a local track manifest (a YAML file with `id` and `pairs`)"
    )


def load_remote_track(track_id: str, progress=None):
    """The remote track `track_id` from data already fetched; fails fast (with the fetch command) otherwise.

    Checks presence and size of every file the track uses (and any hash failure `verify` recorded);
    never touches the network.
    """
    from pytest_pstbench.data.lock import LOCK_NAME
    from pytest_pstbench.data.manifest import find_track, remote_track_ids
    from pytest_pstbench.data.verify import checked_data

    found = find_track(track_id)
    if found is None:
        raise UserError(f"--track {track_id}: not a remote track; fix: use one of {', '.join(remote_track_ids())}")
    m, spec = found
    roles = {r: str(spec[r]) for r in ROLES}
    needed = list(dict.fromkeys(roles.values()))
    root, lock, cmd, paths = checked_data(m, track_id, needed)
    ids = list(lock["pairs"][roles["content"]])
    for r in ("style", "reference"):
        if list(lock["pairs"][roles[r]]) != ids:
            raise UserError(f"{root / LOCK_NAME}: pair ids of split {roles[r]} do not line up with {roles['content']}; fix: fetch again")
    pairs = [
        Pair(pid, *((root / lock["pairs"][roles[r]][pid]).resolve() for r in ROLES))
        for pid in ids
    ]
    info = {
        "dataset": m.name,
        "description": spec.get("description"),
        "pinned_revision": m.revision,
        "splits": roles,
        "content_split": roles["content"],
        "data_root": str(root),
        "lock": str(root / LOCK_NAME),
        "source": lock.get("source", "hub"),
    }
    if lock.get("revision_override"):
        info["revision_override"] = dict(lock["revision_override"])
    decoders = image_decoders_info(root / p for p in paths)  # JPEG etc.: read as dataset images, decoders recorded
    if decoders:
        info["image_decoders"] = decoders
    if progress:
        progress(f"track {track_id}: {len(pairs)} pairs from {m.repo_id}@{lock['revision'][:12]} in {root}")
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
    from pytest_pstbench.core.yamlfile import read_yaml

    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: track manifest not found; fix: give the path of an existing track.yaml")
    data = read_yaml(path, "track manifest")

    def bad(rule: str) -> UserError:
        return UserError(f"{path}: invalid track manifest: {rule}")

    if not isinstance(data, dict) or "id" not in data or "pairs" not in data:
        raise bad("it must be a mapping with keys `id` and `pairs`")
    if data["id"] is None or isinstance(data["id"], (bool, list, dict)):
        raise bad(f"`id` must be a string (a plain name), not {'null' if data['id'] is None else type(data['id']).__name__}; "
                  "fix: give the track an id such as my-track")
    track_id = str(data["id"])
    if not track_id or "/" in track_id or "\\" in track_id or track_id.startswith("."):
        raise bad(f"`id` {track_id!r} must be a non-empty plain name (it becomes a folder under results/)")
    if _control_char(track_id) or len(track_id.encode("utf-8", "surrogatepass")) > 200:
        raise bad(f"`id` {track_id!r} must be a plain name without control characters, at most 200 bytes "
                  "(it becomes a folder under results/)")
    pairs_raw = data["pairs"]
    if not isinstance(pairs_raw, list) or not pairs_raw:
        raise bad("`pairs` must be a non-empty list of {id, content, style, reference}")
    base = path.parent
    pairs: list[Pair] = []
    seen: set[str] = set()
    for i, entry in enumerate(pairs_raw):
        if not isinstance(entry, dict):
            raise bad(f"pairs[{i}] must be a mapping with id, content, style, reference")
        missing = [k for k in ("id", "content", "style", "reference") if k not in entry]
        if missing:
            raise bad(f"pairs[{i}] lacks {', '.join(missing)}")
        pid = str(entry["id"])
        if pid in seen:
            raise bad(f"pair id {pid!r} appears twice; pair ids must be unique")
        if not pid or "/" in pid or "\\" in pid or pid.startswith(".") or _control_char(pid) or entry["id"] is None:
            raise bad(f"pair id {pid!r} must be a plain file name stem")
        seen.add(pid)
        files = {}
        for key in ("content", "style", "reference"):
            f = (base / str(entry[key])).resolve()
            if not f.is_file():
                raise bad(f"pair {pid}: {key} file {f} does not exist; fix the path (relative to the manifest)")
            files[key] = f
        pairs.append(Pair(pid, files["content"], files["style"], files["reference"]))
    revision = data.get("revision")
    if revision is None:
        revision = files_revision(pairs)
    info = {k: v for k, v in data.items() if k in ("name", "generator", "description")}
    decoders = image_decoders_info(f for p in pairs for f in (p.content, p.style, p.reference))
    if decoders:
        info["image_decoders"] = decoders
    return Track(
        id=track_id,
        dataset_id=str(data.get("dataset", track_id)),
        revision=str(revision),
        pairs=pairs,
        source=source,
        manifest=path.resolve(),
        info=info,
    )


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
    h = hashlib.sha256()
    for p in pairs:
        for role in ("content", "style", "reference"):
            h.update(f"{p.id}\0{role}\0".encode())
            h.update(hashlib.sha256(getattr(p, role).read_bytes()).digest())
    return h.hexdigest()[:12]


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


def check_inside_outputs(path: Path, outputs_dir: Path, allow: bool = False) -> str | None:
    """An output must be a file inside the outputs folder once links are resolved: a link that leaves
    the folder (e.g. to the track's ground truth) is refused, unless `allow` (--allow-outside-links),
    when the link's target is returned (for run.json)."""
    path = Path(path)
    if not path.is_symlink():
        return None
    real, root = path.resolve(), Path(outputs_dir).resolve()
    if real != root and root not in real.parents:
        if allow:
            return str(real)
        raise UserError(
            f"{path} (output): is a link to {real}, outside the outputs folder {root}; outputs must be files inside "
            "the outputs folder; fix: copy the image into the outputs folder instead of linking to it "
            "(or pass --allow-outside-links, recorded in run.json)"
        )
    return None

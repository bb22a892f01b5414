"""Thumbnails of `pstbench report` (Pillow, imported when made): the track's content, style and
reference images and each run's output, written once per source file, or a placeholder with the reason."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.paired.report.page import Image, Page


# ---- thumbnails --------------------------------------------------------------------------------
def track_for(page: Page, track_spec: str | None, progress):
    from pytest_pstbench.paired.tracks import resolve_track

    # a local track is found by the manifest path run.json records (when that file still exists); never for a
    # published run: its record names a file of the machine that scored it, not of this one
    local = not any(page.published)
    spec = track_spec or (
        page.manifest if local and isinstance(page.manifest, str) and Path(page.manifest).is_file() else page.track_id
    )
    try:
        track = resolve_track(spec, progress=progress)
    except UserError as exc:
        if track_spec:
            raise
        page.notes.append(
            f"content, style and reference images: track {page.track_id} could not be opened ({exc}); "
            "fix: pass --track with the track (for a local track, the path of its track.yaml)"
        )
        return None
    for label, have, want in (
        ("id", track.id, page.track_id),
        ("dataset id", track.dataset_id, page.dataset_id),
        ("dataset revision", track.revision, page.revision),
    ):
        if have != want:
            msg = f"--track {spec}: its {label} is {have!r} but the runs were scored on {want!r}"
            if track_spec:
                raise UserError(f"{msg}; fix: pass the track the runs were scored on")
            page.notes.append(
                f"content, style and reference images not shown: {msg}; fix: pass --track with that track"
            )
            return None
    return track


class Thumbs:
    def __init__(self, stage: Path, size: int):
        self.stage, self.size = stage, size
        self.by_source: dict[Path, Image] = {}
        self.count = 0

    def make(self, src: Path) -> Image:
        """Thumbnail of `src`, written once per source file (or a placeholder with the reason)."""
        from PIL import Image as PILImage
        from PIL import UnidentifiedImageError

        from pytest_pstbench.core.files.images import write_thumbnail

        key = Path(os.path.realpath(src))  # not Path.resolve(): a link to itself raises RuntimeError there
        if key in self.by_source:
            return Image(self.by_source[key].src, size=self.by_source[key].size)
        self.count += 1
        rel = f"thumbs/{self.count:05d}.jpg"
        try:
            size = write_thumbnail(src, self.stage / rel, self.size)
        except (OSError, ValueError, UnidentifiedImageError, PILImage.DecompressionBombError) as exc:
            self.count -= 1
            return Image(None, missing=f"{src}: cannot be read as an image ({type(exc).__name__}: {exc})")
        self.by_source[key] = Image(rel, size=size)
        return Image(rel, size=size)


def _inside(path: Path, folder: Path) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _find_output(run, pair_id: str, published: bool = False) -> tuple[Path | None, str | None, str | None]:
    """(path, recorded sha256, reason when not found) of a run's output for a pair. A published run's paths
    are read inside its run folder only (what its run.json names elsewhere is a file of the machine that
    scored it, never one of this machine's); a local run's as recorded, relative to the current folder and
    to the run folder's parents."""
    recorded = {o.get("pair"): o for o in run.run.get("outputs") or [] if isinstance(o, dict)}
    entry = recorded.get(pair_id)
    if entry is not None and entry.get("path") == "<array>":
        return None, None, "scored from an in-memory array (pstbench_score); there is no file"
    bases = [run.path] if published else [Path.cwd(), *run.path.resolve().parents]
    candidates: list[Path] = []

    def add(p: str | Path | None) -> None:
        if not p:
            return
        p = Path(p)
        candidates.extend([p] if p.is_absolute() else [b / p for b in bases])

    if entry is not None:
        add(entry.get("path"))
    if run.run.get("outputs_dir"):
        add(Path(run.run["outputs_dir"]) / f"{pair_id}.png")
    candidates.append(run.path / "outputs" / f"{pair_id}.png")
    for c in candidates:
        if published and not _inside(c, run.path):
            continue
        if c.is_file():
            return c, (entry or {}).get("sha256"), None
    if entry is None and not run.run.get("outputs_dir"):
        return None, None, "run.json records no output file for this pair"
    shown = (entry or {}).get("path") or str(Path(run.run["outputs_dir"]) / f"{pair_id}.png")
    if published:
        return (
            None,
            None,
            (
                f"output file {shown} is not in the published run's folder (a published run's paths are "
                "read inside its folder only, never elsewhere on this machine)"
            ),
        )
    return (
        None,
        None,
        f"output file {shown} not found (looked relative to the current folder and to the run folder's parents)",
    )


def thumbnails(page: Page, track, stage: Path, size: int, progress) -> None:
    from pytest_pstbench.core.paths import file_sha256

    thumbs = Thumbs(stage, size)
    missing = 0
    for k, pid in enumerate(page.shown, 1):
        if progress and (k == 1 or k % 10 == 0 or k == len(page.shown)):
            progress(f"report: thumbnails [{k}/{len(page.shown)}] {pid}")
        pair = None
        if track is not None:
            try:
                pair = track.pair(pid)
            except KeyError:
                pair = None
        for role in ("content", "style", "reference"):
            if track is None:
                img = Image(None, missing="track images not available (see notes)")
            elif pair is None:
                img = Image(None, missing=f"pair {pid} is not in track {track.id}")
            else:
                img = thumbs.make(getattr(pair, role))
            if img.src is None and track is not None:
                missing += 1
                page.notes.append(f"pair {pid}, {role}: {img.missing}")
            page.pair_images[(pid, role)] = img
        for i, run in enumerate(page.runs):
            if pid not in run.scores:
                page.pair_images[(pid, i)] = Image(None, missing="pair not in this run")
                continue
            path, sha, reason = _find_output(run, pid, bool(page.published and page.published[i]))
            if path is None:
                img = Image(None, missing=reason)
            else:
                img = thumbs.make(path)
                if img.src and sha and file_sha256(path) != sha:
                    img.warning = "file changed since it was scored"
                    page.notes.append(
                        f"pair {pid}, {page.labels[i]}: {path} differs from the file that was scored (sha256 in run.json); the thumbnail may not match the scores"
                    )
            if img.src is None:
                missing += 1
                page.notes.append(f"pair {pid}, {page.labels[i]}: {img.missing}")
            page.pair_images[(pid, i)] = img
    if missing and progress:
        progress(f"report: {missing} image(s) not found; shown as placeholders and listed under Notes")

"""The board's runs: every SOURCE resolved by the run store, each run read and validated by its kind (through the
registry), grouped by track; what cannot be read, validated or compared is left out with its reason."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.compare import checked_runs
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.kinds import RunKind, default_kind, get, run_kind
from pytest_pstbench.core.text import one_line

MAX_DEPTH = 2  # a results folder: results/<track>/<name>/


@dataclass
class BoardRun:
    """One run on the board: where it came from (a store RunSource) and the kind's run object."""

    source: object
    run: object
    kind: RunKind
    protocol: object

    @property
    def name(self) -> str:
        return self.run.record.name

    @property
    def setting(self) -> tuple:
        r = self.run.record
        return (r.protocol_sha256, r.dataset_id, r.dataset_revision)


@dataclass
class Track:
    """The runs of one track, all of one kind, protocol file and dataset revision."""

    kind: str
    track: str
    runs: list[BoardRun] = field(default_factory=list)

    @property
    def protocol(self):
        return self.runs[0].protocol


@dataclass
class LeftOut:
    what: str  # the run folder or address
    reason: str  # one line


def run_folders(address: str) -> list[str]:
    """A local address as run folders: itself when it holds run.json or summary.json (whatever they are: a damaged
    one is read and refused), else the run folders below it (a results
    folder: results/<track>/<name>/, at most MAX_DEPTH levels), links to folders not followed (nothing outside
    what was given is read)."""
    found: list[str] = []

    def walk(folder: str, depth: int) -> None:
        if depth == MAX_DEPTH or any(os.path.lexists(os.path.join(folder, f)) for f in ("run.json", "summary.json")):
            found.append(folder)
            return
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            found.append(folder)  # its reader names the problem
            return
        subs = [e.path for e in entries if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")]
        if not subs and depth == 0:
            found.append(folder)
        for s in subs:
            walk(s, depth + 1)

    walk(address, 0)
    return found


def _sources(addresses, protocol_spec, progress, left_out: list[LeftOut]) -> list:
    from pytest_pstbench.core.store.backends import RunSource, is_published, resolve_runs

    out = []
    for address in addresses:
        address = str(address)
        if is_published(address):
            try:
                out.extend(resolve_runs([address], option="SOURCE", protocol_spec=protocol_spec, progress=progress))
            except UserError as exc:
                left_out.append(LeftOut(address, one_line(str(exc))))
            continue
        if not os.path.isdir(address):
            raise UserError(
                f"SOURCE {address}: not a folder nor a published run path; fix: give a run folder, a "
                "results folder or hf://datasets/OWNER/NAME[@REV]/PATH"
            )
        out.extend(RunSource(Path(p)) for p in run_folders(address))
    return out


def _read(source, protocol_spec) -> BoardRun:
    kind = get(run_kind(source.path) or default_kind())
    run = kind.load(source.path)
    protocol = checked_runs(kind, [run], protocol_spec=protocol_spec)  # the one validating reader's checks
    return BoardRun(source, run, kind, protocol)


def collect(addresses, *, protocol_spec=None, progress=None) -> tuple[list[Track], list[LeftOut]]:
    """The board's tracks (in the order first seen) and the runs left out, each with its reason."""
    left_out: list[LeftOut] = []
    tracks: dict[tuple, Track] = {}
    seen: dict[str, str] = {}
    for source in _sources(addresses, protocol_spec, progress, left_out):
        key = os.path.realpath(source.path)
        if key in seen:
            left_out.append(LeftOut(str(source), f"given twice (also as {seen[key]})"))
            continue
        seen[key] = str(source)
        try:
            br = _read(source, protocol_spec)
        except UserError as exc:
            left_out.append(LeftOut(str(source), one_line(str(exc))))
            continue
        t = tracks.setdefault((br.kind.name, br.run.record.track), Track(br.kind.name, br.run.record.track))
        t.runs.append(br)
    for t in tracks.values():
        _keep_comparable(t, left_out)
    return [t for t in tracks.values() if t.runs], left_out


def _keep_comparable(t: Track, left_out: list[LeftOut]) -> None:
    """Keep the runs of the track's most common setting (protocol file, dataset, revision) that its kind can
    compare with each other, one per name; the others are left out with the reason."""
    common = Counter(r.setting for r in t.runs).most_common(1)[0][0]
    kept: list[BoardRun] = []
    names: dict[str, str] = {}
    for r in t.runs:
        if r.setting != common:
            left_out.append(
                LeftOut(
                    str(r.source),
                    f"track {t.track}: made under protocol sha256 {str(r.setting[0])[:12]} on dataset "
                    f"{r.setting[1]}@{r.setting[2]}, not the board's {str(common[0])[:12]} on {common[1]}@{common[2]}",
                )
            )
            continue
        if r.name in names:
            left_out.append(LeftOut(str(r.source), f"track {t.track}: run name {r.name!r} is also {names[r.name]}"))
            continue
        try:
            r.kind.check_comparable([kept[0].run, r.run] if kept else [r.run])
        except UserError as exc:
            left_out.append(LeftOut(str(r.source), one_line(str(exc))))
            continue
        names[r.name] = str(r.source)
        kept.append(r)
    t.runs = kept

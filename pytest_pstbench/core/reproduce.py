"""`pstbench reproduce`'s kind-neutral part: a run's recorded setting (the exact protocol file by its sha256, the
track at its dataset revision), the differences between the run's files and the files of the run scored again,
and the reproduce report (what `pstbench board --reproduced` reads). Each kind scores again through its own
scoring entry point (its KindSpec's `reproduce` hook) and hands back a `Reproduction`. Standard library only."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError

REPORT_GENERATOR = "pstbench reproduce"
REPORT_FORMAT = 1
SHOWN = 10  # differences listed on the terminal (the report holds them all)


@dataclass(frozen=True)
class ReproduceRequest:
    """What the CLI door hands a kind's `reproduce` hook: the run (a loaded run of the kind, its folder, its pinned
    URI when published), what scores it again (`outputs`: a paired method's outputs folder; a selection run's
    answers file or judge), an explicit track or protocol where the recorded ones are not found here, and a
    scratch folder the run is scored into."""

    run: object  # the kind's run object (.path, .run: run.json, .record)
    outputs: str
    work: Path
    track_spec: str | None = None
    protocol_spec: str | None = None
    device: str | None = None
    progress: object = None


@dataclass
class Reproduction:
    """A run scored again: the files compared, what differs ({"item": id or file, "fields": [...]}), the run's
    recorded environment and the one it was scored in now."""

    kind: str
    compared: tuple[str, ...]  # the run files compared byte for byte ("metrics.csv", "summary.json")
    differences: list[dict] = field(default_factory=list)
    then: dict = field(default_factory=dict)
    now: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # "item: message" of each item that failed when scored again

    @property
    def reproduced(self) -> bool:
        return not self.differences


def recorded_protocol(run, spec: str | None = None):
    """The protocol file the run was made under, found as every reader of runs finds it (`core.compare.protocol_for`:
    `spec` (`--protocol`), else the protocol id run.json records, else the path it records, matched by sha256).
    Where none matches: one line naming the run's digest and those of the files here, and the fix."""
    import os

    from pytest_pstbench.core.compare import protocol_for
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.core.store.reader import run_field

    try:
        return protocol_for([run], spec)
    except UserError:
        pass  # no file with the run's digest: name the ones here
    want = run.record.protocol_sha256
    candidates = [spec] if spec else [run.record.protocol_id, run.record.protocol_path]
    found, refused = [], None
    for c in candidates:
        if not isinstance(c, str) or not c:
            continue
        try:
            found.append(load_protocol(c))
        except UserError as exc:
            if spec or c == run.record.protocol_path and os.path.lexists(c):  # a file there that cannot be read
                refused = refused or exc
    if refused is not None:
        raise refused
    kit = run_field(run, "environment", "pytest_pstbench")
    recorded = f" (recorded at {run.record.protocol_path})" if run.record.protocol_path else ""
    if not found:
        raise UserError(
            f"{run.path / 'run.json'}: made under protocol {run.record.protocol_id} (sha256 {want}){recorded}, which is not "
            "installed here; fix: pass --protocol PATH of the protocol file with that sha256"
        )
    here = "; ".join(f"{p.path} has sha256 {p.sha256}" for p in found)
    raise UserError(
        f"{run.path / 'run.json'}: made under protocol {run.record.protocol_id} sha256 {want}{recorded}, but the protocol "
        f"{'given' if spec else 'installed'} differs ({here}); fix: pass --protocol PATH of the file "
        f"with sha256 {str(want)[:12]}"
        + (f" (the run was made with pytest-pstbench {kit})" if isinstance(kit, str) else "")
    )


def track_spec(run, given: str | None) -> str:
    """The track to score again: `--track` where given, else the local manifest run.json records (where anything is
    at its path: its reader names what is wrong with it), else the track id it records (a built-in or fetched
    track). A local track whose manifest is not recorded or gone is one line asking for `--track`."""
    import os

    from pytest_pstbench.core.store.reader import run_field

    if given:
        return given
    manifest = run_field(run, "dataset", "manifest")
    if isinstance(manifest, str) and manifest and os.path.lexists(manifest):
        return manifest
    if run_field(run, "dataset", "source") == "local":
        where = f"its manifest {manifest} is not there" if isinstance(manifest, str) else "run.json records no manifest"
        raise UserError(
            f"{run.path / 'run.json'}: the run was scored on the local track {run.record.track} ({where}); fix: pass "
            "--track PATH of that track's manifest"
        )
    return str(run.record.track)


def check_track(run, track) -> None:
    """The track resolved here is the run's: its id and dataset revision as run.json records them."""
    rec = run.record
    if str(track.id) != str(rec.track) or str(track.revision) != str(rec.dataset_revision):
        raise UserError(
            f"{run.path / 'run.json'}: the run was scored on track {rec.track} at dataset revision "
            f"{rec.dataset_revision}, but the track here{_at(track)} is {track.id} at revision {track.revision} (its files "
            "changed since?); fix: pass "
            f"--track with the run's track at revision {rec.dataset_revision} (e.g. pstbench data fetch "
            f"{rec.track} at that revision, or the local manifest it was scored on)"
        )


def _at(track) -> str:
    manifest = getattr(track, "manifest", None)
    return f" ({manifest})" if manifest else ""


def csv_differences(old: Path, new: Path, id_field: str) -> list[dict]:
    """The rows of two CSV files (a run's item file and its rescore's) that differ: {"item": id, "fields": the columns
    whose cells differ}; a row on one side only is {"item": id, "fields": ["missing"|"added"]}, a changed header
    {"item": "header"}, the same rows in another order {"item": "order"}."""
    from pytest_pstbench.core.files.csvfile import read_csv

    def rows(path) -> list:
        return read_csv(path, what="run file", columns=(id_field,), fix="score the run again", fix_all="score it again")

    a, b = rows(old), rows(new)
    if [list(r.cells) for r in a[:1]] != [list(r.cells) for r in b[:1]]:
        return [{"item": "header", "fields": ["columns"]}]
    rows_a = {r.cells[id_field]: r.cells for r in a}
    rows_b = {r.cells[id_field]: r.cells for r in b}
    out = []
    for item in list(rows_a) + [i for i in rows_b if i not in rows_a]:
        ra, rb = rows_a.get(item), rows_b.get(item)
        if ra is None or rb is None:
            out.append({"item": item, "fields": ["added" if ra is None else "missing"]})
        elif ra != rb:
            out.append({"item": item, "fields": [k for k in ra if ra[k] != rb.get(k)]})
    if not out and [r.cells for r in a] != [r.cells for r in b]:  # the same rows in another order
        out.append({"item": "order", "fields": ["rows"]})
    return out


def json_differences(old, new, prefix: str = "") -> list[str]:
    """The dotted keys at which two parsed JSON values differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            d
            for k in list(old) + [k for k in new if k not in old]
            for d in json_differences(old.get(k), new.get(k), f"{prefix}{k}.")
        ]
    return [] if old == new else [prefix.rstrip(".") or "(whole file)"]


def file_differences(run_dir: Path, again_dir: Path, item_file: str, id_field: str) -> list[dict]:
    """What differs between a run's item file and summary.json and those of its rescore (nothing: byte-identical)."""
    from pytest_pstbench.core.files.jsonfile import loads

    out = []
    old, new = (Path(run_dir) / item_file).read_bytes(), (Path(again_dir) / item_file).read_bytes()
    if old != new:
        out += csv_differences(Path(run_dir) / item_file, Path(again_dir) / item_file, id_field)
        out = out or [{"item": item_file, "fields": ["bytes"]}]
    old, new = (Path(run_dir) / "summary.json").read_bytes(), (Path(again_dir) / "summary.json").read_bytes()
    if old != new:
        keys = json_differences(loads(old), loads(new))
        out.append({"item": "summary.json", "fields": keys or ["bytes"]})
    return out


def failure_lines(run: dict, id_key: str) -> list[str]:
    """ "item: message" of each failure a run.json records (`failures`: {id_key, "message"})."""
    failures = run.get("failures") if isinstance(run, dict) else None
    return [f"{f.get(id_key)}: {f.get('message')}" for f in failures or () if isinstance(f, dict)]


def error_line(source, run, result: Reproduction, unit: str, outputs: str) -> str | None:
    """stderr's one line where the run was not reproduced: how many items differ, what scored them again, and the
    first item that failed when scored again (its message names the file)."""
    from pytest_pstbench.core.text import one_line

    if result.reproduced:
        return None
    items = [d for d in result.differences if d["item"] not in ("summary.json", "header", "order")]
    failed = f"; {len(result.failures)} failed, e.g. {one_line(result.failures[0])}" if result.failures else ""
    return (
        f"pstbench: error: not reproduced: {len(items)} of {run.record.n_items} {unit} of {one_line(str(source))} "
        f"differ when scored again from --outputs {one_line(outputs)}{failed}"
    )


def run_digests(run_dir: Path, files) -> dict:
    """sha256 of each of the run's files that say what it scored (its item file, summary.json)."""
    from pytest_pstbench.core.paths import file_sha256

    return {name: file_sha256(Path(run_dir) / name) for name in files}


def environment_drift(then: dict, now: dict) -> list[list]:
    """[field, recorded, now] for each environment field that can move a value (core.drift), plus the kit's
    version and the Python version, that differs."""
    from pytest_pstbench.core.drift import drift

    out = [list(d) for d in drift(then or {}, now or {})]
    for name in ("pytest_pstbench", "python"):
        a, b = (then or {}).get(name), (now or {}).get(name)
        if a != b:
            out.append([name, a, b])
    return out


def report(source, run, result: Reproduction, item_file: str) -> dict:
    """The reproduce report (`--report FILE`): the run's identity (its files' digests, its pinned URI), the
    verdict, the differences and the environment then and now."""
    rec = run.record
    return {
        "generator": REPORT_GENERATOR,
        "format": REPORT_FORMAT,
        "run": {
            "kind": result.kind,
            "track": rec.track,
            "name": rec.name,
            "uri": getattr(source, "uri", None),
            "path": None if getattr(source, "uri", None) else str(Path(run.path).resolve()),
            "protocol": {"id": rec.protocol_id, "sha256": rec.protocol_sha256},
            "dataset": {"id": rec.dataset_id, "revision": rec.dataset_revision},
            "sha256": run_digests(run.path, (item_file, "summary.json")),
        },
        "verdict": "reproduced" if result.reproduced else "not reproduced",
        "compared": list(result.compared),
        "differences": result.differences,
        "environment": {
            "then": result.then,
            "now": result.now,
            "differs": environment_drift(result.then, result.now),
        },
    }


def _shown(v) -> str:
    from pytest_pstbench.core.text import one_line

    if isinstance(v, str) and len(v) == 64:
        return v[:12]
    return one_line(str(v) if not isinstance(v, dict) else ", ".join(f"{k} {_shown(x)}" for k, x in v.items()))


def verdict_lines(source, run, result: Reproduction, unit: str) -> list[str]:
    """What `pstbench reproduce` prints: the verdict, the first differences with their count, the environment."""
    from pytest_pstbench.core.text import one_line

    rec = run.record
    what = (
        f"{result.kind} run {one_line(str(rec.name))} on track {one_line(str(rec.track))}@"
        f"{one_line(str(rec.dataset_revision))}, protocol {one_line(str(rec.protocol_id))} "
        f"(sha256 {str(rec.protocol_sha256)[:12]})"
    )
    if result.reproduced:
        return [f"reproduced: {one_line(str(source))} ({what}): {' and '.join(result.compared)} byte-identical"]
    items = [d for d in result.differences if d["item"] not in ("summary.json", "header", "order")]
    lines = [
        f"not reproduced: {one_line(str(source))} ({what}): {len(items)} of {rec.n_items} {unit} differ"
        + (", and summary.json" if any(d["item"] == "summary.json" for d in result.differences) else "")
    ]
    for d in result.differences[:SHOWN]:
        more = f" (+{len(d['fields']) - 8} more)" if len(d["fields"]) > 8 else ""
        lines.append(f"  {one_line(str(d['item']))}: {one_line(', '.join(map(str, d['fields'][:8])))}{more}")
    if len(result.differences) > SHOWN:
        lines.append(f"  ... and {len(result.differences) - SHOWN} more (--report FILE lists them all)")
    drifted = environment_drift(result.then, result.now)
    if drifted:
        lines.append(
            "environment then vs now, which may explain it: "
            + "; ".join(f"{name} {_shown(a)} vs {_shown(b)}" for name, a, b in drifted)
        )
    else:
        lines.append("environment: the same as recorded (kit, packages, device, threads)")
    return lines

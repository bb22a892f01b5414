"""The paired kind's run format: `metrics.csv` (one row per pair, a column per protocol metric, floats as
repr()), `summary.json`, `run.json`, written and read through the run store (core/store/folder.py)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import dumps_json
from pytest_pstbench.core.store.folder import RunFolder, RunRecord, read_item_csv, read_run_folder, write_run_files
from pytest_pstbench.paired.kind import KIND

RUN_FILES = KIND.run_files


def metrics_csv(metric_names: list[str], rows: list[tuple[str, dict | None]]) -> str:
    """One row per pair (in the given order); a pair that failed has empty cells. Floats as repr()."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["pair_id", *metric_names])
    for pair_id, values in rows:
        if values is None:
            w.writerow([pair_id, *[""] * len(metric_names)])
        else:
            w.writerow([pair_id, *[repr(float(values[m])) for m in metric_names]])
    return buf.getvalue()


def write_run(run_dir: Path, metrics_text: str, summary: dict, run: dict) -> None:
    """Write the three run files of a paired run, replacing the folder as a whole (`write_run_files`)."""
    write_run_files(
        run_dir, {"metrics.csv": metrics_text, "summary.json": dumps_json(summary), "run.json": dumps_json(run)}, run
    )


@dataclass
class Run(RunFolder):
    """A paired run read back from its folder."""

    scores: dict[str, dict[str, float | None]]  # pair id -> metric -> value (None when that pair failed)
    record: RunRecord | None = None


def _shape(value) -> str:
    return (
        "null"
        if value is None
        else {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(
            type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
        )
    )


def check_record_lists(run: Run) -> None:
    """The run.json fields that pages and tables read beyond the identity (`outputs`, `outputs_dir`, `failures`,
    `deviations`) are of the shapes this kit writes, or absent: each problem one line naming the field."""
    path, data = run.path / "run.json", run.run
    fix = "fix: score the run again with this kit"
    shapes = {  # field -> (what each entry holds, its keys and their allowed types)
        "outputs": (
            "an object with a pair, a path and a sha256",
            {"pair": (str,), "path": (str,), "sha256": (str, type(None))},
        ),
        "failures": ("an object with a pair and a message", {"pair": (str,), "message": (str, type(None))}),
        "deviations": ("an object with a kind", {"kind": (str,)}),
    }
    for key, (what, fields) in shapes.items():
        entries = data.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise UserError(f"{path}: {key} is {_shape(entries)}, not a list (each entry {what}); {fix}")
        for i, entry in enumerate(entries):
            bad = [
                k
                for k, types in fields.items()
                if not isinstance(entry, dict) or not isinstance(entry.get(k), types) or isinstance(entry.get(k), bool)
            ]
            if bad:
                shown = _shape(entry) if not isinstance(entry, dict) else f"{bad[0]} {_shape(entry.get(bad[0]))}"
                raise UserError(f"{path}: {key}[{i}] has {shown}, not {what}; {fix}")
    if not isinstance(data.get("outputs_dir"), (str, type(None))):
        raise UserError(
            f"{path}: outputs_dir is {_shape(data.get('outputs_dir'))}, not a folder's path (or null); {fix}"
        )


def load_run(run_dir: Path) -> Run:
    run_dir = Path(run_dir)
    summary, record = read_run_folder(run_dir, RUN_FILES, "run")
    scores: dict[str, dict[str, float | None]] = {}
    for pid, row in read_item_csv(run_dir / "metrics.csv", "pair_id", "pair").items():
        del row["pair_id"]
        try:
            scores[pid] = {k: (float(v) if v != "" else None) for k, v in row.items()}
        except ValueError as exc:
            raise UserError(f"{run_dir / 'metrics.csv'}: row {pid}: {exc}; fix: score the run again") from None
    return Run(run_dir, summary, record.data, scores, record)

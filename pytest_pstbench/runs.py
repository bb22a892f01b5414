"""Run files: `metrics.csv`, `summary.json`, `run.json` under `results/<track>/<name>/`.

Written atomically (temporary name in the same folder, then `os.replace`), read back and validated.
metrics.csv and summary.json depend only on the inputs and the protocol, so the same inputs give
byte-identical files; run.json also records when, where and how the run was made.
"""
from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

RUN_FILES = ("metrics.csv", "summary.json", "run.json")


def write_atomic(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def dumps_json(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


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
    """Write the three run files. run.json goes last, so a run.json is never newer than the data it describes."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # An older run.json in this folder must not vouch for new files while they are being written.
    old = run_dir / "run.json"
    if old.exists():
        old.unlink()
    write_atomic(run_dir / "metrics.csv", metrics_text)
    write_atomic(run_dir / "summary.json", dumps_json(summary))
    write_atomic(run_dir / "run.json", dumps_json(run))


@dataclass
class Run:
    """A run read back from its folder."""

    path: Path
    summary: dict
    run: dict
    scores: dict[str, dict[str, float | None]]  # pair id -> metric -> value (None when that pair failed)

    @property
    def complete(self) -> bool:
        return bool(self.run.get("complete"))

    @property
    def name(self) -> str:
        return self.summary.get("name", self.path.name)


def load_run(run_dir: Path) -> Run:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: run folder not found; fix: give a folder with metrics.csv, summary.json, run.json")
    missing = [f for f in RUN_FILES if not (run_dir / f).is_file()]
    if missing:
        raise UserError(
            f"{run_dir}: not a complete run folder (missing {', '.join(missing)}); fix: score the run again"
        )
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{run_dir}: run file is not valid JSON ({exc}); fix: score the run again") from None
    scores: dict[str, dict[str, float | None]] = {}
    with open(run_dir / "metrics.csv", newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or reader.fieldnames[0] != "pair_id":
            raise UserError(f"{run_dir / 'metrics.csv'}: header must start with pair_id; fix: score the run again")
        for row in reader:
            pid = row.pop("pair_id")
            try:
                scores[pid] = {k: (float(v) if v != "" else None) for k, v in row.items()}
            except ValueError as exc:
                raise UserError(f"{run_dir / 'metrics.csv'}: row {pid}: {exc}; fix: score the run again") from None
    return Run(run_dir, summary, run, scores)

"""The selection kind's run format: `per_task.csv` (one row per task in track order: its labels, each
trial's answers and correctness, the scores, an error), `summary.json`, `run.json`, written and read
through the run store (core/store/folder.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.files.write import dumps_json
from pytest_pstbench.core.store.folder import RunFolder, RunRecord, read_item_csv, read_run_folder, write_run_files
from pytest_pstbench.selection.kind import KIND

RUN_FILES = KIND.run_files


def write_run(run_dir: Path, per_task_text: str, summary: dict, run: dict) -> None:
    """Write the three run files of a selection run, replacing the folder as a whole (`write_run_files`)."""
    write_run_files(
        run_dir, {"per_task.csv": per_task_text, "summary.json": dumps_json(summary), "run.json": dumps_json(run)}, run
    )


@dataclass
class SelectionRunFiles(RunFolder):
    """A selection run read back from its folder."""

    task_ids: list[str]
    rows: dict[str, dict[str, str]]  # task id -> per_task.csv row
    record: RunRecord | None = None


def load_selection_run(run_dir: str | Path) -> SelectionRunFiles:
    run_dir = Path(run_dir)
    summary, record = read_run_folder(run_dir, RUN_FILES, "selection run")
    rows = read_item_csv(run_dir / "per_task.csv", "task_id", "task")
    return SelectionRunFiles(run_dir, summary, record.data, list(rows), rows, record)


def load_selection_runs(paths) -> list[SelectionRunFiles]:
    return [load_selection_run(p) for p in paths]

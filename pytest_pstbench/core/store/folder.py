"""A run folder, for every kind (`results/<track>/<name>/`: the kind's per-item file, `summary.json`,
`run.json`): written to a staging folder and swapped into place as a whole under a per-run lock
(`write_run_files`; the lock lives in the cache), and read back through one reader (`read_run_folder`,
`RunRecord`, `RunFolder`, `read_item_csv`). A kind's own run format (its per-item file's columns) lives in
the kind's `runs` module.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json
from pytest_pstbench.core.files.lock import run_lock
from pytest_pstbench.core.files.write import (
    current_umask,
    fsync_dir,
    glob_escape,
    link_or_copy,
    staging_dir,
    swap_dir_into_place,
    write_new,
)


def _partial_over_complete(run_dir: Path, run: dict) -> str | None:
    """Why `run` (not every pair/task scored: deselected with -k, or scored by a subset) must not
    replace the complete run already in `run_dir`, or None."""
    not_scored = [d for d in run.get("deviations", []) if d.get("kind") in ("pairs_not_scored", "tasks_not_scored")]
    if not not_scored:
        return None
    try:
        old = read_json(run_dir / "run.json")
    except (OSError, ValueError):
        return None
    if not (isinstance(old, dict) and old.get("complete") is True):
        return None
    unit = "tasks" if "n_tasks" in run else "pairs"
    total = run.get("n_tasks", run.get("n_pairs"))
    return (
        f"{run_dir}: holds a complete run, and this session scored {run.get('n_scored')} of {total} {unit} (the others "
        f"were not run, e.g. deselected with -k), so it was not written there and the complete run is kept; "
        f"fix: run every {unit[:-1]}, or give this partial run another name (--pstbench-name / --name)"
    )


def write_run_files(run_dir: Path, files: dict[str, str], run: dict) -> None:
    """Replace the run folder `run_dir` as a whole by one holding `files` (name -> text; run.json last).

    Under the per-run lock, the new folder is built beside the old one, each file fsynced, then
    renamed into place; the old folder is moved aside and deleted only after that rename. Whatever
    fails (full disk, a kill), `run_dir` is the old complete run or the new one, never a mix. Other
    entries of the old folder (e.g. an `outputs/` folder of `pstbench demo`) are carried over (hard
    links where possible). A partial run (pairs not scored) never replaces a complete one (UserError).
    """
    run_dir = Path(run_dir)
    with run_lock(run_dir):
        recover_run_dir(run_dir)
        why = _partial_over_complete(run_dir, run)
        if why:
            raise UserError(why)
        fix = "free some space or give --results a writable folder; the previous run there (if any) is unchanged"
        with staging_dir(run_dir, what="write the run files", fix=fix) as tmp:
            try:
                os.chmod(tmp, 0o777 & ~current_umask())
                for name, text in files.items():
                    write_new(tmp / name, text)
                if run_dir.is_dir():
                    for entry in os.scandir(run_dir):
                        if entry.name in files:
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            shutil.copytree(entry.path, tmp / entry.name, symlinks=True, copy_function=link_or_copy)
                        else:
                            link_or_copy(entry.path, tmp / entry.name)
                fsync_dir(tmp)
                swap_dir_into_place(tmp, run_dir)
                fsync_dir(run_dir.parent)
            except OSError as exc:
                raise UserError(f"{run_dir}: cannot write the run files ({exc}); fix: {fix}") from None


def recover_run_dir(run_dir: Path) -> None:
    """Under the run's lock: undo what a writer killed mid-swap left behind. When `run_dir` is missing but
    a moved-aside previous run (`.<name>.old-*`) exists, it is moved back; leftover staging folders
    (`.<name>.build-*`) and other moved-aside copies are deleted."""
    run_dir = Path(os.path.abspath(run_dir))
    parent = run_dir.parent
    if not parent.is_dir():
        return
    olds = sorted(parent.glob(f".{glob_escape(run_dir.name)}.old-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not run_dir.exists() and olds:
        try:
            os.rename(olds[0], run_dir)
            olds = olds[1:]
        except OSError:
            pass
    for leftover in [*olds, *parent.glob(f".{glob_escape(run_dir.name)}.build-*")]:
        shutil.rmtree(leftover, ignore_errors=True)


# run.json `format`: 1 since the field was introduced; bump when a run file changes incompatibly.
# A run.json without it was written before (same content) and is read as format 0.
RUN_FORMAT = 1


@dataclass(frozen=True)
class RunRecord:
    """The run.json fields that comparisons, gates and reports read, typed; `data` is the whole record."""

    path: Path
    format: int
    kind: str  # a registered kind's name (core/kinds.py)
    protocol_id: str | None
    protocol_sha256: str | None
    protocol_path: str | None
    track: str | None
    dataset_id: str | None
    dataset_revision: str | None
    complete: bool
    name: str | None
    n_scored: int | None
    n_items: int | None  # pairs or tasks of the track
    data: dict

    def identity(self) -> dict[str, object]:
        """What two runs must share to be compared: label -> value."""
        return {
            "protocol.id": self.protocol_id,
            "protocol.sha256": self.protocol_sha256,
            "track": self.track,
            "dataset.id": self.dataset_id,
            "dataset.revision": self.dataset_revision,
        }


def parse_run_record(path: Path, data) -> RunRecord:
    """run.json's content -> RunRecord; a record of the wrong shape or of a newer format is a UserError."""
    path = Path(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: run.json must be a JSON object; fix: score the run again")
    fmt = data.get("format", 0)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 0:
        raise UserError(f"{path}: run.json format {fmt!r} is not a format number; fix: score the run again")
    if fmt > RUN_FORMAT:
        raise UserError(
            f"{path}: run.json has format {fmt}, written by a newer pytest-pstbench (this one reads formats up to "
            f"{RUN_FORMAT}); fix: upgrade pytest-pstbench"
        )

    def get(*keys):
        value = data
        for k in keys:
            value = value.get(k) if isinstance(value, dict) else None
        return value

    from pytest_pstbench.core.kinds import record_kind, spec

    kind = record_kind(data, path)
    return RunRecord(
        path=path,
        format=fmt,
        kind=kind,
        protocol_id=get("protocol", "id"),
        protocol_sha256=get("protocol", "sha256"),
        protocol_path=get("protocol", "path"),
        track=get("track"),
        dataset_id=get("dataset", "id"),
        dataset_revision=get("dataset", "revision"),
        complete=data.get("complete") is True,
        name=data.get("name"),
        n_scored=data.get("n_scored"),
        n_items=data.get(spec(kind).n_key),
        data=data,
    )


def run_file_names() -> tuple[str, ...]:
    """The files a run folder is made of, for every registered kind: run.json, summary.json and the
    kinds' per-item files (a folder holds one of them)."""
    from pytest_pstbench.core.kinds import registered

    return ("run.json", "summary.json", *dict.fromkeys(s.item_file for s in registered().values()))


def read_run_folder(run_dir: Path, files: tuple[str, ...], what: str) -> tuple[dict, RunRecord]:
    """(summary.json, run.json as a RunRecord) of a run folder that must hold `files`; each problem is one
    line naming the folder and the fix. Both track kinds read their run folders through this."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: run folder not found; fix: give a folder with {', '.join(files)}")
    missing = [f for f in files if not (run_dir / f).is_file()]
    if missing:
        raise UserError(
            f"{run_dir}: not a complete {what} folder (missing {', '.join(missing)}); fix: score the run again"
        )
    docs = {}
    for name in ("summary.json", "run.json"):
        try:
            docs[name] = read_json(run_dir / name)
        except (
            ValueError,
            UnicodeDecodeError,
        ) as exc:  # named: a pulled run's messages drop the folder (core.store.published.pull)
            raise UserError(f"{run_dir / name}: not valid JSON ({exc}); fix: score the run again") from None
    summary, run = docs["summary.json"], docs["run.json"]
    if not isinstance(summary, dict):
        raise UserError(
            f"{run_dir / 'summary.json'}: must be a JSON object, not {type(summary).__name__}; fix: score the run again"
        )
    return summary, parse_run_record(run_dir / "run.json", run)


class ItemResult:
    """Base of a kind's per-item result (a pair's, a task's): a dataclass that travels as JSON from pytest-xdist
    workers to the controller. A kind's result names its id field and the field holding its values (None
    when the item failed), and has an `error` field."""

    ID_FIELD: ClassVar[str]
    VALUE_FIELD: ClassVar[str]

    @property
    def item_id(self) -> str:
        return getattr(self, self.ID_FIELD)

    @property
    def ok(self) -> bool:
        return self.error is None and getattr(self, self.VALUE_FIELD) is not None

    def to_json(self) -> dict:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_json(cls, data: dict):
        return cls(**data)


@dataclass
class RunFolder:
    """A run read back from its folder; each kind's run object adds its per-item values."""

    path: Path
    summary: dict
    run: dict

    @property
    def complete(self) -> bool:
        return bool(self.run.get("complete"))

    @property
    def name(self) -> str:
        return self.summary.get("name", self.path.name)


def read_item_csv(path: Path, id_column: str, unit: str) -> dict[str, dict[str, str]]:
    """A run's per-item file: item id -> its row (the id column included), in the file's order, read by
    the one bounded CSV reader (`core.files.csvfile`). The header starts with `id_column`; an id given twice, a
    row with more or fewer cells than the header, a file over the size limit or not UTF-8 is one line
    naming the file (`unit` names an item: "pair", "task")."""
    from pytest_pstbench.core.files.csvfile import read_csv

    fix = "fix: score the run again"
    rows: dict[str, dict[str, str]] = {}
    for row in read_csv(
        path, what=f"run's per-{unit} file", columns=(id_column,), fix="", first=id_column, fix_all=fix[len("fix: ") :]
    ):
        item = row.cells[id_column]
        if item in rows:
            raise UserError(f"{path}: {unit} {item} appears twice; {fix}")
        rows[item] = row.cells
    return rows

"""The one validating reader of run folders, for every command and front door (compare, the gate, table,
report, the API, `runs ls`, a pull's and a push's check of a run): each folder read by its kind's loader
(the kind's `RunKind.load`, which reads the folder through `core.store.folder.read_run_folder`), then
checked by `core.compare.checked_runs`. A run address is made a folder first by `core.store.backends`.
"""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.compare import checked_runs
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.kinds import RunKind, kind_of_runs


def read_runs(
    paths,
    *,
    protocol=None,
    protocol_spec: str | None = None,
    comparable: bool = False,
    kind: RunKind | None = None,
    check=None,
) -> tuple[RunKind, list, object]:
    """(the runs' kind, the runs, their protocol) of the run folders `paths`. Each folder is read by its
    kind's loader, then checked by `checked_runs`. Every problem is one line naming the file and the fix.
    `check(runs)`: a command's own checks of the loaded runs, made before theirs (e.g. the report's one setting)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise UserError("no run folder given; fix: give at least one run folder")
    kind = kind or kind_of_runs(paths)
    runs = [kind.load(p) for p in paths]
    if check is not None:
        check(runs)
    return kind, runs, checked_runs(kind, runs, protocol=protocol, protocol_spec=protocol_spec, comparable=comparable)


def run_field(run, *keys):
    """run.json's value at `keys` (nested), or None where any level is missing or not an object."""
    value = run.run
    for k in keys:
        value = value.get(k) if isinstance(value, dict) else None
    return value


SAME_SETTING = (
    ("track", ("track",)),
    ("dataset.id", ("dataset", "id")),
    ("dataset.revision", ("dataset", "revision")),
    ("protocol.id", ("protocol", "id")),
    ("protocol.sha256", ("protocol", "sha256")),
)


def check_same_setting(runs) -> None:
    """The runs of one page (either kind's report) share track, dataset and protocol file: one line otherwise."""
    first = runs[0]
    for label, keys in SAME_SETTING:
        if run_field(first, *keys) is None:
            raise UserError(f"{first.path / 'run.json'}: lacks {label}; fix: score the run again")
    for r in runs[1:]:
        for label, keys in SAME_SETTING:
            a, b = run_field(first, *keys), run_field(r, *keys)
            if a != b:
                raise UserError(
                    f"{r.path}: run.json {label} is {b!r} but {first.path} has {a!r}; one report shows runs of "
                    "one track, dataset revision and protocol file; fix: report these runs separately"
                )

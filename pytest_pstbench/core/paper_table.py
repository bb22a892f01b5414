"""The results table of a paper (`pstbench table`) as data, and the rules every kind's builder shares.

A `Table` has one row per run (the kind's reference rows first: Identity for paired tracks, the random
baseline for selection tracks), one `Column` per ranked metric (selection: metric x aggregation) and track,
and per column a `Cell` per row: the number of summary.json as printed, its rank (best bold, second best
underlined, in the metric's direction, compared as printed so that ties share the mark; reference rows are
not ranked) and whether it is significantly worse than the column's reference run (a dagger). Each kind
builds its table (its KindSpec's `paper_table`: paired/paper_table.py, selection/paper_table.py) with the
helpers here; report/paper_table.py renders it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pytest_pstbench.core.errors import UserError

DAGGER = "†"


@dataclass
class Cell:
    value: float | None
    pm: float | None
    ci_low: float | None
    ci_high: float | None
    text: str  # "mean ± pm" as printed
    rank: int | None = None  # 1 best, 2 second best, None otherwise (or not ranked)
    worse: bool = False  # significantly worse than the column's reference run
    test: dict | None = None  # the test against the reference (compare's row as JSON)


@dataclass
class Column:
    track: str
    metric: str
    aggregation: str | None  # selection runs: ap@1 / pass^3
    label: str  # "PSNR↑", "Top-1 ap@1"
    higher_is_better: bool
    reference: str | None  # row name the column's tests are against
    tested: bool  # whether the column has significance tests (selection: outcome in the protocol's list)
    cells: dict[str, Cell] = field(default_factory=dict)


@dataclass
class Table:
    kind: str  # the runs' kind (its registered name)
    rows: list[str]  # row names, the reference row first
    reference_row: str  # the kind's reference row ("Identity", "Random")
    tracks: list[dict]
    columns: list[Column]
    alpha: float
    against: str
    n_tests: int
    test_name: str
    confidence: float = 0.95  # the protocol's aggregation.bootstrap.confidence
    notes: list[str] = field(default_factory=list)  # legend lines about left-out or unmarked columns
    reference_rows: list[str] = field(default_factory=list)  # every row not ranked nor tested (Random, Human ...)
    # the legend's kind-specific lines, given by the kind's builder: what a cell holds, which rows are reference
    # rows, and the test behind a dagger
    values_note: str = ""
    reference_note: str = ""
    test_note: str = ""

    def __post_init__(self):
        if not self.reference_rows:
            self.reference_rows = [self.reference_row]

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "rows": self.rows,
            "reference_row": self.reference_row,
            "reference_rows": self.reference_rows,
            "tracks": self.tracks,
            "alpha": self.alpha,
            "against": self.against,
            "n_tests": self.n_tests,
            "test": self.test_name,
            "confidence": self.confidence,
            "columns": [asdict(c) for c in self.columns],
            "legend": legend_lines(self),
        }


# ---- the rules the builders share ---------------------------------------------------------------
def cell_text(value, pm, decimals: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{decimals}f} ± {pm:.{decimals}f}" if pm is not None else f"{value:.{decimals}f}"


def shown_values(column: Column, decimals: int, exclude) -> dict[str, float]:
    """The ranked rows' values as printed (`exclude`, the reference row or rows, is not ranked)."""
    left_out = {exclude} if isinstance(exclude, str) else set(exclude)
    return {
        name: float(f"{cell.value:.{decimals}f}")
        for name, cell in column.cells.items()
        if name not in left_out and cell.value is not None
    }


def rank_column(column: Column, decimals: int, exclude, ranked: bool = True) -> None:
    """Dense ranks 1 and 2 on the values as printed (ties share the mark); `exclude` is not ranked. No
    marks at all when there is nothing to compare: one run (beside the reference row), every run printing
    the same value, or a metric the protocol reports but does not rank (`ranked` False)."""
    shown = shown_values(column, decimals, exclude)
    distinct = sorted(set(shown.values()), reverse=column.higher_is_better)
    if len(distinct) < 2 or not ranked:
        return
    for name, v in shown.items():
        r = distinct.index(v) + 1
        column.cells[name].rank = r if r <= 2 else None


def reference_of(
    column: Column, rows: list[str], against: str, where: str, first: str, *, decimals: int, exclude
) -> str | None:
    """The row the column's cells are tested against: the first best run (`best`; by the values as printed,
    also when no mark is shown), the first run given for the track (`first`, unless a run is named so), or
    the run of that name."""
    if against == "first" and "first" not in column.cells:
        against = first
    if against == "best":
        shown = shown_values(column, decimals, exclude)
        if not shown:
            return None
        best = (max if column.higher_is_better else min)(shown.values())
        return next((r for r in rows if shown.get(r) == best), None)
    if against not in column.cells:
        raise UserError(
            f"--against {against}: no run of that name on track {column.track} ({where}; runs: "
            f"{', '.join(column.cells)}); fix: name one of them, or use --against best (or first)"
        )
    return against


def group_by_track(runs, track_of) -> dict[str, list]:
    groups: dict[str, list] = {}
    for r in runs:
        groups.setdefault(str(track_of(r)), []).append(r)
    return groups


def unique_names(group, track: str) -> None:
    seen = {}
    for r in group:
        if r.name in seen:
            raise UserError(
                f"{r.path}: run name {r.name!r} on track {track} is also the name of {seen[r.name]}; a table needs one "
                "row per name; fix: give each run folder once (or rename one run)"
            )
        seen[r.name] = r.path


def refuse_row_name(runs, row: str, whose: str = "the reference row's") -> None:
    """A run whose name reads as the table's own row (`Identity`, `Random`, in any case or Unicode spelling:
    core.store.names.is_reserved_name) would be a second such row."""
    from pytest_pstbench.core.store.names import is_reserved_name

    for r in runs:
        if is_reserved_name(r.name, row):
            raise UserError(f"{r.path}: run name {r.name!r} reads as {row!r}, {whose}; fix: rename the run")


def check_alphas(protocols: list, alpha_of) -> float:
    """The one alpha of the table's protocols (`alpha_of(protocol)`); protocols that differ are refused."""
    alphas = {alpha_of(p) for p in protocols}
    if len(alphas) > 1:
        raise UserError(
            f"{protocols[-1].path}: comparison.alpha differs between the protocols of the tracks ({sorted(alphas)}); "
            "one table has one Holm family and one alpha; fix: make one table per protocol"
        )
    return alphas.pop()


def check_confidence(protocols: list) -> float:
    levels = {float(p.data["aggregation"]["bootstrap"]["confidence"]) for p in protocols}
    if len(levels) > 1:
        raise UserError(
            f"{protocols[-1].path}: aggregation.bootstrap.confidence differs between the protocols of the tracks "
            f"({sorted(levels)}); fix: make one table per protocol"
        )
    return levels.pop()


# ---- legend ---------------------------------------------------------------------------------------
def legend_lines(t: Table) -> list[str]:
    """The legend as plain text; the renderers style the marks."""
    if t.against == "best":
        ref = "the column's best run"
    elif t.against == "first" and "first" not in t.rows:
        refs = sorted({c.reference for c in t.columns if c.reference})
        ref = f"the first run given ({', '.join(refs)})"
    else:
        ref = f"run {t.against}"
    what, ranked, test = t.values_note, t.reference_note, t.test_note
    tracks = "; ".join(
        f"{x['track']}: protocol {x['protocol']}, revision {x['dataset_revision']}, n={x['n']}" for x in t.tracks
    )
    lines = [
        what,
        f"BEST: best, SECOND: second best per column in the metric's direction (compared as printed; ties share the mark). {ranked}",
        f"{DAGGER}: significantly worse than {ref} ({test}; Holm over the {t.n_tests} tests of this table, alpha {t.alpha:g}).",
        f"Tracks: {tracks}.",
    ]
    untested = sorted({c.aggregation for c in t.columns if not c.tested and c.aggregation})
    if untested:
        lines.append(f"Columns {', '.join(untested)} are not tested (not among the protocol's comparison.outcomes).")
    return lines + list(t.notes)

"""`pstbench report RUN_DIR [RUN_DIR ...] --out DIR`: a static HTML page of runs of one kind: the frame.

`build_report` checks the options, the --out folder and the runs (each given once, all of one kind whose
KindSpec has an `html_report` hook), then hands a `core.kinds.ReportRequest` to that hook (`paired.report`,
`selection.report`): the runs, the folder, the frame's options, the options each kind declares for its page
(`KindSpec.report_options`, e.g. --max-pairs, --max-tasks, --worst: each bound's default where it was not
given), the page's generator tag and style sheet (page.css, package data). With `--history SOURCE...` every
page (of either kind) gains a History section: the plots and the step list of `pstbench history SOURCE...`
(report/history.py: a `core.kinds.PageSection` the kind writes with its page). DIR is self-contained:
figures are written to DIR/figures/, thumbnails to DIR/thumbs/, every link is relative, the CSS is
inline, nothing is loaded from elsewhere. The output is deterministic (no timestamps; files named
by position), and the folder is replaced as a whole (built beside it, then renamed into place).

Only the standard library is imported at module level; matplotlib (extra `[report]`) and Pillow
load when the command runs.
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import refuse_overwriting_inputs
from pytest_pstbench.core.install_hints import extra_install

DEFAULT_THUMB_SIZE = 192
GENERATOR = "pstbench report"


def build_report(
    run_dirs,
    out,
    *,
    sensitivity=None,
    thumb_size: int = DEFAULT_THUMB_SIZE,
    track_spec: str | None = None,
    protocol_spec: str | None = None,
    progress=None,
    history=None,
    history_metrics=None,
    **kind_options,
) -> Path:
    """Write the report folder `out` and return its path: the frame's checks, then the page of the runs'
    kind (its KindSpec's `html_report` hook, given a `core.kinds.ReportRequest`). `kind_options`: the options
    the kinds declare for their pages (`KindSpec.report_options`, by dest: `max_pairs=`, `max_tasks=`,
    `worst=`), None where not given. `history_metrics` (`--metric`): the metrics the History section follows,
    as `pstbench history --metric` (only with `history`)."""
    if history_metrics and not history:
        raise UserError(
            "--metric: chooses the metrics of the History section, and no --history is given; "
            "fix: add --history SOURCE ..., or drop --metric"
        )
    if not 16 <= thumb_size <= 2048:
        raise UserError(
            f"--thumb-size {thumb_size}: must be between 16 and 2048 pixels; fix: pass e.g. --thumb-size {DEFAULT_THUMB_SIZE}"
        )
    options, given = _kind_options(kind_options)
    _require_matplotlib()
    from pytest_pstbench.core.kinds import ReportRequest, spec
    from pytest_pstbench.core.store.backends import RunSource

    sources = [d if isinstance(d, RunSource) else RunSource(Path(d)) for d in run_dirs]
    out = Path(out)
    _check_out_dir(out)
    _check_inputs(sources, out, sensitivity, track_spec, protocol_spec, history)
    kind = one_kind(sources)
    sections = ()
    if history:
        from pytest_pstbench.core.history import read_history
        from pytest_pstbench.report.history import history_section

        h = read_history(history, metrics=history_metrics, say=progress)
        sections = (history_section(h, [str(x) for x in history]),)
    request = ReportRequest(
        sources,
        out,
        GENERATOR,
        page_css(),
        thumb_size,
        kind_options=options,
        given=given,
        sensitivity=sensitivity,
        track_spec=track_spec,
        protocol_spec=protocol_spec,
        progress=progress,
        sections=sections,
    )
    return spec(kind).load("html_report")(request)


def _kind_options(given_values: dict) -> tuple[dict, frozenset]:
    """The kinds' page options checked (each 0 or a positive number; in the order given) with each one's default
    where it was not given, by dest; and the flags given."""
    from pytest_pstbench.core.kinds import report_options

    declared = {o.dest: o for o in report_options()}
    unknown = sorted(set(given_values) - set(declared))
    if unknown:
        raise TypeError(f"build_report() got an unexpected keyword argument {unknown[0]!r}")
    for dest, value in given_values.items():
        option = declared[dest]
        if value is not None and value < 0:
            raise UserError(
                f"{option.flag} {value}: must be 0 ({option.zero}) or a positive number; "
                f"fix: pass e.g. {option.flag} {option.example}"
            )
    values = {d: o.default if given_values.get(d) is None else given_values[d] for d, o in declared.items()}
    return values, frozenset(o.flag for d, o in declared.items() if given_values.get(d) is not None)


def _check_inputs(sources, out: Path, sensitivity, track_spec, protocol_spec, history) -> None:
    """Refuse an --out that holds or lies in an input, a run given twice, and a run of a kind without pages."""
    from pytest_pstbench.core.protocol import protocol_path
    from pytest_pstbench.core.store.backends import is_published

    refuse_overwriting_inputs(  # before any work: the folder replaced whole never holds or lies in what is read
        "--out",
        [out],
        files=[
            ("the sensitivity analysis", sensitivity),
            ("the track manifest", track_spec if track_spec and os.path.exists(track_spec) else None),
            ("protocol file", protocol_path(protocol_spec) if protocol_spec else None),
        ],
        folders=[("run folder", s.path) for s in sources]
        + [("history source", Path(h)) for h in history or () if not is_published(str(h))],
    )
    seen: dict[Path, str] = {}
    for s in sources:
        key = Path(os.path.realpath(s.path))  # not Path.resolve(): a link to itself raises RuntimeError there
        if key in seen:
            raise UserError(f"{s}: run folder given twice (also as {seen[key]}); fix: give each run once")
        seen[key] = str(s)
        check_reportable(s.path)


@lru_cache(maxsize=1)
def page_css() -> str:
    """The pages' style sheet (package data), inlined by each kind's page."""
    return resources.files(__package__).joinpath("page.css").read_text(encoding="utf-8")


def check_reportable(run_dir) -> None:
    """Refuse a run folder of a kind whose runs `pstbench report` does not cover (its KindSpec's `html_report`),
    before it is read by a loader."""
    from pytest_pstbench.core.kinds import registered, run_kind

    kind, specs = run_kind(run_dir), registered()
    if isinstance(kind, str) and kind in specs and specs[kind].html_report is None:
        covered = [s for s in specs.values() if s.html_report is not None]
        raise UserError(
            f"{run_dir}: is a {kind} run (kind: {kind}); pstbench report covers {' or '.join(s.name for s in covered)} "
            f"runs only; fix: give run folders of a {covered[0].name} track (e.g. results/{covered[0].demo_track}/<name>)"
        )


def one_kind(sources) -> str:
    """The kind of every run of the call; runs of two kinds are one line naming both (one page shows one kind)."""
    from pytest_pstbench.core.kinds import run_kind, runs_kind

    first: dict[str, object] = {}
    for s in sources:
        k = run_kind(s.path)
        if k is not None:
            first.setdefault(k, s)
    if len(first) > 1:
        (ka, a), (kb, b) = list(first.items())[:2]
        raise UserError(
            f"{b}: is a {kb} run but {a} is a {ka} run; one report shows runs of one kind, track and "
            f"protocol; fix: report the {ka} runs and the {kb} runs in two calls, each with its own --out"
        )
    return runs_kind([s.path for s in sources])


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(
            f"matplotlib is not installed; `pstbench report` draws its figures with it; fix: {extra_install('report')}"
        ) from None


def _is_report_dir(path: Path) -> bool:
    index = path / "index.html"
    if not index.is_file():
        return False
    with open(index, encoding="utf-8", errors="replace") as fh:
        head = fh.read(4096)
    return f'<meta name="generator" content="{GENERATOR}">' in head


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a folder; fix: give a new or empty folder")
    if out.is_dir() and any(out.iterdir()) and not _is_report_dir(out):
        raise UserError(
            f"--out {out}: folder is not empty and holds no earlier pstbench report (it is replaced as a whole); "
            "fix: give a new or empty folder"
        )

"""The page model of `pstbench report`: the runs checked to be of one setting, their metrics and
labels, and the sensitivity analysis (`pstbench sensitivity`'s analysis.json) validated.

Only the standard library is imported (numpy, through aggregation, when a value is read).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json
from pytest_pstbench.core.store.reader import run_field

DEFAULT_THUMB_SIZE = 192
DEFAULT_MAX_PAIRS = 50
DEFAULT_MAX_TASKS = 100  # selection pages: the tasks of the gallery (the lists name every task)
GENERATOR = "pstbench report"
ANALYSIS_FILE = "analysis.json"


@dataclass
class MetricInfo:
    name: str
    label: str
    higher_is_better: bool
    ranked: bool
    decimals: int

    @property
    def arrow(self) -> str:
        return "↑" if self.higher_is_better else "↓"

    @property
    def heading(self) -> str:
        return f"{self.label}{self.arrow}"

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    def fmt(self, value) -> str:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "–"
        return f"{value:.{self.decimals}f}"


@dataclass
class Image:
    """One image of the page: a thumbnail written into DIR, or a placeholder with the reason."""

    src: str | None  # relative to DIR
    missing: str | None = None
    warning: str | None = None
    size: tuple[int, int] | None = None  # thumbnail width, height


@dataclass
class Page:
    runs: list  # runs.Run
    labels: list[str]
    metrics: list[MetricInfo]
    confidence: float | None
    protocol_id: str
    protocol_sha256: str
    track_id: str
    dataset_id: str
    revision: str
    manifest: str | None  # a local track's track.yaml, as run.json records it
    pair_ids: list[str]
    shown: list[str]
    figures: list[tuple[MetricInfo, str]] = field(default_factory=list)
    interval: str = (
        ""  # "cluster bootstrap CI over N clusters" where the protocol resamples clusters (its summary says so)
    )
    pair_images: dict = field(default_factory=dict)  # (pair, role or run index) -> Image
    colors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sections: list = field(default_factory=list)  # core.kinds.PageSection the frame adds (`--history`)
    sensitivity: dict | None = None
    sensitivity_path: str | None = None
    sensitivity_figures: dict = field(default_factory=dict)  # "tau" or metric -> relative path
    thumb_size: int = DEFAULT_THUMB_SIZE
    published: list[bool] = field(
        default_factory=list
    )  # per run: pulled from the Hub (paths read inside its folder only)
    worst: list = field(
        default_factory=list
    )  # report.worst.WorstSection per ranked metric (two or more runs, --worst N > 0)
    worst_n: int = 0  # --worst N


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


def check_paired(run) -> None:
    """Refuse a summary without per-metric entries (a run of a kind the report covers: `check_reportable`)."""
    metrics = run.summary.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise UserError(
            f"{run.path / 'summary.json'}: has no `metrics` mapping, so it is not a paired run; fix: score the run again"
        )
    for m, entry in metrics.items():
        if not isinstance(entry, dict) or "mean" not in entry or "higher_is_better" not in entry:
            raise UserError(
                f"{run.path / 'summary.json'}: metrics.{m} lacks mean/higher_is_better; fix: score the run again"
            )


def build_page(runs, max_pairs: int, protocol) -> Page:
    """The page of `runs`, read and validated under `protocol` (core.compare.checked_runs)."""
    first = runs[0]
    names = [r.name for r in runs]
    labels = [n if names.count(n) == 1 else f"{n} ({r.path})" for n, r in zip(names, runs)]
    notes: list[str] = []
    metrics: list[MetricInfo] = []
    for m, p in protocol.metrics.items():
        metrics.append(
            MetricInfo(m, str(p["label"]), bool(p["higher_is_better"]), bool(p["ranked"]), int(p.get("decimals", 4)))
        )
    confidence = protocol.aggregation.bootstrap.confidence
    pair_ids: list[str] = []
    clustered = sorted(
        {
            int(e.get("clusters") or 0)
            for r in runs
            for e in (r.summary.get("metrics") or {}).values()
            if isinstance(e, dict) and e.get("interval") == "cluster bootstrap"
        }
    )
    for r in runs:
        pair_ids += [p for p in r.scores if p not in pair_ids]
    shown = pair_ids if max_pairs == 0 else pair_ids[:max_pairs]
    return Page(
        runs=runs,
        labels=labels,
        metrics=metrics,
        confidence=confidence,
        interval=(
            f"cluster bootstrap CI over {'/'.join(map(str, clustered))} clusters of pairs that share an input image"
            + _no_interval(runs)
            if clustered
            else ""
        ),
        protocol_id=str(run_field(first, "protocol", "id")),
        protocol_sha256=str(run_field(first, "protocol", "sha256")),
        track_id=str(run_field(first, "track")),
        dataset_id=str(run_field(first, "dataset", "id")),
        revision=str(run_field(first, "dataset", "revision")),
        manifest=run_field(first, "dataset", "manifest"),
        pair_ids=pair_ids,
        shown=shown,
        notes=notes,
    )


def short(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- sensitivity -------------------------------------------------------------------------------
_ANALYSIS_KEYS = {
    "track": str,
    "protocol": str,
    "protocol_sha256": str,
    "dataset_revision": str,
    "methods": list,
    "metrics": dict,
    "variants": list,
    "aggregates": dict,
    "rankings": dict,
    "kendall_tau": dict,
    "swaps": list,
    "unavailable": list,
}


def _number_or_null(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def load_analysis(sens_dir: Path, first_run=None) -> dict:
    """Read and validate SENS_DIR/analysis.json (written by `pstbench sensitivity`)."""
    path = sens_dir / ANALYSIS_FILE if sens_dir.is_dir() or sens_dir.suffix != ".json" else sens_dir
    fix = "fix: give the --out folder of `pstbench sensitivity`"
    if not path.is_file():
        raise UserError(f"--sensitivity {sens_dir}: {path} not found; {fix}")
    try:
        data = read_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc}); {fix}") from None

    def bad(rule: str) -> UserError:
        return UserError(f"{path}: not a sensitivity analysis ({rule}); {fix}")

    if not isinstance(data, dict):
        raise bad("the file must be a JSON object")
    for key, typ in _ANALYSIS_KEYS.items():
        if key not in data:
            raise bad(f"missing key '{key}'")
        if not isinstance(data[key], typ):
            raise bad(f"'{key}' must be a JSON {'string' if typ is str else 'array' if typ is list else 'object'}")
    for m, info in data["metrics"].items():
        if not isinstance(info, dict) or "label" not in info or not isinstance(info.get("higher_is_better"), bool):
            raise bad(f"metrics.{m} must have 'label' and a boolean 'higher_is_better'")
    if not data["variants"]:
        raise bad("'variants' is empty")
    ids = []
    for i, v in enumerate(data["variants"]):
        if not isinstance(v, dict) or not isinstance(v.get("id"), str):
            raise bad(f"variants[{i}] must be an object with a string 'id'")
        ids.append(v["id"])
    if len(set(ids)) != len(ids):
        raise bad("variant ids must be unique")
    for key in ("aggregates", "rankings", "kendall_tau"):
        for variant, per_metric in data[key].items():
            if variant not in ids:
                raise bad(f"{key} names variant '{variant}', which is not in 'variants'")
            if not isinstance(per_metric, dict):
                raise bad(f"{key}.{variant} must be an object of metric -> value")
    for variant, per_metric in data["rankings"].items():
        for m, order in per_metric.items():
            if not isinstance(order, list):
                raise bad(f"rankings.{variant}.{m} must be a list of methods, best first")
    for variant, per_metric in data["kendall_tau"].items():
        for m, t in per_metric.items():
            if not isinstance(t, dict) or "tau" not in t:
                raise bad(f"kendall_tau.{variant}.{m} must be an object with 'tau' and 'pvalue'")
            if not (_number_or_null(t.get("tau")) and _number_or_null(t.get("pvalue"))):
                raise bad(f"kendall_tau.{variant}.{m}: 'tau' and 'pvalue' must be finite numbers (or null)")
    # the numbers the page shows: what `pstbench sensitivity` wrote (finite numbers, or null), never a string or inf
    for variant, per_metric in data["aggregates"].items():
        for m, per_method in per_metric.items():
            if not isinstance(per_method, dict) or not all(_number_or_null(v) for v in per_method.values()):
                raise bad(f"aggregates.{variant}.{m} must map each method to a finite number (or null)")
    for variant, per_metric in (data.get("ranks") or {}).items() if isinstance(data.get("ranks"), dict) else ():
        for m, per_method in (per_metric or {}).items() if isinstance(per_metric, dict) else ():
            if not isinstance(per_method, dict) or not all(
                isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in per_method.values()
            ):
                raise bad(f"ranks.{variant}.{m} must map each method to its rank (a whole number >= 1)")
    for i, s in enumerate(data["swaps"]):
        need = ("variant", "metric", "a", "b", "base_significant", "variant_significant")
        if not isinstance(s, dict) or any(k not in s for k in need):
            raise bad(f"swaps[{i}] must be an object with {', '.join(need)}")
    for i, u in enumerate(data["unavailable"]):
        if not isinstance(u, dict) or any(k not in u for k in ("variant", "metric", "reason")):
            raise bad(f"unavailable[{i}] must be an object with variant, metric, reason")
    if first_run is not None:
        for label, key, want in (
            ("track", "track", run_field(first_run, "track")),
            ("dataset_revision", "dataset_revision", run_field(first_run, "dataset", "revision")),
            ("protocol_sha256", "protocol_sha256", run_field(first_run, "protocol", "sha256")),
        ):
            if data[key] != want:
                raise UserError(
                    f"{path}: {label} is {data[key]!r} but the runs ({first_run.path}) have {want!r}; the sensitivity "
                    "analysis must be of the same track, dataset revision and protocol file; fix: give a matching "
                    "--sensitivity folder or report it with runs of its track"
                )
    return data


def ranks_of(a: dict, variant: str, metric: str) -> dict[str, int] | None:
    """Method -> rank (1 = best) under a variant: the analysis's `ranks` (ties share a rank) when it has them,
    else the position in `rankings`. None when the variant has no ranking for the metric."""
    order = a["rankings"].get(variant, {}).get(metric)
    if not isinstance(order, list):
        return None
    given = (a.get("ranks") or {}).get(variant, {}).get(metric) if isinstance(a.get("ranks"), dict) else None
    if isinstance(given, dict) and all(isinstance(r, int) and not isinstance(r, bool) for r in given.values()):
        return {str(k): r for k, r in given.items()}
    return {str(x): i + 1 for i, x in enumerate(order)}


def entry_value(entry: dict):
    """The entry's mean (aggregation.entry_value; numpy is imported then, not at import time)."""
    from pytest_pstbench.paired.aggregation import entry_value as value_of

    return value_of(entry)


def _no_interval(runs) -> str:
    """'; no interval: ...' where a run's summary gives a mean without its interval (too few clusters)."""
    why = sorted(
        {
            str(e["no_interval"])
            for r in runs
            for e in (r.summary.get("metrics") or {}).values()
            if isinstance(e, dict) and e.get("no_interval")
        }
    )
    return "".join(f"; {w}" for w in why)

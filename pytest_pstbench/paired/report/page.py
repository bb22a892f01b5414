"""The page model of `pstbench report` over paired runs: the runs checked to be of one setting, their metrics,
labels and pairs (the sensitivity analysis is read by sensitivity.py, the Worst pairs by worst.py).

Only the standard library is imported (numpy, through aggregation, when a value is read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.store.reader import run_field
from pytest_pstbench.core.text import html_escape as esc


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
    thumb_size: int = 0  # the request's --thumb-size (paired_report sets it)
    published: list[bool] = field(
        default_factory=list
    )  # per run: pulled from the Hub (paths read inside its folder only)
    worst: list = field(default_factory=list)  # worst.WorstSection per ranked metric (two or more runs, --worst N > 0)
    worst_n: int = 0  # --worst N


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


def entry_value(entry: dict):
    """The entry's mean (aggregation.entry_value; numpy is imported then, not at import time)."""
    from pytest_pstbench.paired.aggregation import entry_value as value_of

    return value_of(entry)


def swatch(page: Page, name: str) -> str:
    """The colour swatch (HTML) of a run or method, as the figures draw it."""
    color = page.colors.get(name)
    return f'<span class="swatch" style="background:{esc(color)}"></span>' if color else ""


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

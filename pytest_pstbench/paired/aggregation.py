"""How per-pair values become a run's number: the protocol's statistic per metric and its bootstrap CI.

The statistic of a metric is `aggregation.per_metric.<metric>.statistic`, else
`aggregation.statistic` (default `mean`):

- `mean`, `median`: over the per-pair values.
- `pooled_mse` (PSNR only): the per-pair values are each pair's MSE (lower is better) and the run's
  number is `min(cap_db, 10 log10(data_range^2 / mean MSE))` in dB.

Both `pstbench score` (and the pytest plugin) and `pstbench sensitivity` aggregate here, so a score
run under a protocol equals that protocol's row of a sensitivity analysis.

summary.json keeps its historic entry for a mean (`mean`, `ci_low`, `ci_high`, `pm`); any other
statistic is written as `statistic` + `value` (never under the name `mean`). `entry_value` reads both.
"""

from __future__ import annotations

import math

import numpy as np

MEAN, MEDIAN, POOLED_MSE = "mean", "median", "pooled_mse"


def statistic_of(protocol, metric: str) -> str:
    """The statistic the protocol aggregates `metric` with."""
    return protocol.aggregation.statistic_of(metric)


def per_pair_is_mse(protocol, metric: str) -> bool:
    """True when the per-pair values of `metric` (metrics.csv, paired tests) are MSE, not the metric."""
    return statistic_of(protocol, metric) == POOLED_MSE


def per_pair_higher_is_better(protocol, metric: str) -> bool:
    """The direction of the per-pair values: per-pair MSE is lower-is-better whatever the metric says."""
    return False if per_pair_is_mse(protocol, metric) else bool(protocol.metrics[metric]["higher_is_better"])


def aggregate(values, statistic: str, params: dict) -> float:
    """The run's number for one metric from its per-pair values."""
    x = np.asarray(values, dtype=np.float64)
    if statistic == MEAN:
        return float(np.mean(x))
    if statistic == MEDIAN:
        return float(np.median(x))
    if statistic == POOLED_MSE:
        return _pooled_psnr(float(np.mean(x)), params)
    raise ValueError(f"unknown statistic {statistic!r}")  # protocol validation prevents this


def _pooled_psnr(mse: float, params: dict) -> float:
    cap = float(params["cap_db"])
    if mse == 0.0:
        return cap
    return float(min(cap, 10.0 * math.log10(float(params["data_range"]) ** 2 / mse)))


def summary_entry(values, protocol, metric: str, clusters=None) -> dict:
    """summary.json's entry for one metric over the scored pairs (`values` may be empty). Under a protocol whose
    bootstrap resamples clusters (`aggregation.bootstrap.unit: cluster`, statistic mean) `clusters` holds each
    value's cluster, and the entry adds `interval: cluster bootstrap` and `clusters` (their count); over fewer
    clusters than `bootstrap.min_clusters` the interval fields are null and `no_interval` says why."""
    from pytest_pstbench.core.stats import bootstrap_ci, bootstrap_mean_ci, cluster_bootstrap_mean_ci

    params = protocol.metrics[metric]
    statistic = statistic_of(protocol, metric)
    boot = protocol.aggregation.bootstrap
    kw = boot.kwargs()
    if boot.clustered:  # protocol validation: the statistic is the mean
        if clusters is None or len(clusters) != len(values):
            raise ValueError("a protocol that resamples clusters needs one cluster per value")
        entry = {"mean": None, "ci_low": None, "ci_high": None, "pm": None}
        refused = boot.too_few_clusters(len(set(clusters))) if len(values) else None
        if refused:  # the mean stands; an interval over too few clusters would claim a precision it lacks
            entry["mean"] = float(np.mean(np.asarray(values, dtype=np.float64)))
        elif len(values):
            ci = cluster_bootstrap_mean_ci(values, clusters, **kw)
            entry = {"mean": ci.mean, "ci_low": ci.ci_low, "ci_high": ci.ci_high, "pm": ci.pm}
        entry.update(interval="cluster bootstrap", clusters=len(set(clusters)))
        if refused:
            entry["no_interval"] = refused
    elif statistic == MEAN:
        entry = {"mean": None, "ci_low": None, "ci_high": None, "pm": None}
        if len(values):
            ci = bootstrap_mean_ci(values, **kw)
            entry = {"mean": ci.mean, "ci_low": ci.ci_low, "ci_high": ci.ci_high, "pm": ci.pm}
    else:
        entry = {"statistic": statistic, "value": None, "ci_low": None, "ci_high": None, "pm": None}
        if len(values):
            if statistic == MEDIAN:
                rows = lambda r: np.median(r, axis=1)  # noqa: E731
            else:
                rows = lambda r: np.array([_pooled_psnr(float(m), params) for m in r.mean(axis=1)])  # noqa: E731
            ci = bootstrap_ci(values, rows, aggregate(values, statistic, params), **kw)
            entry.update(value=ci.mean, ci_low=ci.ci_low, ci_high=ci.ci_high, pm=ci.pm)
            if statistic == POOLED_MSE:
                entry["per_pair"] = "mse"
    entry["higher_is_better"] = bool(params["higher_is_better"])
    entry["ranked"] = bool(params["ranked"])
    return entry


def entry_value(entry: dict) -> float | None:
    """The run's number in a summary.json metric entry (a mean, or the `value` of another statistic)."""
    return entry.get("value") if "statistic" in entry else entry.get("mean")


def heading_suffix(protocol, metric: str) -> str:
    """' (median)' / ' (pooled MSE)' after a column heading when the statistic is not the mean."""
    return {MEAN: "", MEDIAN: " (median)", POOLED_MSE: " (pooled MSE)"}[statistic_of(protocol, metric)]

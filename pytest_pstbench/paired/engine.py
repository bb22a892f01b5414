"""The metric engine as the kit runs it: `metrics.scorer`'s `MetricComputer` and `PairScorer` given the
pretrained weights of learned metrics from `data.weights.resolve.resolve_features` (read from the cache, fetched
on first use).

Metrics fetch nothing (`metrics/` imports no `data/`); this is where the two meet, for the paired kind's
session and sensitivity engine and for `api.metric`. The weights' digests are part of a score cache key
(`weights_digests`, before scoring; `PairScorer.weights_used`, what a computation was given).
"""

from __future__ import annotations

from pytest_pstbench.data.weights.cachefile import cached_info
from pytest_pstbench.data.weights.resolve import resolve_features
from pytest_pstbench.metrics.registry import pretrained_backbones
from pytest_pstbench.metrics.scorer import MetricComputer, PairScorer


def weights_digests(protocol) -> dict[str, str | None]:
    """backbone -> the digest of the weights the protocol's learned metrics would be given now (each entry's
    `metrics.registry` declaration): the weights cache's record (`data.weights.cachefile.cached_info`, read without
    loading torch; loading re-checks it), None while none are cached (fetched on first use)."""
    return {b: (cached_info(b) or {}).get("digest") for b in pretrained_backbones(protocol.metrics)}


def metric_computer(device: str = "cpu") -> MetricComputer:
    """A `metrics.scorer.MetricComputer` with the kit's source of pretrained weights."""
    return MetricComputer(device, weights=resolve_features)


def pair_scorer(protocol, device: str = "cpu") -> PairScorer:
    """A `metrics.scorer.PairScorer` with the kit's source of pretrained weights."""
    return PairScorer(protocol, device, weights=resolve_features)

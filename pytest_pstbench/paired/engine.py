"""The metric engine as the kit runs it: `metrics.scorer`'s `MetricComputer` and `PairScorer` given the
LPIPS backbone weights from `data.weights.resolve_features` (read from the cache, fetched on first use).

Metrics fetch nothing (`metrics/` imports no `data/`); this is where the two meet, for the paired kind's
session and sensitivity engine and for `api.metric`.
"""
from __future__ import annotations

from pytest_pstbench.data.weights import resolve_features
from pytest_pstbench.metrics import scorer


class MetricComputer(scorer.MetricComputer):
    """`metrics.scorer.MetricComputer` with the kit's source of pretrained weights."""

    def __init__(self, device: str = "cpu"):
        super().__init__(device, weights=resolve_features)


class PairScorer(scorer.PairScorer):
    """`metrics.scorer.PairScorer` with the kit's source of pretrained weights."""

    def __init__(self, protocol, device: str = "cpu"):
        super().__init__(protocol, device, weights=resolve_features)

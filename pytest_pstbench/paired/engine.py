"""The metric engine as the kit runs it: `metrics.scorer`'s `MetricComputer` and `PairScorer` given the
LPIPS backbone weights from `data.weights.resolve.resolve_features` (read from the cache, fetched on first use).

Metrics fetch nothing (`metrics/` imports no `data/`); this is where the two meet, for the paired kind's
session and sensitivity engine and for `api.metric`. The weights' digests are part of a score cache key
(`weights_digests`, before scoring; `PairScorer.weights_used`, what a computation was given).
"""

from __future__ import annotations

from pytest_pstbench.data.weights.cachefile import cached_info
from pytest_pstbench.data.weights.resolve import resolve_features
from pytest_pstbench.metrics import scorer
from pytest_pstbench.metrics.registry import LPIPS_BACKBONES


def backbones(protocol) -> list[str]:
    """The backbones whose pretrained weights the protocol's metrics load (LPIPS: one per net used)."""
    return sorted(
        {LPIPS_BACKBONES[p.get("net", "alex")] for p in protocol.metrics.values() if p.get("kind") == "lpips"}
    )


def weights_digests(protocol) -> dict[str, str | None]:
    """backbone -> the digest of the weights the protocol's metrics would be given now: the weights cache's
    record (`data.weights.cachefile.cached_info`, read without loading torch; loading re-checks it), None while none
    are cached (fetched on first use)."""
    return {b: (cached_info(b) or {}).get("digest") for b in backbones(protocol)}


class MetricComputer(scorer.MetricComputer):
    """`metrics.scorer.MetricComputer` with the kit's source of pretrained weights."""

    def __init__(self, device: str = "cpu"):
        super().__init__(device, weights=resolve_features)


class PairScorer(scorer.PairScorer):
    """`metrics.scorer.PairScorer` with the kit's source of pretrained weights."""

    def __init__(self, protocol, device: str = "cpu"):
        super().__init__(protocol, device, weights=resolve_features)

    def weights_used(self) -> dict[str, str | None]:
        """backbone -> the digest of the weights the metrics computed so far were given (their models are built
        once per process, so this may differ from `weights_digests` when the cache changed since)."""
        return {
            LPIPS_BACKBONES[m.net]: (m.weights_info or {}).get("digest")
            for m in self.computer.built()
            if hasattr(m, "weights_info") and hasattr(m, "net")
        }

"""`PairScorer`: every metric of a protocol on one (output, reference, style) triple."""
from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_pstbench.metrics.registry import function_kwargs as metric_params  # noqa: F401 (the keyword arguments of a metric function)
from pytest_pstbench.metrics.registry import get as metric_kind


class PairScorer:
    """Scores one output against its reference (and style) with every metric of a protocol.

    Each metric's function comes from the metric registry (`metrics/registry.py`); a stateful one
    (LPIPS: its model built on first use, once per process and net/version/device) is kept per
    metric name. Otherwise stateless.
    """

    def __init__(self, protocol, device: str = "cpu"):
        self.protocol = protocol
        self.device = device
        self._functions: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {}

    def _function(self, name: str, params: dict) -> Callable[[np.ndarray, np.ndarray], float]:
        if name not in self._functions:
            self._functions[name] = metric_kind(params["kind"]).make(params, self.device)
        return self._functions[name]

    def score(self, output: np.ndarray, reference: np.ndarray, style: np.ndarray | None,
              shared: dict | None = None) -> dict[str, float]:
        """Per-pair value of each metric: the metric itself, or the pair's MSE for a PSNR the protocol
        aggregates as `pooled_mse` (see `pytest_pstbench.core.aggregation`).

        `shared`: a dict the caller keeps per pair while it scores several outputs against the same
        reference and style; the reference-side half of a metric is computed once and kept there (LPIPS:
        the reference's backbone features; `LpipsMetric.distance_from_features` then equals `distance`).
        """
        from pytest_pstbench.core.aggregation import per_pair_is_mse
        from pytest_pstbench.metrics import mse

        values = {}
        for name, params in self.protocol.metrics.items():
            other = reference if params["against"] == "reference" else style
            if other is None:
                raise ValueError(f"metric {name} needs the {params['against']} image")
            if per_pair_is_mse(self.protocol, name):
                values[name] = float(mse(output, other, channels=params.get("channels", "rgb"), luma_weights=params.get("luma_weights")))
            elif shared is not None and params["kind"] == "lpips":
                metric = self._function(name, params).__self__  # the bound LpipsMetric.distance
                metric.check_inputs(output, other)
                key = ("lpips features", metric.feature_key(), params["against"])
                if key not in shared:
                    shared[key] = metric.features(other)
                values[name] = float(metric.distance_from_features(metric.features(output), shared[key]))
            else:
                values[name] = float(self._function(name, params)(output, other))
        return values

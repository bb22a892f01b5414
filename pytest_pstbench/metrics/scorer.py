"""The metric engine: `MetricComputer` computes one protocol metric entry on one image pair, and
`PairScorer` applies every metric of a protocol to one (output, reference, style) triple through it.

Everything that turns images into a metric value goes through `MetricComputer.value`: `pstbench
score`, `pstbench demo` and the pytest items (through `PairScorer`) and the sensitivity engine (one
call per distinct computation of its plan, `paired/sensitivity.py`). A metric whose work splits into
one half per image (LPIPS: each image's normalized backbone features, `LpipsMetric.features`; the
distance from two such halves, `distance_from_features`, is the rest of lpips's own forward, the same
operations in the same order) is computed from those halves, kept in stores the caller owns: the
reference's half once per pair for every method scored against it, an output's once for every metric
and variant that needs it. SSIM, CIEDE2000 and H-Corr (`metrics/kernels.py`) split the same way
(`prepare_other`: the reference's filtered means, its CIELAB, its histograms; `prepare_output`, where
an output's half can serve several metrics: its CIELAB, its histograms; `value_prepared`).
"""

from __future__ import annotations

import json

import numpy as np

from pytest_pstbench.metrics.registry import computing_params
from pytest_pstbench.metrics.registry import get as metric_kind

VALUE, MSE = "value", "mse"  # the per-pair quantity: the metric itself, or the pair's MSE (pooled PSNR)


class MetricComputer:
    """Computes metric entries (a protocol's `metrics.<name>` parameters) on image pairs.

    One callable per distinct computing parameters (the entry less its naming keys), built from the
    metric registry on first use; a stateful one (LPIPS: its model, once per process and
    net/version/device) is kept. `calls` and `feature_passes` count the work done. `weights`: the
    source of pretrained weights a metric needs (LPIPS's backbone; `metrics.lpips_metric.WeightsSource`),
    handed in by the caller (`paired/engine.py` hands `data.weights.resolve.resolve_features`): metrics fetch nothing.
    """

    def __init__(self, device: str = "cpu", weights=None):
        self.device = device
        self.weights = weights
        self._callables: dict[str, object] = {}
        self.calls = 0
        self.feature_passes = 0  # per-image halves computed (LPIPS backbone passes)
        self.feature_seconds = 0.0  # wall time of those passes (benchmarks/bench_sensitivity.py's yardstick)

    def _callable(self, params: dict):
        key = json.dumps(computing_params(params), sort_keys=True)
        if key not in self._callables:
            kind = metric_kind(params["kind"])
            self._callables[key] = (
                kind.instance(params, self.device, self.weights) if kind.stateful else kind.make(params, self.device)
            )
        return self._callables[key]

    def built(self) -> list:
        """The metric callables built so far (e.g. an LPIPS model, whose `weights_info` names the weights it was given)."""
        return list(self._callables.values())

    def value(
        self, params: dict, output: np.ndarray, other: np.ndarray, *, quantity: str = VALUE, stores: tuple | None = None
    ) -> float:
        """The entry's per-pair `quantity` between `output` and `other` (the image its `against` names).

        `stores`: (other_store, other_key, output_store, output_key) — dicts the caller keeps and the
        keys that name the two images in them (e.g. the role and evaluation size); a split metric's
        per-image halves are kept there under (its feature key, image key). Without stores a split
        metric's halves are computed for this call only (the same values).
        """
        kind = metric_kind(params["kind"])
        for what, image in (("output", output), (params.get("against", "other image"), other)):
            kind.check_size(params, what, image)  # the one check of an image's size, for every caller
        self.calls += 1
        fn = self._callable(params)
        if quantity == MSE:  # PSNR's per-pair MSE (`PsnrMetric.mse`: on the device for 8-bit RGB)
            return float(fn.mse(output, other))
        other_store, other_key, output_store, output_key = stores if stores is not None else ({}, "other", {}, "output")
        if hasattr(fn, "prepare_other"):  # SSIM, CIEDE2000, H-Corr: each image's half once per store
            fn.check_inputs(output, other)
            key = (fn.prepare_key(), other_key)
            if key not in other_store:
                other_store[key] = fn.prepare_other(other)
            prepared_output = output
            if hasattr(fn, "prepare_output"):
                okey = (fn.prepare_key(), output_key, "output")
                if okey not in output_store:
                    output_store[okey] = fn.prepare_output(output)
                prepared_output = output_store[okey]
            return float(fn.value_prepared(prepared_output, other_store[key]))
        if not hasattr(fn, "features"):
            return float(fn(output, other))
        fn.check_inputs(output, other)
        fo = self._half(fn, output_store, output_key, output)
        fr = self._half(fn, other_store, other_key, other)
        return float(fn.distance_from_features(fo, fr))

    def _half(self, metric, store: dict, image_key, image: np.ndarray):
        key = (metric.feature_key(), image_key)
        if key not in store:
            import time

            t0 = time.perf_counter()
            store[key] = metric.features(image)
            self.feature_seconds += time.perf_counter() - t0
            self.feature_passes += 1
        return store[key]


class PairScorer:
    """Scores one output against its reference (and style) with every metric of a protocol."""

    def __init__(self, protocol, device: str = "cpu", weights=None):
        self.protocol = protocol
        self.device = device
        self.computer = MetricComputer(device, weights)

    def score(
        self, output: np.ndarray, reference: np.ndarray, style: np.ndarray | None, shared: dict | None = None
    ) -> dict[str, float]:
        """Per-pair value of each metric: the metric itself, or the pair's MSE for a PSNR the protocol
        aggregates as `pooled_mse` (see `pytest_pstbench.paired.aggregation`; the protocol's
        `aggregation.statistic_of`).

        `shared`: a dict the caller keeps per pair while it scores several outputs against the same
        reference and style (at one evaluation size); the reference-side half of a split metric
        (LPIPS: the reference's backbone features) is computed once and kept there.
        """
        other_store = shared if shared is not None else {}
        output_store: dict = {}  # this output's halves, shared by the protocol's metrics
        values = {}
        for name, params in self.protocol.metrics.items():
            other = reference if params["against"] == "reference" else style
            if other is None:
                raise ValueError(f"metric {name} needs the {params['against']} image")
            quantity = MSE if self.protocol.aggregation.statistic_of(name) == "pooled_mse" else VALUE
            values[name] = self.computer.value(
                params,
                output,
                other,
                quantity=quantity,
                stores=(other_store, params["against"], output_store, "output"),
            )
        return values

    def weights_used(self) -> dict[str, str | None]:
        """backbone -> the digest of the pretrained weights the metrics computed so far were given (their models
        are built once per process, so this may differ from what the weights cache holds now)."""
        return {
            m.backbone: (m.weights_info or {}).get("digest")
            for m in self.computer.built()
            if hasattr(m, "weights_info") and hasattr(m, "backbone")
        }

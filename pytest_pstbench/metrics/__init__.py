"""Metrics: pure functions on uint8 HxWx3 arrays, chosen and parametrised by the protocol file.

`registry` (standard library only) says what each metric kind is; the functions live in `fidelity`
(PSNR, MSE, SSIM), `color` (CIEDE2000/CIE76, histogram correlation) and `lpips_metric`, and
`scorer.PairScorer` applies a protocol's metrics to one image pair. The package is the namespace in
which a registry entry's `function` is found by name (`registry.MetricKind`); the names are loaded on
first access, so importing this package (or its registry) costs nothing.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "psnr": "fidelity",
    "ssim": "fidelity",
    "mse": "fidelity",
    "delta_e00": "color",
    "hist_corr": "color",
    "LpipsMetric": "lpips_metric",
    "SsimMetric": "kernels",
    "DeltaE00Metric": "kernels",
    "HistCorrMetric": "kernels",
    "PsnrMetric": "kernels",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))

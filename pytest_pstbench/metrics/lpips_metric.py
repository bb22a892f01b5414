"""LPIPS as a pure metric: no network access, no download; the backbone's weights are handed in.

The model is `lpips.LPIPS(net, version, pretrained=True, pnet_rand=True)`: the linear layers
come from the lpips package's own bundled weights (`lpips/weights/v{version}/{net}.pth`), and the
backbone's conv layers (which lpips would otherwise have torchvision download) are loaded from the
`weights` source its builder hands in, a callable `backbone -> (features, info)` (the kit's is
`pytest_pstbench.data.weights.resolve.resolve_features`, which fetches them on first use): AlexNet for net
'alex', VGG16 for 'vgg', SqueezeNet 1.1 for 'squeeze'. No random weights are drawn while lpips builds
the model (`_initialisers_skipped`): every tensor is then loaded.

Inputs: 8-bit values x mapped linearly onto `input_scale` ([-1, 1]: x * 2/255 - 1, lpips's
convention; [0, 1]: x/255, given to lpips as is, i.e. without its normalize=True rescaling).
Images are scored at full size unless `resize: [W, H]` asks for both to be resized first
(PIL, on the uint8 images, with the filter `resize_filter`).

`distance(a, b)` calls lpips's own `LPIPS.forward` (the protocol's path). For work that compares one
image with several others (the sensitivity engine), `features(x)` gives one image's normalized
backbone activations, the part of `LPIPS.forward` that depends on one input only, and
`distance_from_features(fa, fb)` finishes the forward on two such stacks (squared difference, the
linear layers, spatial mean, sum over layers); `feature_key()` says which metrics share features.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.metrics.registry import (
    LPIPS_BACKBONES,
    LPIPS_INPUT_SCALES,
    LPIPS_NETS,
    LPIPS_VERSIONS,
    RESIZE_FILTERS,
)

_MODELS: dict[tuple[str, str, str], tuple[Any, dict]] = {}

#: A source of a backbone's conv weights: backbone name ("alexnet", "vgg16", "squeezenet1_1") ->
#: ({"features.N.weight"/"bias": float32 tensor}, info for run.json), e.g. `data.weights.resolve.resolve_features`.
WeightsSource = Callable[[str], tuple[dict, dict]]

NETS = LPIPS_NETS  # "alex", "vgg", "squeeze" (keys of LPIPS_BACKBONES)
VERSIONS = LPIPS_VERSIONS
INPUT_SCALES = LPIPS_INPUT_SCALES
_LOCK = threading.Lock()


def _check_package_version(expected: str) -> None:
    try:
        installed = importlib.metadata.version("lpips")
    except importlib.metadata.PackageNotFoundError:
        raise UserError(
            f"the protocol's LPIPS needs lpips=={expected}, which is not installed; run `pip install lpips=={expected}`."
        ) from None
    if installed != str(expected):
        raise UserError(
            f"the protocol's LPIPS needs lpips=={expected}, but lpips {installed} is installed; "
            f"run `pip install lpips=={expected}`."
        )


def _feature_key(slice_key: str) -> str | None:
    """'slice2.3.weight' -> 'features.3.weight', 'slice2.3.squeeze.weight' -> 'features.3.squeeze.weight'
    (lpips keeps torchvision's feature indices)."""
    parts = slice_key.split(".")
    if len(parts) >= 3 and parts[0].startswith("slice"):
        return "features." + ".".join(parts[1:])
    return None


_INITIALISERS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "zeros_",
    "ones_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "xavier_uniform_",
    "xavier_normal_",
)


@contextlib.contextmanager
def _initialisers_skipped():
    """While lpips builds its model, `torch.nn.init`'s initialisers leave tensors as allocated.

    With pnet_rand=True lpips builds torchvision's whole architecture with random weights (VGG16's
    classifier alone is 124M values: ~0.8 s of a 1.1 s build), keeps the backbone, and loads its linear
    layers from its weight file; `_build` then loads every backbone tensor (strict) and
    `_check_linear_layers_loaded` proves the linear layers came from the file, so no value drawn here
    would have survived. Called under `_LOCK` (torch.nn.init is a module shared by the process)."""
    saved = {name: getattr(torch.nn.init, name) for name in _INITIALISERS if hasattr(torch.nn.init, name)}

    def keep(tensor, *args, **kwargs):
        return tensor

    for name in saved:
        setattr(torch.nn.init, name, keep)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.nn.init, name, fn)


def _check_linear_layers_loaded(model, lpips, net: str, version: str) -> None:
    """Every tensor of the model outside the backbone (`net.*`) and lpips's fixed scaling constants is in
    lpips's bundled weight file, which `LPIPS.__init__` loaded (non-strictly): reload it and check."""
    from pathlib import Path

    path = Path(lpips.__file__).resolve().parent / "weights" / f"v{version}" / f"{net}.pth"
    state = torch.load(path, map_location="cpu", weights_only=True)
    result = model.load_state_dict(state, strict=False)
    tensors = model.state_dict(keep_vars=True)
    loaded = {tensors[k].data_ptr() for k in state if k in tensors}  # `lins.K` are aliases of `linK`
    others = [
        k
        for k in result.missing_keys
        if not k.startswith(("net.", "scaling_layer.")) and tensors[k].data_ptr() not in loaded
    ]
    if others or result.unexpected_keys:
        missing = others or result.unexpected_keys
        raise RuntimeError(f"lpips {net} v{version}: its weight file {path} does not hold {missing}")


def _build(net: str, version: str, device: str, weights_source: WeightsSource) -> tuple[Any, dict]:
    import lpips

    if net not in NETS:
        raise UserError(f"protocol metrics.lpips.net is '{net}'; it must be one of {', '.join(NETS)}.")
    if version not in VERSIONS:
        raise UserError(f"protocol metrics.lpips.version is '{version}'; it must be one of {', '.join(VERSIONS)}.")
    weights, info = weights_source(LPIPS_BACKBONES[net])
    # pnet_rand must neither disturb the caller's global RNG state nor spend time drawing weights that are
    # all replaced below (`_initialisers_skipped`).
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings(), _initialisers_skipped():
        warnings.filterwarnings("ignore", message=r".*(pretrained|weights).*", category=UserWarning)
        model = lpips.LPIPS(net=net, version=version, pretrained=True, pnet_rand=True, verbose=False)
    _check_linear_layers_loaded(model, lpips, net, version)
    backbone = model.net
    state = backbone.state_dict()
    mapped = {k: _feature_key(k) for k in state}
    if sorted(v for v in mapped.values() if v) != sorted(weights) or any(v is None for v in mapped.values()):
        raise RuntimeError(f"unexpected lpips {net} backbone layout: {sorted(state)}")
    new_state = {k: weights[f].to(dtype=state[k].dtype) for k, f in mapped.items()}
    backbone.load_state_dict(new_state, strict=True)
    model = model.to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, info


def max_pool_strided(x: torch.Tensor, kernel: int, stride: int) -> torch.Tensor:
    """`max_pool2d(x, kernel, stride)` (no padding, dilation 1, floor mode) as a maximum over strided views,
    rows first, then columns: the same values bit for bit (a maximum is exact in any order), and on the CPU
    several times faster than torch's pooling kernel in the default layout (benchmarks/bench_fast.py)."""
    height, width = x.shape[-2:]
    ho, wo = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    if ho < 1 or wo < 1:
        return torch.nn.functional.max_pool2d(x, kernel, stride)  # torch's own error for a too-small input
    rows = x[..., 0 : stride * (ho - 1) + 1 : stride, :]
    for i in range(1, kernel):
        rows = torch.maximum(rows, x[..., i : i + stride * (ho - 1) + 1 : stride, :])
    out = rows[..., 0 : stride * (wo - 1) + 1 : stride]
    for j in range(1, kernel):
        out = torch.maximum(out, rows[..., j : j + stride * (wo - 1) + 1 : stride])
    return out


def _plain_pool(layer) -> tuple[int, int] | None:
    """(kernel, stride) of a square MaxPool2d without padding, dilation or ceil mode, else None."""
    if not isinstance(layer, torch.nn.MaxPool2d) or layer.ceil_mode or layer.return_indices:
        return None
    ks, st, pad, dil = (
        v if isinstance(v, tuple) else (v, v) for v in (layer.kernel_size, layer.stride, layer.padding, layer.dilation)
    )
    if ks[0] != ks[1] or st[0] != st[1] or pad != (0, 0) or dil != (1, 1):
        return None
    return int(ks[0]), int(st[0])


def backbone_layers(net, t: torch.Tensor, n_layers: int) -> list[torch.Tensor]:
    """The outputs of lpips's backbone `net` (`slice1` .. `slice<n_layers>`, applied in turn, as its
    `forward` does), with each plain max-pooling layer computed by `max_pool_strided`."""
    outs = []
    h = t
    for k in range(1, n_layers + 1):
        for layer in getattr(net, f"slice{k}"):
            pool = _plain_pool(layer)
            h = max_pool_strided(h, *pool) if pool is not None else layer(h)
        outs.append(h)
    return outs


def _lin_weight(lin) -> np.ndarray:
    """The channel weights (float64) of one of lpips's linear layers (`NetLinLayer`: dropout, inactive in
    eval mode, then a 1x1 convolution to one channel without bias)."""
    convs = [m for m in lin.modules() if isinstance(m, torch.nn.Conv2d)]
    if len(convs) != 1 or convs[0].bias is not None or convs[0].out_channels != 1 or convs[0].kernel_size != (1, 1):
        raise RuntimeError(f"unexpected lpips linear layer: {lin}")
    return convs[0].weight.detach().reshape(-1).cpu().double().numpy()


class LpipsMetric:
    """LPIPS distance under the protocol's `metrics.lpips` parameters.

    `weights`: where the backbone's conv weights come from (`WeightsSource`; the kit's metric engine passes
    `data.weights.resolve.resolve_features`). The model is built once per process and net/version/device."""

    def __init__(self, params: dict, device: str = "cpu", weights: WeightsSource | None = None):
        self.params = dict(params)
        self.net = str(params["net"])
        self.backbone = LPIPS_BACKBONES.get(self.net)  # whose pretrained weights it loads (registry: `backbone`)
        self.version = str(params["version"])
        scale = params.get("input_scale", [-1.0, 1.0])
        self.lo, self.hi = float(scale[0]), float(scale[1])
        if (self.lo, self.hi) not in INPUT_SCALES:
            raise UserError(
                f"protocol metrics.lpips.input_scale is {list(scale)}; it must be [-1.0, 1.0] or [0.0, 1.0]."
            )
        resize = params.get("resize")
        self.resize: tuple[int, int] | None = None
        self.resample = None
        if resize is not None:
            from PIL import Image

            filt = params.get("resize_filter")
            if filt not in RESIZE_FILTERS:
                raise UserError(
                    f"protocol metrics.lpips.resize_filter is {filt!r}; with resize it must be one of "
                    f"{', '.join(RESIZE_FILTERS)}."
                )
            self.resize = (int(resize[0]), int(resize[1]))
            self.resample = Image.Resampling[filt.upper()]
        _check_package_version(str(params["package_version"]))
        from pytest_pstbench.metrics.kernels import check_device

        self.device = check_device(device)
        if weights is None:
            raise TypeError(
                "LpipsMetric needs weights=, the source of its backbone's weights "
                "(e.g. pytest_pstbench.data.weights.resolve.resolve_features): metrics fetch nothing"
            )
        key = (self.net, self.version, self.device)
        with _LOCK:
            if key not in _MODELS:
                _MODELS[key] = _build(*key, weights)
            self.model, self.weights_info = _MODELS[key]
        self._lin_weights: list | None = None

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.array(x, dtype=np.uint8, order="C", copy=True)).to(self.device)
        t = t.permute(2, 0, 1).unsqueeze(0).to(torch.float32)
        if (self.lo, self.hi) == (0.0, 1.0):
            return t / 255.0
        return t * ((self.hi - self.lo) / 255.0) + self.lo

    def _resized(self, x: np.ndarray) -> np.ndarray:
        from PIL import Image

        return np.asarray(Image.fromarray(np.ascontiguousarray(x)).resize(self.resize, resample=self.resample))

    @staticmethod
    def _check_input(name: str, x) -> None:
        if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 3 or x.shape[2] != 3:
            raise UserError(
                f"LPIPS input {name} must be a uint8 HxWx3 array, got "
                f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}."
            )

    def _too_small(self, exc: RuntimeError, shape: tuple) -> UserError | None:
        if "too small" not in str(exc):
            return None
        need = " (it needs at least 31 px on each side)" if self.net == "alex" else ""
        return UserError(f"image of {shape[1]}x{shape[0]} px is too small for LPIPS with net '{self.net}'{need}.")

    def check_inputs(self, a, b) -> None:
        """The rules `distance` applies to its two images (UserError when broken)."""
        self._check_input("a", a)
        self._check_input("b", b)
        if a.shape != b.shape:
            raise UserError(f"LPIPS inputs differ in size: {a.shape} vs {b.shape}; score at the reference's size.")

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        """LPIPS between two uint8 HxWx3 images of the same shape, at full size (or both resized to `resize`)."""
        self.check_inputs(a, b)
        if self.resize is not None:
            a, b = self._resized(a), self._resized(b)
        with torch.inference_mode():
            try:
                d = self.model(self._tensor(a), self._tensor(b))
            except RuntimeError as exc:
                err = self._too_small(exc, a.shape)
                if err is not None:
                    raise err from None
                raise
        return float(d.reshape(-1)[0].item())

    def feature_key(self) -> tuple:
        """Metrics with equal keys give equal `features` for the same image (the linear layers, which
        also depend on the version, enter only in `distance_from_features`)."""
        return (self.net, self.version, self.lo, self.hi, self.resize, self.resample, self.device)

    def features(self, x: np.ndarray) -> list[torch.Tensor]:
        """One image's half of `LPIPS.forward`: the uint8 HxWx3 image (resized to `resize` if set) mapped
        onto `input_scale`, lpips's scaling layer applied for version 0.1 only (as lpips does), the
        backbone's layer outputs (`backbone_layers`: lpips's layers, its plain max-pooling by the equal and
        faster `max_pool_strided`), each normalized over channels with `lpips.normalize_tensor`."""
        from lpips import normalize_tensor

        self._check_input("x", x)
        if self.resize is not None:
            x = self._resized(x)
        model = self.model
        with torch.inference_mode():
            t = self._tensor(x)
            if model.version == "0.1":  # lpips 0.1.4: "v0.0 - original release had a bug, where input was not scaled"
                t = model.scaling_layer(t)
            try:
                outs = backbone_layers(model.net, t, model.L)
            except RuntimeError as exc:
                err = self._too_small(exc, x.shape)
                if err is not None:
                    raise err from None
                raise
            return [normalize_tensor(o) for o in outs]

    def distance_from_features(self, fa: list[torch.Tensor], fb: list[torch.Tensor]) -> float:
        """LPIPS from two `features` stacks of this metric (or one with the same `feature_key`): the rest
        of `LPIPS.forward` with lpips=True, spatial=False: per layer, the spatial mean of the linear
        layer's weighted sum over channels of the squared difference, summed over layers.

        Written as sum_c w_c * mean(d_c^2) (the same quantity: the linear layer is a 1x1 convolution
        without bias), with the per-channel sums taken by numpy in float64: the result does not depend on
        torch's thread count (lpips's 1x1 convolution and float32 mean do, in the last bits) and is
        closer to the exact value than lpips's float32 (agreeing with it to ~1e-8)."""
        model = self.model
        if len(fa) != model.L or len(fb) != model.L or any(a.shape != b.shape for a, b in zip(fa, fb)):
            raise UserError(
                f"LPIPS features differ in layout: {[tuple(a.shape) for a in fa]} vs "
                f"{[tuple(b.shape) for b in fb]}; compute both with one metric on images of one size."
            )
        if self._lin_weights is None:
            self._lin_weights = [_lin_weight(model.lins[k]) for k in range(model.L)]
        val = 0.0
        with torch.inference_mode():
            for k in range(model.L):
                d = fa[k] - fb[k]
                d2 = d.mul_(d).reshape(d.shape[1], -1).cpu().numpy()  # (channels, pixels)
                val += float(self._lin_weights[k] @ d2.sum(axis=1, dtype=np.float64)) / float(d2.shape[1])
        return float(val)

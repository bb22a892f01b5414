"""The metric registry: one entry per metric kind (a protocol's `metrics.<name>.kind`).

An entry holds everything the kit knows about a kind: the function that computes it (imported on
first use, so this module and protocol validation need only the standard library), the parameters
it cannot do without, the checks of its optional parameters, its natural direction, and the
independent reference it follows (what its tests compare against). Protocol validation, scoring
(`PairScorer`), the sensitivity engine and the docs all read it: adding a metric kind means adding
one `register(...)` here and its function.

Values the optional parameters may take are listed here too (the first of each is the default).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any

# Keys of a protocol metric entry that say how the metric is named, shown and ranked: they do not
# change a value. `kind` and `against` choose what is computed and on which image pair; the other
# keys are the function's keyword arguments.
BOOKKEEPING_KEYS = ("label", "decimals", "higher_is_better", "ranked")
ROUTING_KEYS = ("kind", "against")
ENTRY_KEYS = ("kind", "label", "higher_is_better", "ranked", "against")  # every entry has these

CHANNELS = ("rgb", "luma")
SSIM_DOWNSAMPLE = ("none", "wang")
DELTA_E_FORMULAS = ("ciede2000", "cie76")
LPIPS_BACKBONES = {"alex": "alexnet", "vgg": "vgg16", "squeeze": "squeezenet1_1"}  # LPIPS net -> its backbone
LPIPS_NETS = tuple(LPIPS_BACKBONES)
LPIPS_VERSIONS = ("0.1", "0.0")
LPIPS_INPUT_SCALES = ((-1.0, 1.0), (0.0, 1.0))
RESIZE_FILTERS = ("nearest", "box", "bilinear", "hamming", "bicubic", "lanczos")  # PIL Image.Resampling names
# Ranges of the sizes a protocol sets (docs/protocol.md, "Ranges"): beyond them scoring would allocate gigabytes.
MAX_SIDE = 65_535  # an image side (pixels) a protocol may ask to resize to (PNG's and PIL's practical limit)
MAX_BINS = 65_536  # histogram bins (an 8-bit channel fills 256 of them)
MAX_SIGMA = 100.0  # SSIM's Gaussian sigma (window of 2*int(3.5*sigma + 0.5) + 1 = 701 pixels at most)
MAX_WIN_SIZE = 1_001  # SSIM's uniform window side


@dataclass(frozen=True)
class SsimParams:
    """The parameters of skimage's `structural_similarity` a protocol's SSIM entry sets (`kind: ssim`): the one
    list the reference function (`fidelity.ssim`), the kernel (`kernels_ssim`, `kernels.SsimMetric`) and the
    registry's required keys read (those without a default)."""

    data_range: float
    gaussian_weights: bool
    sigma: float
    use_sample_covariance: bool
    channel_pooling: str = "mean"
    win_size: int = 7  # the uniform window's side (used when gaussian_weights is false)


SSIM_TRUNCATE = 3.5  # skimage's Gaussian truncation: a Gaussian window's radius is int(3.5 * sigma + 0.5)


def ssim_window(gaussian_weights: bool, sigma: float, win_size: int = 7) -> int:
    """The side of SSIM's window: the Gaussian's (truncated as skimage does) or the uniform `win_size`."""
    return 2 * int(SSIM_TRUNCATE * float(sigma) + 0.5) + 1 if gaussian_weights else int(win_size)


# The smallest side (px) of the image LPIPS's backbone takes: one pixel less and a layer's output is empty
# (checked against lpips's own backbones in tests/cli/test_input_errors.py).
LPIPS_MIN_SIDE = {"alex": 31, "vgg": 16, "squeeze": 17}

SSIM_PARAMS = tuple(f.name for f in fields(SsimParams))
SSIM_REQUIRED = tuple(f.name for f in fields(SsimParams) if f.default is MISSING)


def computing_params(params: dict) -> dict:
    """What determines a metric's value: the entry less its bookkeeping keys."""
    return {k: v for k, v in params.items() if k not in BOOKKEEPING_KEYS}


def function_kwargs(params: dict) -> dict:
    """The keyword arguments of the kind's function: the entry less bookkeeping and routing keys."""
    return {k: v for k, v in params.items() if k not in BOOKKEEPING_KEYS + ROUTING_KEYS}


@dataclass(frozen=True)
class MetricKind:
    kind: str
    function: str  # the name of the function (or class) in `pytest_pstbench.metrics`
    required: tuple[str, ...]  # parameters the function cannot do without
    higher_is_better: bool  # the kind's natural direction; a protocol entry must agree
    reference: str  # the independent computation its tests compare against
    check: Callable[[str, dict], str | None]  # first broken rule of the optional parameters, or None
    stateful: bool = False  # the function is a class built once per (parameters, device)
    # a learned metric: entry -> the backbone whose pretrained weights it loads (its class then takes `weights=`,
    # the source of those weights); None: a function of the images alone
    backbone: Callable[[dict], str] | None = None
    smallest: Callable[[dict], tuple[int, str]] | None = None  # the entry's smallest image side and why (default 1)

    def min_side(self, params: dict) -> int:
        """The smallest height and width (px) of an image this entry scores."""
        return self.smallest(params)[0] if self.smallest else 1

    def check_size(self, params: dict, what: str, image) -> None:
        """UserError when the array `image` (HxWx3) is smaller than this entry takes (an empty image has no
        value: H-Corr of two empty images is not 1.0)."""
        n, why = self.smallest(params) if self.smallest else (1, "")
        if getattr(image, "ndim", 0) < 2:
            return  # not an image: the metric's own input check names it
        height, width = int(image.shape[0]), int(image.shape[1])
        if min(height, width) < n:
            from pytest_pstbench.core.errors import UserError

            label = params.get("label", self.kind)
            raise UserError(
                f"metric {label}: the {what} is {width}x{height} px; {label} needs at least {n}x{n} px"
                f"{f' ({why})' if why else ''}; fix: score images of at least {n}x{n} px"
            )

    def _object(self):
        import importlib

        return getattr(importlib.import_module("pytest_pstbench.metrics"), self.function)

    def make(self, params: dict, device: str = "cpu", weights=None) -> Callable[[Any, Any], float]:
        """The callable `(output, other) -> float` for one protocol entry."""
        if self.stateful:
            return self.instance(params, device, weights).distance
        obj, kw = self._object(), function_kwargs(params)
        return lambda a, b: obj(a, b, **kw)

    def instance(self, params: dict, device: str = "cpu", weights=None):
        """A stateful kind's object for one protocol entry (e.g. `LpipsMetric`: `distance(a, b)`, and
        the per-image halves `features(x)` / `distance_from_features(fa, fb)` that the metric engine
        shares between outputs scored against one reference). `weights`: the source of pretrained
        weights, handed to a kind that declares a `backbone` (metrics fetch nothing; the caller's source does)."""
        if not self.stateful:
            raise TypeError(f"metric kind {self.kind} is a function, not a class")
        if self.backbone is not None:
            return self._object()(params, device, weights=weights)
        return self._object()(params, device)


KINDS: dict[str, MetricKind] = {}


def register(
    kind: str,
    *,
    function: str,
    required: tuple[str, ...],
    higher_is_better: bool,
    reference: str,
    stateful: bool = False,
    backbone: Callable[[dict], str] | None = None,
    smallest: Callable[[dict], tuple[int, str]] | None = None,
):
    """Decorator for a kind's parameter check: registers the kind with its metadata."""

    def wrap(check: Callable[[str, dict], str | None]):
        KINDS[kind] = MetricKind(
            kind, function, required, higher_is_better, reference, check, stateful, backbone, smallest
        )
        return check

    return wrap


def get(kind: str) -> MetricKind:
    return KINDS[kind]


def pretrained_backbones(metrics: dict) -> list[str]:
    """The backbones whose pretrained weights a protocol's metric entries (name -> parameters) load, sorted:
    one per learned entry (`MetricKind.backbone`); none for a protocol of functions of the images alone."""
    learned = ((KINDS.get(p.get("kind")), p) for p in metrics.values())
    return sorted({k.backbone(p) for k, p in learned if k is not None and k.backbone is not None})


# ---- parameter checks (each returns the first rule broken, naming the key, or None) -----------------


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _channels_problem(where: str, params: dict) -> str | None:
    channels = params.get("channels", "rgb")
    if channels not in CHANNELS:
        return f"{where}.channels must be rgb or luma"
    weights = params.get("luma_weights")
    if channels == "luma":
        if not (isinstance(weights, list) and len(weights) == 3 and all(_is_number(w) for w in weights)):
            return f"{where}.luma_weights must be a list of 3 numbers [wr, wg, wb] when channels is luma (e.g. BT.601 [0.299, 0.587, 0.114])"
    elif weights is not None:
        return f"{where}.luma_weights is only used with channels: luma; remove it or set channels: luma"
    return None


def _positive(where: str, params: dict, *keys: str) -> str | None:
    for k in keys:
        if k in params and not (_is_number(params[k]) and params[k] > 0):
            return f"{where}.{k} must be a finite number > 0 (got {params[k]!r})"
    return None


def _boolean(where: str, params: dict, *keys: str) -> str | None:
    for k in keys:
        if k in params and not isinstance(params[k], bool):
            return f"{where}.{k} must be true or false (got {params[k]!r})"
    return None


def _one_of(where: str, params: dict, key: str, allowed: tuple, default: Any) -> str | None:
    value = params.get(key, default)
    if value not in allowed:
        return f"{where}.{key} must be {' or '.join(map(str, allowed))} (got {value!r})"
    return None


@register(
    "psnr",
    function="PsnrMetric",
    required=("data_range", "cap_db"),
    higher_is_better=True,
    reference="skimage.metrics.peak_signal_noise_ratio; by hand for luma and the cap",
    stateful=True,
)
def _check_psnr(where: str, params: dict) -> str | None:
    return _positive(where, params, "data_range", "cap_db") or _channels_problem(where, params)


def _ssim_smallest(params: dict) -> tuple[int, str]:
    w = ssim_window(params.get("gaussian_weights", True), params.get("sigma", 1.5), params.get("win_size", 7))
    return w, f"its {w}x{w} window"


def _lpips_smallest(params: dict) -> tuple[int, str]:
    if params.get("resize") is not None:  # both images are resized to [W, H] first
        return 1, ""
    net = params.get("net", "alex")
    return LPIPS_MIN_SIDE[net], f"net {net}"


@register(
    "ssim",
    function="SsimMetric",
    required=SSIM_REQUIRED,
    higher_is_better=True,
    reference="skimage.metrics.structural_similarity; a loop of MATLAB's ssim.m downsampling",
    stateful=True,
    smallest=_ssim_smallest,
)
def _check_ssim(where: str, params: dict) -> str | None:
    if "sigma" in params and _is_number(params["sigma"]) and params["sigma"] > MAX_SIGMA:
        return f"{where}.sigma must be a finite number > 0 and <= {MAX_SIGMA:g} (got {params['sigma']!r})"
    problem = (
        _positive(where, params, "data_range", "sigma")
        or _boolean(where, params, "gaussian_weights", "use_sample_covariance")
        or _one_of(where, params, "channel_pooling", ("mean",), "mean")
    )
    if problem:
        return problem
    if "win_size" in params:
        w = params["win_size"]
        if not (_is_int(w) and 3 <= w <= MAX_WIN_SIZE and w % 2 == 1):
            return f"{where}.win_size must be an odd integer of at least 3 and at most {MAX_WIN_SIZE} (got {w!r})"
    if params.get("downsample", "none") not in SSIM_DOWNSAMPLE:
        return f"{where}.downsample must be none or wang"
    return _channels_problem(where, params)


@register(
    "ciede2000",
    function="DeltaE00Metric",
    required=("rgb_to_xyz", "kL", "kC", "kH"),
    higher_is_better=False,
    reference="skimage.color.deltaE_ciede2000 / deltaE_cie76 on the protocol's CIELAB",
    stateful=True,
)
def _check_delta_e(where: str, params: dict) -> str | None:
    problem = _positive(where, params, "kL", "kC", "kH")
    if problem:
        return problem
    m = params.get("rgb_to_xyz")
    if not (
        isinstance(m, list)
        and len(m) == 3
        and all(isinstance(r, list) and len(r) == 3 and all(_is_number(v) for v in r) for r in m)
    ):
        return f"{where}.rgb_to_xyz must be a 3x3 matrix of numbers (three rows of three)"
    problem = _one_of(where, params, "transfer", ("srgb",), "srgb") or _one_of(
        where, params, "pooling", ("mean",), "mean"
    )
    if problem:
        return problem
    if params.get("formula", "ciede2000") not in DELTA_E_FORMULAS:
        return f"{where}.formula must be ciede2000 or cie76"
    white = params.get("white_point")
    if white is not None and not (
        isinstance(white, list) and len(white) == 3 and all(_is_number(v) and v > 0 for v in white)
    ):
        return f"{where}.white_point must be a list of 3 positive numbers [Xn, Yn, Zn] (or absent: the row sums of rgb_to_xyz)"
    return None


@register(
    "hist_corr",
    function="HistCorrMetric",
    required=("bins", "constant_both", "constant_one"),
    higher_is_better=True,
    reference="numpy.histogram + numpy.corrcoef per channel",
    stateful=True,
)
def _check_hist_corr(where: str, params: dict) -> str | None:
    if "bins" in params and not (_is_int(params["bins"]) and 1 <= params["bins"] <= MAX_BINS):
        return f"{where}.bins must be a positive integer of at most {MAX_BINS} (got {params['bins']!r})"
    for k in ("constant_both", "constant_one"):
        if k in params and not (_is_number(params[k]) and -1 <= params[k] <= 1):
            return f"{where}.{k} must be a finite number >= -1 and <= 1 (got {params[k]!r})"
    return _one_of(where, params, "channel_pooling", ("mean",), "mean")


@register(
    "lpips",
    function="LpipsMetric",
    required=("package_version", "net", "version"),
    higher_is_better=False,
    reference="lpips.LPIPS forward (lpips 0.1.4) and the reference distances of its repository",
    stateful=True,
    backbone=lambda params: LPIPS_BACKBONES[params.get("net", "alex")],
    smallest=_lpips_smallest,
)
def _check_lpips(where: str, params: dict) -> str | None:
    if "package_version" in params and not isinstance(params["package_version"], str):
        return f'{where}.package_version must be a version string in quotes (e.g. "0.1.4")'
    if "net" in params and params["net"] not in LPIPS_NETS:
        return f"{where}.net must be one of {', '.join(LPIPS_NETS)}"
    if "version" in params and str(params["version"]) not in LPIPS_VERSIONS:
        return f'{where}.version must be "0.1" or "0.0"'
    scale = params.get("input_scale", [-1.0, 1.0])
    if not (
        isinstance(scale, list)
        and len(scale) == 2
        and all(_is_number(v) for v in scale)
        and tuple(float(v) for v in scale) in LPIPS_INPUT_SCALES
    ):
        return f"{where}.input_scale must be [-1.0, 1.0] or [0.0, 1.0]"
    resize = params.get("resize")
    if resize is not None:
        if not (
            isinstance(resize, list) and len(resize) == 2 and all(_is_int(v) and 0 < v <= MAX_SIDE for v in resize)
        ):
            return f"{where}.resize must be null or [W, H] (two positive integers of at most {MAX_SIDE})"
        from pytest_pstbench.core.files.images import MAX_PIXELS

        if resize[0] * resize[1] > MAX_PIXELS:
            return f"{where}.resize [{resize[0]}, {resize[1]}] is over the {MAX_PIXELS} pixels the kit scores"
        if params.get("resize_filter") not in RESIZE_FILTERS:
            return f"{where}.resize_filter must be one of {', '.join(RESIZE_FILTERS)} when resize is set"
    elif "resize_filter" in params and params["resize_filter"] is not None:
        return f"{where}.resize_filter is only used with resize: [W, H]; remove it or set resize"
    return None


def entry_problem(name: str, params: dict) -> str | None:
    """The first rule a protocol metric entry breaks (kind, required parameters, direction, optional
    parameters), as text naming the key, or None. Absent optional keys take their defaults."""
    where = f"metrics.{name}"
    kind = KINDS.get(params.get("kind"))
    if kind is None:
        return f"{where}.kind '{params.get('kind')}' is not one of {', '.join(KINDS)}"
    for key in kind.required:
        if key not in params:
            return f"{where} lacks '{key}' (needed by a metric of kind {kind.kind})"
    problem = kind.check(where, params)
    if problem:
        return problem
    if isinstance(params.get("higher_is_better"), bool) and params["higher_is_better"] != kind.higher_is_better:
        word = "higher" if kind.higher_is_better else "lower"
        return (
            f"{where}.higher_is_better is {str(params['higher_is_better']).lower()}, but for a metric of kind "
            f"{kind.kind} {word} is better (set it to {str(kind.higher_is_better).lower()})"
        )
    return None

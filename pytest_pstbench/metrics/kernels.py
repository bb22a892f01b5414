"""Fast metric kernels on the scoring device (torch: CPU threads or CUDA), within the protocol's tolerances
of the reference implementations (`fidelity.ssim`, `color.delta_e00`).

- SSIM (`kernels_ssim`): float64 banded GEMMs over the valid region; `ssim_reference_stats` once per
  reference, `ssim_from_stats` per output; `ssim_fast` = the two in one call.
- CIEDE2000 (`kernels_color`): `lab_of` once per image, `delta_e00_from_lab` per pair; `delta_e00_fast`
  = the two in one call. Pixels at the formula's hue branch points are recomputed exactly on the CPU.
- `SsimMetric`, `DeltaE00Metric`, `HistCorrMetric`: the registry's classes for `kind: ssim`,
  `kind: ciede2000` and `kind: hist_corr`, the
  kernels behind the metric engine's split interface (`prepare_other` once per reference,
  `value_prepared` per output), falling back to the reference functions for parameters the kernels do
  not cover (SSIM on luma or with Wang's downsampling; CIE76).
"""

from __future__ import annotations

import json

from pytest_pstbench.metrics.kernels_color import LabImage, delta_e00_from_lab, lab_of, sum64
from pytest_pstbench.metrics.kernels_ssim import ssim_from_stats, ssim_reference_stats
from pytest_pstbench.metrics.registry import SSIM_PARAMS

# ---- the protocol's SSIM and CIEDE2000 entries, as split metrics of the metric engine --------------------
# (`metrics/scorer.py`: the reference's half, `prepare_other`, is computed once per pair and kept for
# every output scored against it; `value_prepared` finishes one output)


def check_device(device: str) -> str:
    """'cpu', or 'cuda' / 'cuda:N' where CUDA is available (UserError otherwise)."""
    import torch

    from pytest_pstbench.core.errors import UserError

    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise UserError(
                f"device '{device}' was asked for, but CUDA is not available here (torch {torch.__version__}); "
                "use device 'cpu'."
            )
        return device
    raise UserError(f"unknown device '{device}'; use 'cpu' or 'cuda'.")


class _SplitMetric:
    """A protocol entry computed by a kernel when its parameters are the kernel's, else by the reference
    function (`fidelity` / `color`) with the same keyword arguments; both give the protocol's value."""

    reference_function: str  # name in pytest_pstbench.metrics

    def __init__(self, params: dict, device: str = "cpu"):
        from pytest_pstbench.metrics.registry import function_kwargs

        self.kwargs = function_kwargs(params)
        self.device = check_device(device)
        self.fast = self._kernel_applies(self.kwargs)
        self._key = (type(self).__name__, json.dumps(self.kwargs, sort_keys=True), self.device)

    def prepare_key(self) -> tuple:
        """Entries with equal keys prepare the same state from the same image."""
        return self._key

    @staticmethod
    def check_inputs(a, b) -> None:
        if a.shape != b.shape or a.ndim != 3 or a.shape[2] != 3:
            raise ValueError(f"expected two HxWx3 arrays of one shape, got {a.shape} and {b.shape}")

    def distance(self, output, other) -> float:
        self.check_inputs(output, other)
        prepare_output = getattr(self, "prepare_output", None)
        return self.value_prepared(prepare_output(output) if prepare_output else output, self.prepare_other(other))

    def _reference(self, output, other) -> float:
        import importlib

        fn = getattr(importlib.import_module("pytest_pstbench.metrics"), self.reference_function)
        return float(fn(output, other, **self.kwargs))


class SsimMetric(_SplitMetric):
    """The protocol's SSIM (`kind: ssim`) by the float64 banded-GEMM kernel (`kernels_ssim`, within 1e-15 of
    skimage): on the uint8 RGB planes, or on the float64 planes `fidelity.ssim` hands skimage (the luma
    plane; planes downsampled as Wang's ssim.m does); `fidelity.ssim` itself for images too small for the
    window (its one-line error)."""

    reference_function = "ssim"
    _KERNEL_KEYS = SSIM_PARAMS

    @staticmethod
    def _kernel_applies(kw: dict) -> bool:
        return kw.get("channels", "rgb") in ("rgb", "luma") and kw.get("downsample", "none") in ("none", "wang")

    def _kernel_kwargs(self) -> dict:
        return {k: v for k, v in self.kwargs.items() if k in self._KERNEL_KEYS}

    def _input(self, img):
        """What the kernel compares: the uint8 image (RGB, no downsampling) or `FloatPlanes`; None when the
        planes are smaller than the window (then `fidelity.ssim` reports it)."""
        kw = self.kwargs
        channels, downsample = kw.get("channels", "rgb"), kw.get("downsample", "none")
        if channels == "rgb" and downsample == "none":
            return img
        import numpy as np

        from pytest_pstbench.metrics import fidelity
        from pytest_pstbench.metrics.kernels_ssim import FloatPlanes
        from pytest_pstbench.metrics.registry import ssim_window

        planes = fidelity.channel_planes(img, channels, kw.get("luma_weights"))
        if downsample == "wang":
            f = fidelity.wang_factor(*img.shape[:2])
            planes = [fidelity.box_downsample(pl, f) for pl in planes]
        if min(planes[0].shape) < ssim_window(kw["gaussian_weights"], float(kw["sigma"]), kw.get("win_size", 7)):
            return None
        return FloatPlanes(np.stack(planes))

    def prepare_other(self, other):
        if not self.fast:
            return other
        planes = self._input(other)
        if planes is None:
            return ("reference-function", other)
        return ssim_reference_stats(planes, **self._kernel_kwargs(), device=self.device)

    def value_prepared(self, output, prepared) -> float:
        if not self.fast:
            return self._reference(output, prepared)
        if isinstance(prepared, tuple):
            return self._reference(output, prepared[1])
        return ssim_from_stats(self._input(output), prepared)


class DeltaE00Metric(_SplitMetric):
    """The protocol's colour difference (`kind: ciede2000`): CIEDE2000 (`kernels_color`, within 1e-13 of
    skimage's mean) or CIE76 (`formula: cie76`) from each image's CIELAB, computed once per image and
    conversion on the device (shared by both formulas)."""

    reference_function = "delta_e00"

    @staticmethod
    def _kernel_applies(kw: dict) -> bool:
        return (
            kw.get("formula", "ciede2000") in ("ciede2000", "cie76")
            and kw.get("transfer", "srgb") == "srgb"
            and kw.get("pooling", "mean") == "mean"
        )

    def prepare_key(self) -> tuple:
        # the CIELAB of an image depends on the conversion only (not on kL, kC, kH)
        kw = self.kwargs
        return (
            ("cielab", json.dumps([kw["rgb_to_xyz"], kw.get("white_point")]), self.device) if self.fast else self._key
        )

    def _lab(self, image):
        return lab_of(
            image, rgb_to_xyz=self.kwargs["rgb_to_xyz"], white_point=self.kwargs.get("white_point"), device=self.device
        )

    def prepare_other(self, other):
        return self._lab(other) if self.fast else other

    def prepare_output(self, output):
        return self._lab(output) if self.fast else output

    def value_prepared(self, output, prepared) -> float:
        if not self.fast:
            return self._reference(output, prepared)
        kw = self.kwargs
        if kw.get("formula", "ciede2000") == "cie76":  # the Euclidean distance in CIELAB, mean over pixels
            return cie76_from_lab(output, prepared)
        return delta_e00_from_lab(output, prepared, kL=kw["kL"], kC=kw["kC"], kH=kw["kH"])


def cie76_from_lab(lab_out: LabImage, lab_ref: LabImage) -> float:
    """Mean over pixels of the Euclidean distance between two `LabImage`s (CIE76)."""
    if lab_out.lab.shape != lab_ref.lab.shape:
        raise ValueError(f"shapes differ: {tuple(lab_out.lab.shape)} vs {tuple(lab_ref.lab.shape)}")
    d = lab_out.lab - lab_ref.lab
    return sum64(d.mul_(d).sum(dim=0).sqrt_()) / float(d.shape[1] * d.shape[2])


def _device_tensor(img, device):
    """A uint8 numpy image as a torch tensor on `device` (copied first when read-only)."""
    import numpy as np
    import torch

    a = np.ascontiguousarray(img)
    return torch.from_numpy(a if a.flags.writeable else a.copy()).to(device)


def channel_histograms_on(img, bins: int, device: str = "cpu"):
    """`color.channel_histograms` with the per-value counts taken on `device` (torch.bincount): the same
    integer counts, so the same float64 histograms."""
    import numpy as np
    import torch

    from pytest_pstbench.metrics.color import channel_histograms, check_bins, histograms_from_counts

    if not isinstance(img, np.ndarray) or img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        return channel_histograms(img, bins)  # its own error for a wrong input
    check_bins(bins)
    flat = _device_tensor(img, device).reshape(-1, 3)
    counts = torch.stack([torch.bincount(flat[:, c], minlength=256) for c in range(3)]).cpu().numpy()
    return histograms_from_counts(list(counts), bins)


class PsnrMetric(_SplitMetric):
    """The protocol's PSNR (`kind: psnr`, `fidelity.psnr`) with the MSE of 8-bit RGB pairs taken on the
    scoring device in integers (exact: the value of `fidelity.mse`, bit for bit); luma by `fidelity`."""

    reference_function = "psnr"

    @staticmethod
    def _kernel_applies(kw: dict) -> bool:
        return kw.get("channels", "rgb") == "rgb"

    def mse(self, output, other) -> float:
        import numpy as np

        from pytest_pstbench.metrics.fidelity import mse

        kw = self.kwargs
        if self.device == "cpu" or not self.fast or output.dtype != np.uint8 or other.dtype != np.uint8:
            return mse(output, other, channels=kw.get("channels", "rgb"), luma_weights=kw.get("luma_weights"))
        import torch

        self.check_inputs(output, other)
        d = _device_tensor(output, self.device).to(torch.int32) - _device_tensor(other, self.device).to(torch.int32)
        return float(int(d.mul_(d).sum(dtype=torch.int64).item()) / d.numel())

    def distance(self, output, other) -> float:
        from pytest_pstbench.metrics.fidelity import psnr_from_mse

        return psnr_from_mse(
            self.mse(output, other), data_range=self.kwargs["data_range"], cap_db=self.kwargs["cap_db"]
        )

    __call__ = distance


class HistCorrMetric(_SplitMetric):
    """The protocol's histogram correlation (`kind: hist_corr`, `color.hist_corr`): each image's channel
    histograms once (a reference's or style's for every output; an output's for every H-Corr metric)."""

    reference_function = "hist_corr"

    @staticmethod
    def check_inputs(a, b) -> None:  # histograms compare images of any sizes (e.g. the style image)
        for x in (a, b):
            if x.ndim != 3 or x.shape[2] != 3:
                raise ValueError(f"expected HxWx3 arrays, got {a.shape} and {b.shape}")

    @staticmethod
    def _kernel_applies(kw: dict) -> bool:
        return kw.get("channel_pooling", "mean") == "mean"

    def prepare_key(self) -> tuple:
        return ("histograms", int(self.kwargs["bins"])) if self.fast else self._key

    def prepare_other(self, other):
        return channel_histograms_on(other, self.kwargs["bins"], self.device) if self.fast else other

    prepare_output = prepare_other

    def value_prepared(self, output, prepared) -> float:
        if not self.fast:
            return self._reference(output, prepared)
        from pytest_pstbench.metrics.color import hist_corr_from

        return hist_corr_from(
            output, prepared, constant_both=self.kwargs["constant_both"], constant_one=self.kwargs["constant_one"]
        )

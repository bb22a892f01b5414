"""Old vs new metric kernels on N full-HD pairs: best-of-3 seconds per pair and the max abs difference.

    python benchmarks/bench_kernels.py [--pairs N] [--device cpu|cuda] [--repeat 3]

Pairs: scikit-image photographs resized to 1920x1080 with PIL (bicubic) as references, and a plausible
method output for each (per-channel gain and offset, 3x3 box blur, Gaussian noise). Old: `fidelity.ssim`
(skimage, float64 per channel) and `color.delta_e00` (`srgb_to_lab` + skimage `deltaE_ciede2000`). New:
`kernels_ssim.ssim_fast` / `kernels_color.delta_e00_fast` (one-shot), and the reuse path where the reference's part
(`ssim_reference_stats`, `lab_of`) is computed once and each further output costs only `ssim_from_stats` /
`lab_of` + `delta_e00_from_lab`. Timings on a shared machine are noisy: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "motorcycle_left")
MATRIX = [[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]]
SSIM_P = dict(data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False)
DE_P = dict(rgb_to_xyz=MATRIX, kL=1.0, kC=1.0, kH=1.0)


def pairs(n: int):
    import skimage.data
    from PIL import Image
    from scipy.ndimage import uniform_filter

    out = []
    for i in range(n):
        name = PHOTOS[i % len(PHOTOS)]
        a = skimage.data.stereo_motorcycle()[0] if name == "motorcycle_left" else getattr(skimage.data, name)()
        a = np.stack([a] * 3, -1) if a.ndim == 2 else a[..., :3]
        ref = np.asarray(Image.fromarray(a).resize((1920, 1080), Image.BICUBIC))
        rng = np.random.default_rng(i)
        x = ref.astype(np.float64) * rng.uniform(0.85, 1.1, 3) + rng.uniform(-12, 12, 3)
        x = uniform_filter(x, size=(3, 3, 1)) + rng.normal(0.0, 4.0, x.shape)
        out.append((np.clip(np.rint(x), 0, 255).astype(np.uint8), ref))
    return out


def best(fn, repeat: int):
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import torch

    from pytest_pstbench.metrics import color, fidelity, kernels_color, kernels_ssim

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    data = pairs(args.pairs)
    kernels_ssim.ssim_fast(*data[0], **SSIM_P, device=args.device)  # warm-up (allocator, CUDA context)
    kernels_color.delta_e00_fast(*data[0], **DE_P, device=args.device)
    rows = {k: [] for k in ("ssim_old", "ssim_new", "ssim_reuse", "de_old", "de_new", "de_reuse")}
    diff = {"ssim": 0.0, "de": 0.0}
    for out, ref in data:
        t, old = best(lambda: fidelity.ssim(out, ref, **SSIM_P), args.repeat)
        rows["ssim_old"].append(t)
        t, new = best(lambda: (kernels_ssim.ssim_fast(out, ref, **SSIM_P, device=args.device), sync())[0], args.repeat)
        rows["ssim_new"].append(t)
        stats = kernels_ssim.ssim_reference_stats(ref, **SSIM_P, device=args.device)
        t, reused = best(lambda: (kernels_ssim.ssim_from_stats(out, stats), sync())[0], args.repeat)
        rows["ssim_reuse"].append(t)
        assert reused == new
        diff["ssim"] = max(diff["ssim"], abs(new - old))

        t, old = best(lambda: color.delta_e00(out, ref, **DE_P), args.repeat)
        rows["de_old"].append(t)
        t, new = best(
            lambda: (kernels_color.delta_e00_fast(out, ref, **DE_P, device=args.device), sync())[0], args.repeat
        )
        rows["de_new"].append(t)
        lab_ref = kernels_color.lab_of(ref, rgb_to_xyz=MATRIX, device=args.device)

        def reuse():
            lab_out = kernels_color.lab_of(out, rgb_to_xyz=MATRIX, device=args.device)
            return kernels_color.delta_e00_from_lab(lab_out, lab_ref, kL=1.0, kC=1.0, kH=1.0)

        t, reused = best(reuse, args.repeat)
        rows["de_reuse"].append(t)
        assert reused == new
        diff["de"] = max(diff["de"], abs(new - old))

    mean = {k: float(np.mean(v)) for k, v in rows.items()}
    print(
        f"{args.pairs} full-HD pairs, device {args.device}, torch threads {torch.get_num_threads()}, best of {args.repeat}"
    )
    print(
        f"{'metric':10} {'old s/pair':>11} {'new s/pair':>11} {'reuse s/pair':>13} {'old/new':>8} {'max |new-old|':>14}"
    )
    for key, label in (("ssim", "SSIM"), ("de", "dE00")):
        o, n, r = mean[f"{key}_old"], mean[f"{key}_new"], mean[f"{key}_reuse"]
        print(f"{label:10} {o:11.3f} {n:11.3f} {r:13.3f} {o / n:8.1f} {diff[key]:14.2e}")


if __name__ == "__main__":
    main()

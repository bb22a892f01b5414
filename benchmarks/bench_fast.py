"""Fast-scoring benchmark: LPIPS alone, cold scoring, the previous engine's per-pair path, three methods.

    python benchmarks/bench_fast.py [--pairs N] [--device cpu|cuda] [-j N]

Builds N (default 4) full-HD 1920x1080 pairs from scikit-image photographs (resized with PIL bicubic,
as PNG files in a temporary track with a manifest): content = photo i, style = photo i+1, reference =
a deterministic tone change of the content, output = a deterministic colour shift of the content.
Then, in this one process, after all imports and after the LPIPS model is built (its build is timed
and shown on its own row), it times:

  (a) the LPIPS forward passes alone (`LpipsMetric.distance` on the decoded arrays, output vs reference);
  (b) the work of `pstbench score --no-cache`: a `RunSession(use_cache=False)` scoring every pair from
      its PNG files through the pipeline (`paired/planner.py: score_runs`: decode ahead in threads, checks,
      every protocol metric) and `finish()` writing the run files; interpreter start-up and imports are
      not included (they are done before the clock starts);
  (c) the previous engine's per-pair path, kept below as a COPY (`previous_engine_pair`) of the metric
      calls the engine made per pair when this file was written (PIL decode of 3 PNGs, PSNR, skimage SSIM
      in float64 per channel, LPIPS, skimage deltaE_ciede2000 on the protocol's CIELAB, numpy
      histograms), so later engine changes are measured against it and not against themselves;
  (d) three methods: three calls (one run each) vs one call scoring the three methods together
      (`pstbench score --outputs A B C`: each reference and style decoded once, its LPIPS features once);
  (e) `pstbench score` with its score cache (in a temporary directory, not the user's): cold, writing
      the entries, then the rerun that finds them (hashes the outputs, reads and checks the entries; in
      this one process the dataset files' hashes are remembered, as within one `pstbench score` call).

and, to show where the floor of cold scoring lies on this machine:

  (a') the engine's own LPIPS passes on the same arrays (`LpipsMetric.features` for both images, then
       `distance_from_features`: what (b) spends on LPIPS);
  (a'') decoding the PNG files each pair needs (output, reference, style) with the I/O rules, alone:
       work that (b) must do and (a) does not.

`--repeat K` times every step K times and keeps the fastest (this shared machine is noisy).
`--pytest` also times the pytest items path in fresh processes (imports included): serial, and
`-n 2` with pytest-xdist, and checks that their run files are byte-identical.

Timings on a shared machine are noisy: compare the ratios of one run, not seconds across runs.
Peak RSS is `resource.getrusage(RUSAGE_SELF).ru_maxrss` after each step (it only grows).
"""

from __future__ import annotations

import argparse
import math
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry", "retina")
SIZE = (1920, 1080)  # W, H


# ---- the previous engine's per-pair path (a COPY: do not import the engine's metric functions here) -------


def _prev_psnr(a: np.ndarray, b: np.ndarray, data_range: float, cap_db: float) -> float:
    diff = a.astype(np.float64) - b.astype(np.float64)
    err = float(np.mean(diff * diff))
    return float(cap_db) if err == 0.0 else float(min(cap_db, 10.0 * math.log10(data_range * data_range / err)))


def _prev_ssim(a: np.ndarray, b: np.ndarray, p: dict) -> float:
    from skimage.metrics import structural_similarity

    return float(
        np.mean(
            [
                structural_similarity(
                    a[..., c].astype(np.float64),
                    b[..., c].astype(np.float64),
                    data_range=p["data_range"],
                    gaussian_weights=p["gaussian_weights"],
                    sigma=p["sigma"],
                    use_sample_covariance=p["use_sample_covariance"],
                )
                for c in range(3)
            ]
        )
    )


def _prev_lab(rgb: np.ndarray, rgb_to_xyz) -> np.ndarray:
    m = np.asarray(rgb_to_xyz, dtype=np.float64)
    c = rgb.astype(np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    t = (lin @ m.T) / m.sum(axis=1)
    eps = (6.0 / 29.0) ** 3
    f = np.where(t > eps, np.cbrt(t), t / (3.0 * (6.0 / 29.0) ** 2) + 4.0 / 29.0)
    return np.stack(
        [116.0 * f[..., 1] - 16.0, 500.0 * (f[..., 0] - f[..., 1]), 200.0 * (f[..., 1] - f[..., 2])], axis=-1
    )


def _prev_delta_e00(a: np.ndarray, b: np.ndarray, p: dict) -> float:
    from skimage.color import deltaE_ciede2000

    d = deltaE_ciede2000(
        _prev_lab(a, p["rgb_to_xyz"]),
        _prev_lab(b, p["rgb_to_xyz"]),
        kL=p["kL"],
        kC=p["kC"],
        kH=p["kH"],
        channel_axis=-1,
    )
    return float(np.mean(d))


def _prev_hist_corr(a: np.ndarray, b: np.ndarray, p: dict) -> float:
    vals = []
    for c in range(3):
        h1 = np.bincount(a[..., c].astype(np.int64).ravel() * p["bins"] // 256, minlength=p["bins"]).astype(np.float64)
        h2 = np.bincount(b[..., c].astype(np.int64).ravel() * p["bins"] // 256, minlength=p["bins"]).astype(np.float64)
        d1, d2 = h1 - h1.mean(), h2 - h2.mean()
        s1, s2 = float(d1 @ d1), float(d2 @ d2)
        if s1 == 0.0 and s2 == 0.0:
            vals.append(float(p["constant_both"]))
        elif s1 == 0.0 or s2 == 0.0:
            vals.append(float(p["constant_one"]))
        else:
            vals.append(float(d1 @ d2 / math.sqrt(s1 * s2)))
    return float(np.mean(vals))


def previous_engine_pair(protocol, lpips_metric, output: Path, reference: Path, style: Path) -> dict[str, float]:
    """One pair as the previous engine scored it: decode 3 PNGs, then every protocol metric, one call each."""
    from PIL import Image

    out, ref, sty = (np.asarray(Image.open(f).convert("RGB")) for f in (output, reference, style))
    values = {}
    for name, p in protocol.metrics.items():
        other = ref if p["against"] == "reference" else sty
        kind = p["kind"]
        if kind == "psnr":
            values[name] = _prev_psnr(out, other, p["data_range"], p["cap_db"])
        elif kind == "ssim":
            values[name] = _prev_ssim(out, other, p)
        elif kind == "lpips":
            values[name] = lpips_metric.distance(out, other)
        elif kind == "ciede2000":
            values[name] = _prev_delta_e00(out, other, p)
        elif kind == "hist_corr":
            values[name] = _prev_hist_corr(out, other, p)
        else:
            raise SystemExit(f"bench_fast: the previous engine had no metric kind {kind!r}")
    return values


# ---- the pairs ------------------------------------------------------------------------------------------


def _photo(i: int) -> np.ndarray:
    import skimage.data
    from PIL import Image

    img = getattr(skimage.data, PHOTOS[i % len(PHOTOS)])()[..., :3]
    if i >= len(PHOTOS):  # more pairs than photographs: mirror so that the content differs
        img = img[:, ::-1]
    return np.asarray(Image.fromarray(np.ascontiguousarray(img)).resize(SIZE, Image.Resampling.BICUBIC))


def colour_shift(img: np.ndarray, k: int) -> np.ndarray:
    """A deterministic colour shift: per-channel gains and offsets (different for each k)."""
    gains = np.array([1.06, 0.97, 0.91]) + 0.01 * k
    offsets = np.array([-6.0, 4.0, 9.0]) - k
    return np.clip(np.rint(img.astype(np.float64) * gains + offsets), 0, 255).astype(np.uint8)


def tone(img: np.ndarray) -> np.ndarray:
    x = img.astype(np.float64) / 255.0
    return np.clip(np.rint(255.0 * x**0.9), 0, 255).astype(np.uint8)


def build_track(root: Path, n: int, methods: int = 3):
    """A track of n full-HD pairs under root, and `methods` output folders (method k = colour shift k)."""
    import yaml
    from PIL import Image

    from pytest_pstbench.paired.tracks import load_manifest

    (root / "track").mkdir(parents=True)
    outs = [root / f"out{k}" for k in range(methods)]
    for o in outs:
        o.mkdir()
    entries = []
    for i in range(n):
        pid = f"p{i:03d}"
        content, style = _photo(i), _photo(i + 1)
        for role, img in (("content", content), ("style", style), ("reference", tone(content))):
            Image.fromarray(img).save(root / "track" / f"{pid}_{role}.png")
        for k, o in enumerate(outs):
            Image.fromarray(colour_shift(content, k)).save(o / f"{pid}.png")
        entries.append(
            {
                "id": pid,
                "content": f"{pid}_content.png",
                "style": f"{pid}_style.png",
                "reference": f"{pid}_reference.png",
            }
        )
    (root / "track" / "track.yaml").write_text(yaml.safe_dump({"id": "bench-fast", "pairs": entries}))
    return load_manifest(root / "track" / "track.yaml"), outs


# ---- timing ---------------------------------------------------------------------------------------------


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0**2  # ru_maxrss is in KiB on Linux


def score_sessions(
    track,
    protocol,
    outputs_dirs: list[Path],
    results: Path,
    names: list[str],
    device: str,
    workers: int | None = None,
    cache_root: Path | None = None,
) -> None:
    """What `pstbench score --no-cache --outputs DIR [DIR ...]` does after its imports: one RunSession per
    folder, scored together through the pipeline (`paired/planner.py: score_runs`), run files written.
    With `cache_root`: `pstbench score` with its score cache, kept under `cache_root` (not the user's)."""
    from pytest_pstbench.paired.planner import score_runs
    from pytest_pstbench.paired.scorecache import ScoreCache
    from pytest_pstbench.paired.session import RunSession, RunSettings

    sessions = [
        RunSession(
            track,
            protocol,
            RunSettings(
                name=name,
                results_dir=results,
                device=device,
                outputs_dir=d,
                use_cache=cache_root is not None,
                command="bench_fast",
            ),
        )
        for d, name in zip(outputs_dirs, names)
    ]
    if cache_root is not None:
        for session in sessions:
            session.cache = ScoreCache(cache_root)
    outputs = [{p.id: d / f"{p.id}.png" for p in track.pairs} for d in outputs_dirs]
    for outcome in score_runs(sessions, outputs, workers=workers):
        if not outcome.complete:
            raise SystemExit("bench_fast: a run is not complete")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("-j", "--workers", type=int, default=None, help="decode-ahead threads (default: the CPU count)")
    ap.add_argument("--repeat", type=int, default=1, help="time each step this many times, keep the fastest")
    ap.add_argument("--pytest", action="store_true", help="also time the pytest items path, serial and -n 2")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.pairs < 1:
        raise SystemExit("bench_fast: --pairs and --repeat must be at least 1")

    def best(fn) -> float:
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    import skimage.color  # noqa: F401,E401
    import torch
    from PIL import Image

    import pytest_pstbench.paired.session  # noqa: F401 (imported before any clock starts)
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.data.weights.resolve import resolve_features
    from pytest_pstbench.metrics import lpips_metric

    protocol = load_protocol()
    lp_name = next(n for n, p in protocol.metrics.items() if p["kind"] == "lpips")
    rows: list[tuple[str, float | None, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        track, outs = build_track(tmp, args.pairs)
        print(
            f"built {args.pairs} pairs at {SIZE[0]}x{SIZE[1]} in {time.perf_counter() - t0:.1f} s "
            f"(torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device})",
            file=sys.stderr,
        )

        t0 = time.perf_counter()
        lp = lpips_metric.LpipsMetric(protocol.metrics[lp_name], args.device, weights=resolve_features)
        rows.append(("LPIPS model build (once per process; not in a-d)", time.perf_counter() - t0, peak_rss_gb()))

        arrays = [
            (
                np.asarray(Image.open(outs[0] / f"{p.id}.png").convert("RGB")),
                np.asarray(Image.open(p.reference).convert("RGB")),
            )
            for p in track.pairs
        ]
        lp.distance(*arrays[0])  # warm-up: the first pass at a new size sets up the convolutions (not timed)
        lp.distance_from_features(lp.features(arrays[0][0]), lp.features(arrays[0][1]))
        t_a = best(lambda: [lp.distance(o, r) for o, r in arrays])  # noqa: F821 (a false positive: `del arrays` below)
        rows.append(("(a) LPIPS forward passes alone (lpips 0.1.4's forward)", t_a, peak_rss_gb()))
        t_a1 = best(lambda: [lp.distance_from_features(lp.features(o), lp.features(r)) for o, r in arrays])  # noqa: F821 (a false positive: `del arrays` below)
        rows.append(("(a') the engine's LPIPS passes alone (features, distance)", t_a1, peak_rss_gb()))
        del arrays

        from pytest_pstbench.paired.imageio import load_dataset_image, load_image

        def decode_all():
            for p in track.pairs:
                load_image(outs[0] / f"{p.id}.png", protocol, role="output")
                load_dataset_image(p.reference, protocol, role="reference")
                load_dataset_image(p.style, protocol, role="style")

        t_dec = best(decode_all)
        rows.append(("(a'') decoding the 3 PNGs of each pair alone", t_dec, peak_rss_gb()))

        k = iter(range(10**6))
        t_b = best(
            lambda: score_sessions(
                track, protocol, [outs[0]], tmp / "results", [f"b{next(k)}"], args.device, args.workers
            )
        )
        rows.append(("(b) cold score --no-cache (RunSession work, no imports)", t_b, peak_rss_gb()))

        t_c = best(
            lambda: [
                previous_engine_pair(protocol, lp, outs[0] / f"{p.id}.png", p.reference, p.style) for p in track.pairs
            ]
        )
        rows.append(("(c) previous engine's per-pair path (copy)", t_c, peak_rss_gb()))

        t_d3 = best(
            lambda: [
                score_sessions(track, protocol, [o], tmp / "results", [f"d{next(k)}"], args.device, args.workers)
                for o in outs
            ]
        )
        rows.append(("(d) three methods as three calls", t_d3, peak_rss_gb()))
        t_d1 = best(
            lambda: score_sessions(
                track, protocol, outs, tmp / "results", [f"e{next(k)}" for _ in outs], args.device, args.workers
            )
        )
        rows.append(("(d) three methods in one call", t_d1, peak_rss_gb()))
        cache_root = tmp / "score-cache"
        t_e0 = best(
            lambda: (
                shutil.rmtree(cache_root, ignore_errors=True),
                score_sessions(
                    track,
                    protocol,
                    [outs[0]],
                    tmp / "results",
                    [f"c{next(k)}"],
                    args.device,
                    args.workers,
                    cache_root=cache_root,
                ),
            )
        )
        rows.append(("(e) cold score with the score cache (entries written)", t_e0, peak_rss_gb()))
        t_e = best(
            lambda: score_sessions(
                track,
                protocol,
                [outs[0]],
                tmp / "results",
                [f"c{next(k)}"],
                args.device,
                args.workers,
                cache_root=cache_root,
            )
        )
        rows.append(("(e) rerun from the score cache", t_e, peak_rss_gb()))
        pytest_rows = time_pytest(tmp, track, outs[0], args.repeat) if args.pytest else []

    n = args.pairs
    width = max(len(r[0]) for r in rows)
    print(f"{'step':<{width}}  {'seconds':>8}  {'s/pair':>7}  {'peak RSS GB':>11}")
    for name, secs, rss in rows:
        per = f"{secs / n:7.2f}" if name.startswith("(") else " " * 7
        print(f"{name:<{width}}  {secs:8.2f}  {per}  {rss:11.2f}")
    print(f"ratio (b)/(a) cold score / LPIPS alone:       {t_b / t_a:5.2f}   (target <= 1.3)")
    print(
        f"  floor on this machine, ((a') + (a''))/(a):   {(t_a1 + t_dec) / t_a:5.2f}   (LPIPS and decoding, nothing else)"
    )
    print(f"  the other metrics and checks, ((b) - (a') - (a''))/(a): {(t_b - t_a1 - t_dec) / t_a:5.2f}")
    print(f"ratio (c)/(b) previous engine / cold score:   {t_c / t_b:5.2f}   (target >= 2)")
    print(f"ratio (d) three calls / one call (b):         {t_d3 / t_b:5.2f}")
    print(f"ratio (d) one call for three / one method:    {t_d1 / t_b:5.2f}   (target <= 2.2)")
    print(f"ratio (e) cached rerun / cold with cache:      {t_e / t_e0:5.3f}   (target <= 0.05)")
    print(f"peak RSS: {peak_rss_gb():.2f} GB (target <= 3 GB)")
    for line in pytest_rows:
        print(line)


def time_pytest(tmp: Path, track, outputs: Path, repeat: int) -> list[str]:
    """pytest items path in fresh processes (imports included): serial and `-n 2`; the run files compared."""
    import os
    import subprocess

    manifest = tmp / "track" / "track.yaml"
    times = {}
    for label, extra in (("serial", []), ("-n 2", ["-n", "2"])):
        best_t = None
        for r in range(repeat):
            results = tmp / f"pytest-{label.replace(' ', '')}-{r}"
            cmd = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--pstbench-track={manifest}",
                f"--pstbench-outputs={outputs}",
                "--pstbench-no-cache",
                f"--pstbench-results={results}",
                *extra,
            ]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=dict(os.environ))
            t = time.perf_counter() - t0
            if proc.returncode != 0:
                raise SystemExit(f"bench_fast: pytest failed ({label}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
            best_t = t if best_t is None else min(best_t, t)
            run_dir = results / track.id / outputs.name
            times.setdefault(label + " files", {f: (run_dir / f).read_bytes() for f in ("metrics.csv", "summary.json")})
        times[label] = best_t
    same = times["serial files"] == times["-n 2 files"]
    return [
        f"pytest items, fresh process (imports included): serial {times['serial']:.2f} s, "
        f"-n 2 {times['-n 2']:.2f} s ({times['-n 2'] / times['serial']:.2f}x serial); "
        f"run files byte-identical: {same}"
    ]


if __name__ == "__main__":
    main()

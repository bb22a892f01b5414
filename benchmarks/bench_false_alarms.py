"""The paired gate's false-alarm rate on no-op changes (issue #46; CodSpeed publishes its gate's: a 2% gate
fires on 45% of no-op changes).

    python benchmarks/bench_false_alarms.py

Two tracks: the demo track (`pstbench demo`'s, 10 pairs) and a local synthetic track of 30 pairs (scikit-image
photographs, 256x192, reference = a tone curve of the content); on each, the outputs of three reference
baselines (`pstbench baseline reinhard mkl histmatch`). Each method's outputs are scored (`pstbench score
--no-cache`, torch.set_num_threads(1)) as the baseline run, then again after a no-op change:

  rerun       the same outputs scored again (same thread count)
  threads     the same outputs scored with torch.set_num_threads(2)
  png         each output decoded and re-encoded as PNG (Pillow, compress_level 9: other bytes, same pixels)
  jpeg95      for contrast, not a no-op: each output through JPEG quality 95 and back to PNG

and the changed run goes through the pytest gate's own evaluation (paired/gate.py `evaluate_gate`, every ranked
metric, Holm, alpha of protocols/pstbench.yaml): "gate" counts the comparisons it fails (a metric significantly
worse), "compare" the comparisons in which `pstbench compare` reports any significant difference (better or
worse; the same comparison). Uses a temporary PSTBENCH_CACHE (the LPIPS weights and the demo track copied from
the user's cache when present). Prints one line per change and a line per comparison that fired.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import seeded_cache

METHODS = ("reinhard", "mkl", "histmatch")
PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry", "retina", "cat", "hubble_deep_field")
SIZE = (256, 192)
PAIRS = 30
CHANGES = ("rerun", "threads", "png", "jpeg95")


def say(text: str) -> None:
    import sys

    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def cli(*args: str) -> None:
    from pytest_pstbench.cli import main

    say(f"pstbench {args[0]} {args[1]}")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(args))
    if code != 0:
        raise SystemExit(f"pstbench {' '.join(args)} exited {code}")


def synthetic_track(root: Path) -> Path:
    """PAIRS pairs: content = a seeded crop of a photograph (flipped for every second pair), style = the next
    one, reference = a tone curve of the content with a seeded colour cast."""
    import skimage.data
    import yaml
    from PIL import Image

    rng = np.random.default_rng(46)
    root.mkdir(parents=True)
    images = []
    for i in range(PAIRS + 1):
        photo = getattr(skimage.data, PHOTOS[i % len(PHOTOS)])()
        photo = np.stack([photo] * 3, axis=-1) if photo.ndim == 2 else photo[..., :3]
        h, w = photo.shape[:2]
        y, x = rng.integers(0, h // 4), rng.integers(0, w // 4)
        crop = photo[y : y + 3 * h // 4, x : x + 3 * w // 4]
        crop = crop[:, ::-1] if (i // len(PHOTOS)) % 2 else crop
        images.append(np.asarray(Image.fromarray(np.ascontiguousarray(crop)).resize(SIZE, Image.Resampling.BICUBIC)))
    entries = []
    for i in range(PAIRS):
        pid = f"s{i:02d}"
        content = images[i]
        gain = 1.0 + rng.normal(0, 0.05, 3)
        reference = np.clip(np.rint(255.0 * (content / 255.0) ** rng.uniform(0.8, 1.2) * gain), 0, 255).astype(np.uint8)
        for role, img in (("content", content), ("style", images[i + 1]), ("reference", reference)):
            Image.fromarray(img).save(root / f"{pid}_{role}.png")
        entries.append(
            {
                "id": pid,
                "content": f"{pid}_content.png",
                "style": f"{pid}_style.png",
                "reference": f"{pid}_reference.png",
            }
        )
    (root / "track.yaml").write_text(yaml.safe_dump({"id": "bench-noop", "pairs": entries}))
    return root / "track.yaml"


def reencode(src: Path, dest: Path, jpeg_quality: int | None) -> None:
    """Every <pair>.png of `src` into `dest`: a lossless PNG round trip, or through JPEG at `jpeg_quality`."""
    from PIL import Image

    dest.mkdir(parents=True)
    for f in sorted(src.glob("*.png")):
        with Image.open(f) as im:
            im = im.convert("RGB")
            if jpeg_quality is not None:
                buf = io.BytesIO()
                im.save(buf, format="JPEG", quality=jpeg_quality)
                im = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
            im.save(dest / f.name, format="PNG", compress_level=9)


def score(track: str, outputs: list[Path], results: Path, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    cli("score", "--track", track, "--outputs", *map(str, outputs), "--no-cache", "--results", str(results), "-j", "2")


def main() -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["PSTBENCH_CACHE"] = str(seeded_cache(tmp, "weights", "tracks/demo"))
        from pytest_pstbench.core.files.jsonfile import read_json
        from pytest_pstbench.core.protocol import load_protocol
        from pytest_pstbench.paired.compare import NO_DIFF
        from pytest_pstbench.paired.gate import evaluate_gate

        protocol = load_protocol()
        tracks = {"demo": "demo", "bench-noop": str(synthetic_track(tmp / "synthetic"))}
        fired = {c: {"gate": 0, "compare": 0, "of": 0} for c in CHANGES}
        notes = []
        for track_id, spec in tracks.items():
            outs = tmp / track_id / "outputs"
            cli("baseline", *METHODS, "--track", spec, "--out", str(outs))
            folders = [outs / m for m in METHODS]
            score(spec, folders, tmp / track_id / "base", 1)
            for change in CHANGES:
                if change in ("png", "jpeg95"):
                    changed = [tmp / track_id / change / m for m in METHODS]
                    for src, dest in zip(folders, changed):
                        reencode(src, dest, 95 if change == "jpeg95" else None)
                else:
                    changed = folders
                score(spec, changed, tmp / track_id / change, 2 if change == "threads" else 1)
                for m in METHODS:
                    base = tmp / track_id / "base" / track_id / m
                    run = tmp / track_id / change / track_id / m
                    say(f"gate {change} {track_id} {m}")
                    result = evaluate_gate(
                        run, read_json(run / "summary.json"), protocol, baselines=[base], metrics=None, mins={}, maxs={}
                    )
                    flagged = [r for r in result.comparison.rows if r.verdict != NO_DIFF]
                    fired[change]["of"] += 1
                    fired[change]["gate"] += result.failed
                    fired[change]["compare"] += bool(flagged)
                    if flagged or result.failed:
                        notes.append(
                            f"  {change:8s} {track_id:10s} {m:9s}: gate {'FAILED' if result.failed else 'passed'}; "
                            + ", ".join(
                                f"{r.metric} {r.verdict} (W/T/L {r.wins}/{r.ties}/{r.losses}, "
                                f"mean diff {r.mean_diff:+.3g})"
                                for r in flagged
                            )
                        )
    print(
        f"no-op changes on the demo track ({len(METHODS)} methods, 10 pairs) and a synthetic track ({PAIRS} pairs): "
        f"protocol {protocol.id}, alpha {protocol.comparison.alpha}, Holm over {len(protocol.ranked_metrics)} ranked metrics"
    )
    for change in CHANGES:
        f = fired[change]
        print(
            f"{change:8s}: gate fired on {f['gate']} of {f['of']} comparisons ({f['gate'] / f['of']:.0%}), "
            f"compare flagged a difference on {f['compare']} of {f['of']} ({f['compare'] / f['of']:.0%})"
        )
    for line in notes:
        print(line)
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

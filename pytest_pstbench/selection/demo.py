"""The download-free ``vab-demo`` selection track, generated locally from scikit-image's photographs.

Each task is 2-6 versions of one photograph (``pytest_pstbench.data.photos``, shared with the paired
``demo`` track) with graded execution defects (blur, noise, exposure, colour cast, JPEG compression,
crop); its labels come from a simulated panel of 10 voters passed through the protocol's consensus
filter, whose votes are kept in `votes.csv` (`votes:` in the manifest: the track's human reference row,
`selection.human`). Everything that determines the track is recorded in its manifest under ``generator``; it is
built in a temporary folder beside its place and renamed into place, and reused while its generator
and consensus thresholds are unchanged.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import loads
from pytest_pstbench.core.files.write import replace_stale_dir, staging_dir, write_atomic
from pytest_pstbench.core.paths import cache_dir
from pytest_pstbench.data.photos import load_photo, render_view

MANIFEST_NAME = "track.yaml"
VOTES_NAME = "votes.csv"  # the simulated panel's votes (task_id,k,judge,best,worst; candidates by file name)

DEMO_TRACK_ID = "vab-demo"
DEMO_GENERATOR_VERSION = 1

#: Everything that determines the generated track; recorded in its manifest under `generator`.
VAB_DEMO_PARAMS: dict = {
    "generator_version": DEMO_GENERATOR_VERSION,
    "seed": 20250311,
    "source": "skimage.data",
    "size": [192, 144],  # width, height of every candidate
    "n_tasks": 30,
    "k_cycle": [2, 3, 4, 5, 6],  # task j has k = k_cycle[j % 5]
    "mixed_every": 3,  # every third task mixes defect families; the others grade one family
    "severity_ladder": [0.0, 0.2, 0.4, 0.6, 0.8, 1.0],  # k distinct levels per task; 0 = clean
    "defects": {
        "blur": {"max_radius": 2.5},  # PIL GaussianBlur radius = max_radius * severity
        "noise": {"max_sigma": 0.12},  # Gaussian noise, sigma (of 1.0 full scale) = max_sigma * severity
        "exposure": {"max_stops": 1.5},  # x * 2^(+-max_stops * severity), direction drawn per candidate
        "colour_cast": {"max_gain": 0.3},  # channel gains, one of four casts drawn per candidate
        "jpeg": {"quality_clean": 92, "quality_worst": 6},  # JPEG round trip, quality interpolated
        "crop": {"min_keep": 0.55},  # keep 1 - (1 - min_keep) * severity of each side, resized back
    },
    # The panel: each voter sees quality -severity + N(0, noise) per candidate and votes its best and
    # worst; the votes pass through the protocol's consensus filter (thresholds for n = voters).
    "panel": {"voters": 10, "noise": 0.1},
    "max_attempts": 60,  # redraws of a task until the panel reaches consensus
    "png_compress_level": 3,
    # view -> photo (skimage.data), crop box [left, top, right, bottom] in source pixels, domain, topic
    "views": {
        "astronaut": {"photo": "astronaut", "box": [0, 0, 512, 384], "domain": "photography", "topic": "portrait"},
        "chelsea": {"photo": "chelsea", "box": [0, 0, 400, 300], "domain": "photography", "topic": "animal"},
        "coffee": {"photo": "coffee", "box": [0, 0, 533, 400], "domain": "photography", "topic": "still life"},
        "hubble": {"photo": "hubble_deep_field", "box": [0, 0, 640, 480], "domain": "science", "topic": "astronomy"},
        "rocket": {"photo": "rocket", "box": [35, 0, 604, 427], "domain": "photography", "topic": "vehicle"},
        "immunohistochemistry": {
            "photo": "immunohistochemistry",
            "box": [0, 0, 512, 384],
            "domain": "science",
            "topic": "microscopy",
        },
        "colorwheel": {"photo": "colorwheel", "box": [0, 46, 370, 324], "domain": "graphics", "topic": "colour chart"},
        "motorcycle": {
            "photo": "motorcycle_left",
            "box": [37, 0, 704, 500],
            "domain": "photography",
            "topic": "vehicle",
        },
        "retina": {"photo": "retina", "box": [0, 176, 1411, 1234], "domain": "science", "topic": "medical"},
        "astronaut_flag": {
            "photo": "astronaut",
            "box": [0, 128, 512, 512],
            "domain": "photography",
            "topic": "portrait",
        },
        "hubble_lower": {
            "photo": "hubble_deep_field",
            "box": [360, 392, 1000, 872],
            "domain": "science",
            "topic": "astronomy",
        },
        "logo": {"photo": "logo", "box": [0, 62, 500, 437], "domain": "graphics", "topic": "logo"},
    },
}


def demo_params(size: tuple[int, int] | None = None) -> dict:
    params = loads(json.dumps(VAB_DEMO_PARAMS))
    if size is not None:
        params["size"] = [int(size[0]), int(size[1])]
    return params


def apply_defect(img, family: str, severity: float, rng, params: dict):
    """One graded execution defect on a uint8 RGB image (severity 0 returns the image unchanged)."""
    import numpy as np
    from PIL import Image, ImageFilter

    if severity <= 0:
        return img.copy()
    p = params["defects"][family]
    if family == "blur":
        im = Image.fromarray(img, "RGB").filter(ImageFilter.GaussianBlur(p["max_radius"] * severity))
        return np.asarray(im, dtype=np.uint8)
    x = img.astype(np.float64) / 255.0
    if family == "noise":
        x = x + rng.normal(0.0, p["max_sigma"] * severity, size=x.shape)
    elif family == "exposure":
        direction = 1.0 if rng.random() < 0.5 else -1.0
        x = x * 2.0 ** (direction * p["max_stops"] * severity)
    elif family == "colour_cast":
        g = p["max_gain"] * severity
        casts = (
            [1 + g, 1, 1 - g],
            [1 - g, 1, 1 + g],
            [1 - g / 2, 1 + g / 2, 1 - g / 2],
            [1 + g / 2, 1 - g / 2, 1 + g / 2],
        )
        x = x * np.asarray(casts[int(rng.integers(0, 4))])
    elif family == "jpeg":
        q = int(round(p["quality_clean"] + (p["quality_worst"] - p["quality_clean"]) * severity))
        buf = io.BytesIO()
        Image.fromarray(img, "RGB").save(buf, format="JPEG", quality=q, subsampling=2)
        buf.seek(0)
        with Image.open(buf) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    elif family == "crop":
        h, w = img.shape[:2]
        keep = 1.0 - (1.0 - p["min_keep"]) * severity
        cw, ch = max(1, int(round(w * keep))), max(1, int(round(h * keep)))
        left = int(rng.integers(0, w - cw + 1))
        top = int(rng.integers(0, h - ch + 1))
        im = Image.fromarray(np.ascontiguousarray(img[top : top + ch, left : left + cw]), "RGB")
        return np.asarray(im.resize((w, h), Image.Resampling.BICUBIC), dtype=np.uint8)
    else:  # pragma: no cover - guarded by the params
        raise ValueError(f"unknown defect {family!r}")
    return np.clip(np.rint(x * 255.0), 0, 255).astype(np.uint8)


def simulate_panel(severities, voters: int, noise: float, rng) -> tuple[list[int], list[int]]:
    """Votes of a simulated panel: each voter perceives -severity + N(0, noise) and votes best/worst."""
    import numpy as np

    s = np.asarray(severities, dtype=np.float64)
    perceived = -s[None, :] + rng.normal(0.0, noise, size=(voters, s.size))
    return [int(i) for i in perceived.argmax(axis=1)], [int(i) for i in perceived.argmin(axis=1)]


def _generate_demo(dest: Path, params: dict, thresholds: dict, progress) -> None:
    say = progress or (lambda _m: None)
    views = _render_views(params)
    view_names = list(params["views"])
    digest = hashlib.sha256(b"pstbench-vab-demo\0" + json.dumps(params, sort_keys=True).encode())
    tasks_out = []
    votes_rows = ["task_id,k,judge,best,worst"]
    n_voters = params["panel"]["voters"]
    for j in range(params["n_tasks"]):
        k = params["k_cycle"][j % len(params["k_cycle"])]
        vname = view_names[j % len(view_names)]
        view = params["views"][vname]
        m = int(thresholds[k])
        attempt, sev, fams, best_votes, worst_votes, d = _draw_task(params, j, k, m)
        best = int(d.best)
        worst = int(d.worst) if k >= 3 else 1 - best
        tid = f"vd-{j + 1:02d}"
        for v, (b, w) in enumerate(zip(best_votes, worst_votes), 1):  # the accepted draw's votes
            votes_rows.append(f"{tid},{k},v{v:02d},c{b}.png,{f'c{w}.png' if k >= 3 else ''}")
        cands = _write_candidates(dest, tid, views[vname], (j, attempt), sev, fams, params, digest)
        say(f"vab-demo: {tid} ({vname}, k={k}, attempt {attempt})")
        tasks_out.append(
            {
                "id": tid,
                "domain": view["domain"],
                "topic": view["topic"],
                "view": vname,
                "candidates": cands,
                "best": best,
                "worst": worst,
                "panel": {
                    "voters": n_voters,
                    "threshold": m,
                    "best_votes": d.best_votes,
                    "worst_votes": d.worst_votes if k >= 3 else None,
                },
            }
        )
    _write_manifest(dest, params, thresholds, digest.hexdigest()[:12], tasks_out, votes_rows)


def _render_views(params: dict) -> dict:
    """view name -> its rendered image (each source photograph loaded once)."""
    photos: dict = {}
    views: dict = {}
    for name, spec in params["views"].items():
        if spec["photo"] not in photos:
            photos[spec["photo"]] = load_photo(spec["photo"])
        views[name] = render_view(photos[spec["photo"]], spec["box"], params["size"])
    return views


def _draw_task(params: dict, j: int, k: int, m: int):
    """Task `j`'s first draw (of `max_attempts`) on which the simulated panel reaches consensus at threshold
    `m`: (attempt, severities, defect families, best votes, worst votes, consensus decision)."""
    import numpy as np

    from pytest_pstbench.selection.consensus import decide

    families = list(params["defects"])
    ladder = params["severity_ladder"]
    n_voters = params["panel"]["voters"]
    for attempt in range(params["max_attempts"]):
        rng = np.random.default_rng([params["seed"], j, attempt])
        levels = sorted(rng.choice(len(ladder), size=k, replace=False).tolist())
        order = rng.permutation(k).tolist()  # dataset order: shuffled, never sorted by quality
        sev = [float(ladder[levels[i]]) for i in order]
        if (j + 1) % params["mixed_every"] == 0:
            fams = [families[int(rng.integers(0, len(families)))] for _ in range(k)]
        else:
            fams = [families[j % len(families)]] * k
        best_votes, worst_votes = simulate_panel(sev, n_voters, params["panel"]["noise"], rng)
        d = decide(k, [str(b) for b in best_votes], [str(w) for w in worst_votes] if k >= 3 else None, m)
        if d.accepted:
            return attempt, sev, fams, best_votes, worst_votes, d
    # unreachable: the parameters reach consensus within max_attempts
    raise RuntimeError(f"vab-demo: task {j} reached no consensus in {params['max_attempts']} attempts")


def _write_candidates(dest: Path, tid: str, view, draw: tuple[int, int], sev, fams, params: dict, digest) -> list:
    """Write task `tid`'s candidates (the view with each one's defect) as PNGs, add them to `digest`, and
    return their manifest entries; `draw` is (task index, accepted attempt), which seeds each candidate."""
    import numpy as np
    from PIL import Image

    j, attempt = draw
    (dest / tid).mkdir()
    cands = []
    for c in range(len(sev)):
        crng = np.random.default_rng([params["seed"], j, attempt, 1000 + c])
        img = apply_defect(view, fams[c], sev[c], crng, params)
        rel = f"{tid}/c{c}.png"
        im = Image.fromarray(np.ascontiguousarray(img), "RGB")
        im.save(dest / rel, format="PNG", optimize=False, compress_level=params["png_compress_level"])
        digest.update(f"\0{rel}\0{img.shape}\0".encode())
        digest.update(np.ascontiguousarray(img).tobytes())
        cands.append({"file": rel, "defect": fams[c] if sev[c] > 0 else "none", "severity": sev[c]})
    return cands


def _write_manifest(dest: Path, params: dict, thresholds: dict, revision: str, tasks_out: list, votes_rows: list):
    """Write the track's votes file and its manifest."""
    import yaml

    manifest = {
        "kind": "selection",
        "id": DEMO_TRACK_ID,
        "name": "pstbench vab-demo (scikit-image photographs with graded execution defects)",
        "revision": revision,
        "generator": params,
        "consensus_thresholds": {int(k): int(v) for k, v in thresholds.items()},
        "votes": VOTES_NAME,
        "tasks": tasks_out,
    }
    write_atomic(dest / VOTES_NAME, "\n".join(votes_rows) + "\n")
    text = yaml.safe_dump(manifest, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True)
    write_atomic(dest / MANIFEST_NAME, text)


def _read_generator(manifest: Path) -> dict | None:
    if not manifest.is_file():
        return None
    from pytest_pstbench.core.files.yamlfile import read_yaml

    try:
        data = read_yaml(manifest, "demo track manifest")
    except (UserError, OSError):
        return None
    if not isinstance(data, dict) or data.get("id") != DEMO_TRACK_ID:
        return None
    return {
        "generator": data.get("generator"),
        "thresholds": data.get("consensus_thresholds"),
        "votes": data.get("votes"),
    }


def build_vab_demo(
    root: Path | None = None, *, size: tuple[int, int] | None = None, protocol=None, progress=None
) -> Path:
    """Build (or reuse) the vab-demo track under `root` and return its manifest path.

    `root` defaults to `cache_dir()/tracks/vab-demo`. `size` (width, height) overrides the
    candidates' size (tests use small images). Labels use the consensus thresholds of `protocol`
    (default: the shipped `vab`). Built in a temporary folder beside `root` and renamed into place.
    """
    from pytest_pstbench.core.protocol import load_protocol

    protocol = protocol or load_protocol("vab")
    params = demo_params(size)
    thresholds = {int(k): int(v) for k, v in protocol.data["consensus"]["thresholds"].items()}
    if int(protocol.data["consensus"]["n_judges"]) != params["panel"]["voters"]:
        raise UserError(
            f"{protocol.path}: consensus.n_judges must be {params['panel']['voters']} for the vab-demo panel"
        )
    want = {"generator": params, "thresholds": thresholds, "votes": VOTES_NAME}  # a build without votes.csv is rebuilt
    root = Path(root) if root is not None else cache_dir() / "tracks" / DEMO_TRACK_ID
    root = root.expanduser().absolute()
    manifest = root / MANIFEST_NAME
    say = progress or (lambda _m: None)
    if _read_generator(manifest) == want:
        return manifest
    if root.exists() and not root.is_dir():
        raise UserError(f"{root}: the vab-demo track needs a directory here, but a file exists; remove it")
    if root.is_dir() and any(root.iterdir()) and _read_generator(manifest) is None:
        raise UserError(
            f"{root}: directory exists and is not a pstbench vab-demo track; remove it or set PSTBENCH_CACHE elsewhere"
        )
    with staging_dir(root, what="build the vab-demo track", fix="set PSTBENCH_CACHE to a writable directory") as build:
        say(f"vab-demo: building at {root}")
        _generate_demo(build, params, thresholds, progress)
        if replace_stale_dir(build, root, what="vab-demo track", current=lambda: _read_generator(manifest) == want):
            say(f"vab-demo: built at {root}")
    return manifest

"""The download-free ``demo`` paired track, generated locally from scikit-image's photographs.

Each pair is made from real photographs that scikit-image ships inside its wheel
(``skimage.data``; only images that load without a network download are used):

* ``content/<id>.png``   -- a photograph (cropped to a landscape frame, resized);
* ``reference/<id>.png`` -- the ground truth: that content under a seeded "photographic look";
* ``style/<id>.png``     -- a different image under the *same* look: the other photograph of a
  stereo pair, or another (at most partly overlapping) region of the content's photograph.

The style is taken from the same scene on purpose. With unrelated photographs (scikit-image ships
only a handful), a style's colours are dominated by its scene rather than by the look, and a global
colour transfer (Reinhard) then lands further from the reference than the unchanged content on
nearly every pair; with same-scene styles only the look differs, so a good colour transfer beats
the identity, which is what makes the track meaningful as a smoke test.

A look is a composition of white-balance gains, a small neutral-preserving channel mix, a
per-channel tone curve (midtone lift and S-curve, black lift / white roll-off), a saturation
change and split toning (one tint in the shadows, another in the highlights). The look
parameters are drawn with ``numpy.random.default_rng([seed, pair index])`` and rounded to four
decimals, so they are stable across NumPy versions.

Determinism: the pixel pipeline uses only IEEE-exact elementwise arithmetic (``+ - * /``, no
transcendental functions, no reductions, no BLAS), Pillow's fixed-point Lanczos resampling, and
``np.rint`` + ``np.clip`` before the cast to ``uint8``. PNGs are written by Pillow with fixed
options and no metadata chunks (no ICC profile, no text, no time). File bytes additionally depend
on the zlib that Pillow is built with (same Pillow build, same bytes); the pixels do not, and
the track's revision is a sha256 over the generator parameters and the pixels, not the file bytes. Two JPEG
sources (``rocket``, ``hubble_deep_field``) also depend on the JPEG decoder (libjpeg-turbo in
Pillow's wheels).

The build is atomic: everything is written into a temporary directory next to the target, then
``lock.json`` (sha256, size and modification time of every file), the manifest ``track.yaml`` last,
and the directory is renamed into place. On reuse every file is checked against the lock: by size
and modification time, and by its full sha256 when either differs; a file that differs (or a missing
lock) makes the track stale, and it is rebuilt. A target with a manifest is
therefore always complete; a concurrent builder that loses the race uses the winner's track.

The looks (their parameters and the pixel pipeline) are in paired/looks.py, the photographs in
data/photos.py; this module holds the generator's parameters and the atomic build with its lock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import loads, read_json
from pytest_pstbench.core.files.write import replace_stale_dir, staging_dir, write_atomic
from pytest_pstbench.core.files.yamlfile import read_yaml
from pytest_pstbench.core.paths import cache_dir
from pytest_pstbench.data.photos import load_photo, render_view
from pytest_pstbench.paired.looks import apply_look, draw_look

GENERATOR_VERSION = 1

#: Everything that determines the generated track. Recorded verbatim in ``track.yaml`` under
#: ``generator``; a change here (or in ``GENERATOR_VERSION``) makes an existing track stale.
DEMO_PARAMS: dict = {
    "generator_version": GENERATOR_VERSION,
    "seed": 20240611,
    "source": "skimage.data",
    "resample": "lanczos",
    # zlib level of the PNGs (3: ~3x faster to write than 6, ~6% more bytes)
    "png_compress_level": 3,
    # view name -> photo (skimage.data name), crop box [left, top, right, bottom] in source
    # pixels, output size [width, height] (Lanczos resize when it differs from the box).
    "views": {
        "astronaut": {"photo": "astronaut", "box": [0, 0, 512, 384], "size": [512, 384]},
        "astronaut_lower": {"photo": "astronaut", "box": [0, 100, 480, 420], "size": [480, 320]},
        "chelsea": {"photo": "chelsea", "box": [0, 0, 450, 300], "size": [480, 320]},
        "chelsea_right": {"photo": "chelsea", "box": [150, 75, 450, 300], "size": [300, 225]},
        "coffee": {"photo": "coffee", "box": [0, 0, 600, 400], "size": [600, 400]},
        "coffee_close": {"photo": "coffee", "box": [120, 80, 600, 400], "size": [480, 320]},
        "coffee_left": {"photo": "coffee", "box": [0, 0, 400, 300], "size": [400, 300]},
        "rocket_left": {"photo": "rocket", "box": [0, 0, 480, 320], "size": [480, 320]},
        "rocket_right": {"photo": "rocket", "box": [160, 107, 640, 427], "size": [480, 320]},
        "rocket_top_left": {"photo": "rocket", "box": [0, 0, 400, 300], "size": [400, 300]},
        "motorcycle_left": {"photo": "motorcycle_left", "box": [0, 3, 741, 497], "size": [600, 400]},
        "motorcycle_right": {"photo": "motorcycle_right", "box": [0, 3, 741, 497], "size": [600, 400]},
        "motorcycle_left_close": {"photo": "motorcycle_left", "box": [141, 100, 741, 500], "size": [480, 320]},
        "motorcycle_right_close": {"photo": "motorcycle_right", "box": [60, 80, 660, 480], "size": [600, 400]},
        "hubble_top_left": {"photo": "hubble_deep_field", "box": [0, 0, 640, 480], "size": [640, 480]},
        "hubble_top_right": {"photo": "hubble_deep_field", "box": [360, 0, 1000, 480], "size": [640, 480]},
        "hubble_bottom_left": {"photo": "hubble_deep_field", "box": [0, 392, 640, 872], "size": [640, 480]},
        "hubble_bottom_right": {"photo": "hubble_deep_field", "box": [360, 392, 1000, 872], "size": [640, 480]},
    },
    # [pair id, content view, style view]. The style is never the content's frame: it is the
    # other photograph of a stereo pair, or another (at most partly overlapping) region of the
    # content's photograph, so that scene colours are comparable and only the look differs.
    "pairs": [
        ["demo-01", "astronaut", "astronaut_lower"],
        ["demo-02", "chelsea", "chelsea_right"],
        ["demo-03", "coffee", "coffee_close"],
        ["demo-04", "rocket_left", "rocket_right"],
        ["demo-05", "motorcycle_left", "motorcycle_right_close"],
        ["demo-06", "motorcycle_right", "motorcycle_left_close"],
        ["demo-07", "hubble_top_left", "hubble_bottom_right"],
        ["demo-08", "coffee_close", "coffee_left"],
        ["demo-09", "rocket_right", "rocket_top_left"],
        ["demo-10", "hubble_bottom_left", "hubble_top_right"],
    ],
}

TRACK_ID = "demo"
TRACK_NAME = "pstbench demo (scikit-image photographs under seeded photographic looks)"
MANIFEST_NAME = "track.yaml"
KINDS = ("content", "style", "reference")

# --------------------------------------------------------------------------------------------
# Files


def _save_png(arr: np.ndarray, path: Path) -> None:
    """Write 8-bit RGB PNG with fixed options and no metadata chunks."""
    im = Image.fromarray(np.ascontiguousarray(arr, dtype=np.uint8), "RGB")
    im.info.clear()
    im.save(path, format="PNG", optimize=False, compress_level=DEMO_PARAMS["png_compress_level"])


def _params_json() -> str:
    return json.dumps(DEMO_PARAMS, sort_keys=True, separators=(",", ":"))


def _normalised_params() -> dict:
    """DEMO_PARAMS as it reads back from YAML (tuples -> lists), in declaration order."""
    return loads(json.dumps(DEMO_PARAMS))


def _manifest_ok(manifest: Path) -> bool:
    """True when ``manifest`` is a complete demo track made with the current parameters."""
    try:
        data = read_yaml(manifest, "demo track manifest")
    except (OSError, UserError):
        return False
    if not isinstance(data, dict) or data.get("id") != TRACK_ID:
        return False
    if data.get("generator") != _normalised_params():
        return False
    pairs = data.get("pairs")
    if not isinstance(pairs, list) or len(pairs) != len(DEMO_PARAMS["pairs"]):
        return False
    base = manifest.parent
    for entry in pairs:
        if not isinstance(entry, dict):
            return False
        for kind in KINDS:
            rel = entry.get(kind)
            if not isinstance(rel, str) or not (base / rel).is_file():
                return False
    return True


LOCK_NAME = "lock.json"


def _write_lock(root: Path, rels: list[str]) -> None:
    """`lock.json`: sha256, size and modification time (ns) of every file of the track."""
    from pytest_pstbench.core.files.write import dumps_json
    from pytest_pstbench.core.paths import file_sha256

    files = {}
    for rel in rels:
        st = (root / rel).stat()
        files[rel] = {"sha256": file_sha256(root / rel), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    write_atomic(root / LOCK_NAME, dumps_json({"format": 1, "files": files}))


def _lock_ok(root: Path, say: Callable[[str], None] = lambda _msg: None) -> bool:
    """Whether every file of the track matches `lock.json`: checked cheaply by size and modification
    time; a file whose size or time differs is hashed in full (and, when its sha256 still matches, its new
    time recorded). A missing or unreadable lock, or a file that differs, makes the track stale."""
    from pytest_pstbench.core.files.write import dumps_json
    from pytest_pstbench.core.paths import file_sha256

    try:
        lock = read_json(root / LOCK_NAME)
        files = lock["files"]
        if not isinstance(files, dict) or len(files) != len(DEMO_PARAMS["pairs"]) * len(KINDS):
            return False
        changed = False
        for rel, want in files.items():
            path = root / rel
            st = path.stat()
            if st.st_size == want["size"] and st.st_mtime_ns == want["mtime_ns"]:
                continue
            got = file_sha256(path)
            if got != want["sha256"]:
                say(
                    f"demo track: {path} differs from its lock (sha256 {got[:12]}, lock {want['sha256'][:12]}); rebuilding"
                )
                return False
            want["size"], want["mtime_ns"] = st.st_size, st.st_mtime_ns
            changed = True
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    if changed:
        try:
            write_atomic(root / LOCK_NAME, dumps_json(lock))
        except UserError:  # a read-only cache: the files were verified in full this time
            pass
    return True


def _is_demo_track_dir(path: Path) -> bool:
    """Whether ``path`` may be replaced: empty, or holds a manifest with ``id: demo``."""
    try:
        entries = list(path.iterdir())
    except FileNotFoundError:
        return True
    if not entries:
        return True
    try:
        data = read_yaml(path / MANIFEST_NAME, "demo track manifest")
    except (OSError, UserError):
        return False
    return isinstance(data, dict) and data.get("id") == TRACK_ID


def _generate(dest: Path, progress: Callable[[str], None] | None) -> None:
    """Write all files and the manifest into the (empty) directory ``dest``."""
    say = progress or (lambda _msg: None)
    views = DEMO_PARAMS["views"]
    needed = []
    for _pid, cview, sview in DEMO_PARAMS["pairs"]:
        for v in (cview, sview):
            if v not in needed:
                needed.append(v)
    say("demo track: loading scikit-image photographs")
    photos: dict[str, np.ndarray] = {}
    rendered: dict[str, np.ndarray] = {}
    for v in needed:
        spec = views[v]
        if spec["photo"] not in photos:
            photos[spec["photo"]] = load_photo(spec["photo"])
        rendered[v] = render_view(photos[spec["photo"]], spec["box"], spec["size"])

    for kind in KINDS:
        (dest / kind).mkdir()
    digest = hashlib.sha256()
    digest.update(b"pstbench-demo\0")
    digest.update(_params_json().encode("utf-8"))
    pairs_out = []
    for index, (pid, cview, sview) in enumerate(DEMO_PARAMS["pairs"]):
        say(f"demo track: {pid} ({cview} <- look of {sview})")
        look = draw_look(DEMO_PARAMS["seed"], index)
        images = {
            "content": rendered[cview],
            "style": apply_look(rendered[sview], look),
            "reference": apply_look(rendered[cview], look),
        }
        entry = {"id": pid}
        for kind in KINDS:
            rel = f"{kind}/{pid}.png"
            _save_png(images[kind], dest / rel)
            # The revision hashes decoded pixels, not PNG bytes (which depend on Pillow's zlib).
            pixels = np.ascontiguousarray(images[kind], dtype=np.uint8)
            digest.update(f"\0{rel}\0{pixels.shape}\0".encode())
            digest.update(pixels.tobytes())
            entry[kind] = rel
        pairs_out.append(entry)

    _write_lock(dest, [entry[kind] for entry in pairs_out for kind in KINDS])
    manifest = {
        "id": TRACK_ID,
        "name": TRACK_NAME,
        "revision": digest.hexdigest()[:12],
        "generator": _normalised_params(),
        "pairs": pairs_out,
    }
    text = yaml.safe_dump(manifest, sort_keys=False, default_flow_style=None, width=100)
    write_atomic(dest / MANIFEST_NAME, text)


def build_demo_track(root: Path | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """Build (or reuse) the demo track under ``root`` and return the path of its ``track.yaml``.

    ``root`` defaults to ``cache_dir() / "tracks" / "demo"``. An existing track whose manifest
    records the current generator parameters is reused as it is. ``progress`` is an optional
    callable receiving one-line status messages.
    """
    root = Path(root) if root is not None else cache_dir() / "tracks" / TRACK_ID
    root = root.expanduser().absolute()
    manifest = root / MANIFEST_NAME
    say = progress or (lambda _msg: None)

    if _manifest_ok(manifest) and _lock_ok(root, say):
        say(f"demo track: up to date at {root}")
        return manifest
    if root.exists() and not root.is_dir():
        raise UserError(
            f"{root}: the demo track needs a directory here, but a file exists; remove it or choose another location"
        )
    if root.is_dir() and not _is_demo_track_dir(root):
        raise UserError(
            f"{root}: directory exists and is not a pstbench demo track (no track.yaml with id: demo); "
            "remove it or choose another location for the demo track"
        )

    def concurrent_build_done() -> bool:
        # root exists: a concurrent builder may have won, or it is a stale track (replaced)
        if _manifest_ok(manifest) and _lock_ok(root):
            return True
        if not _is_demo_track_dir(root):
            raise UserError(
                f"{root}: directory appeared during the build and is not a pstbench demo track; "
                "remove it or choose another location"
            )
        return False

    with staging_dir(root, what="create the demo track", fix="set PSTBENCH_CACHE to a writable directory") as build:
        _generate(build, progress)
        if replace_stale_dir(build, root, what="demo track", current=concurrent_build_done):
            say(f"demo track: built at {root}")
        else:
            say(f"demo track: using the track a concurrent build finished at {root}")
    return manifest

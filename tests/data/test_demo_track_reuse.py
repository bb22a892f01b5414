"""The cached demo track is verified on reuse: an edited file is detected and the track rebuilt.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import json
import os


def test_an_edited_demo_track_is_detected_and_rebuilt(tmp_path):
    """Issue #11 case 06."""
    import hashlib

    import numpy as np
    from PIL import Image

    from pytest_pstbench.paired.demo import build_demo_track

    root = tmp_path / "demo"
    manifest = build_demo_track(root)
    target = root / "reference" / "demo-02.png"
    original = target.read_bytes()
    lock = json.loads((root / "lock.json").read_text())
    assert lock["files"]["reference/demo-02.png"]["sha256"] == hashlib.sha256(original).hexdigest()
    assert len(lock["files"]) == 30

    # an edit (new pixels): found by size/mtime, confirmed by the hash, and the track rebuilt
    arr = np.asarray(Image.open(target)).copy()
    arr[:8, :8] = 255
    Image.fromarray(arr).save(target)
    messages = []
    assert build_demo_track(root, progress=messages.append) == manifest
    assert any(
        m.startswith(f"demo track: {target} differs from its lock (sha256 ") and m.endswith("; rebuilding")
        for m in messages
    ), messages
    assert target.read_bytes() == original

    # a touch (new mtime, same bytes) is hashed once, accepted, its new mtime recorded, and not rebuilt
    os.utime(target, ns=(1, 1))
    messages.clear()
    assert build_demo_track(root, progress=messages.append) == manifest
    assert messages == [f"demo track: up to date at {root}"]
    assert json.loads((root / "lock.json").read_text())["files"]["reference/demo-02.png"]["mtime_ns"] == 1

    # a missing lock (a track built before locks existed) is rebuilt
    (root / "lock.json").unlink()
    messages.clear()
    build_demo_track(root, progress=messages.append)
    assert (root / "lock.json").is_file() and any("built at" in m for m in messages)

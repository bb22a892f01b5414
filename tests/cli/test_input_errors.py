"""Issue #32 items 22, 10 and 15: bad input that reached the kit as a traceback (or as numbers) is one
line naming what is wrong and the fix: a malformed HF_ENDPOINT, arrays too small for a metric, an output
PNG whose EXIF Orientation tag is malformed. Found by the third audit (#32)."""

from __future__ import annotations

import pytest

from pytest_pstbench.cli import main


# ---- item 22: HF_ENDPOINT -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "endpoint, rule",
    [
        ("http://[::1", "Invalid IPv6 URL"),
        ("http://127.0.0.1:70000", "Port out of range"),
        ("http://127.0.0.1:port", "Port"),
        ("localhost:8080", "expected http(s)://HOST[:PORT]"),
    ],
)
def test_malformed_hf_endpoint_is_one_line(tmp_path, monkeypatch, capsys, endpoint, rule):
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["data", "fetch", "pst50"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line or "Traceback" in line]
    assert len(err) == 1, err
    assert f"HF_ENDPOINT={endpoint!r}" in err[0] and rule in err[0] and "fix: set it to" in err[0]
    assert not (tmp_path / "data" / "pst50").exists()


# ---- item 10: arrays too small for a metric -------------------------------------------------------------
def _images(h: int, w: int):
    import numpy as np

    rng = np.random.default_rng(h * 1000 + w)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8), rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


SMALLEST = {"psnr": 1, "ssim": 11, "lpips": 31, "delta_e00": 1, "hcorr_gt": 1, "hcorr_style": 1}  # shipped protocol


@pytest.mark.parametrize("name", sorted(SMALLEST))
@pytest.mark.parametrize("shape", [(0, 0), (0, 5), (5, 0), "one less"])
def test_too_small_arrays_are_one_user_error(name, shape):
    """0x0 gave numbers (H-Corr 1.0) or ZeroDivisionError / ValueError / RuntimeError."""
    import pytest_pstbench as pst
    from pytest_pstbench.core.errors import UserError

    n = SMALLEST[name]
    if shape == "one less":
        if n == 1:
            pytest.skip("1x1 is the smallest image")
        shape = (n - 1, n + 20)
    a, b = _images(*shape)
    with pytest.raises(UserError) as info:
        pst.metric(name)(a, b)
    msg = str(info.value)
    assert "\n" not in msg and f"at least {n}x{n} px" in msg and f"{shape[1]}x{shape[0]} px" in msg and "fix:" in msg


@pytest.mark.parametrize("name", sorted(SMALLEST))
def test_the_smallest_arrays_give_a_number(name):
    import math

    import pytest_pstbench as pst

    n = SMALLEST[name]
    assert math.isfinite(pst.metric(name)(*_images(n, n + 3)))


@pytest.mark.filterwarnings("ignore::UserWarning")  # torchvision: pretrained=False is deprecated
@pytest.mark.parametrize("net, constructor", [("alex", "alexnet"), ("vgg", "vgg16"), ("squeeze", "squeezenet")])
def test_lpips_smallest_side_per_net_matches_the_lpips_backbones(net, constructor):
    """The registry's smallest side for each LPIPS net, against lpips's own backbone (random weights):
    that size runs, one pixel less fails."""
    torch = pytest.importorskip("torch")
    from lpips import pretrained_networks as pn

    from pytest_pstbench.metrics.registry import get

    n = get("lpips").min_side({"kind": "lpips", "net": net})
    model = getattr(pn, constructor)(requires_grad=False, pretrained=False).eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, n, n + 7))
        with pytest.raises(RuntimeError):
            model(torch.zeros(1, 3, n - 1, n + 7))


# ---- item 15: a malformed EXIF Orientation tag ----------------------------------------------------------------
def _exif_orientation(typ: int, count: int, value4: bytes) -> bytes:
    """A little-endian TIFF block with one IFD entry: Orientation (0x0112) of the given TIFF type."""
    import struct

    return (
        b"II*\x00"
        + struct.pack("<I", 8)
        + struct.pack("<H", 1)
        + struct.pack("<HHI", 0x0112, typ, count)
        + value4
        + struct.pack("<I", 0)
    )


BAD_ORIENTATIONS = {
    "text": (_exif_orientation(2, 4, b"abc\x00"), "'abc'"),
    "text digit": (_exif_orientation(2, 2, b"6\x00\x00\x00"), "'6'"),  # was recorded as orientation 6, never applied
    "out of range": (_exif_orientation(3, 1, b"\x2a\x00\x00\x00"), "42"),
    "negative": (_exif_orientation(8, 1, b"\xfd\xff\x00\x00"), "-3"),
}


@pytest.mark.parametrize("case", sorted(BAD_ORIENTATIONS))
def test_malformed_exif_orientation_is_that_files_one_line_error(tmp_path, monkeypatch, capsys, case):
    import json

    from helpers.protocols import protocol_without_lpips
    from helpers.tracks import make_outputs, make_track
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    manifest = make_track(tmp_path / "track", n=3)
    outputs = make_outputs(manifest, tmp_path / "outputs")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    exif, shown = BAD_ORIENTATIONS[case]
    bad = outputs / "p02.png"
    Image.open(bad).convert("RGB").save(bad, exif=exif)
    assert (
        main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                str(outputs),
                "--no-cache",
                "--protocol",
                str(proto),
                "--name",
                "m",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if str(bad) in line]
    assert len(lines) == 1 and f"EXIF Orientation tag is {shown}" in lines[0] and "fix:" in lines[0], err
    run = json.loads((tmp_path / "results/small/m/run.json").read_text())
    assert run["complete"] is False and run["n_scored"] == 2


def test_valid_exif_orientations_are_applied(tmp_path):
    """Orientation 6 (rotate 90 CW) in a short tag is applied and noted, as before."""
    import numpy as np
    from PIL import Image

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.imageio import load_dataset_image

    arr = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    path = tmp_path / "x.png"
    Image.fromarray(arr).save(path, exif=_exif_orientation(3, 1, b"\x06\x00\x00\x00"))
    got = load_dataset_image(path, load_protocol(), role="content")
    assert got.notes["exif_orientation"] == 6 and np.array_equal(got.array, np.rot90(arr, k=-1))


def test_a_judges_candidate_with_a_malformed_orientation_is_that_files_failure(tmp_path):
    """The selection kind's candidate reader applies the same check (core.files.images.exif_orientation)."""
    import numpy as np
    from PIL import Image

    from pytest_pstbench.selection.judges import JudgeFailure, load_rgb

    path = tmp_path / "c.png"
    Image.fromarray(np.zeros((4, 6, 3), np.uint8)).save(path, exif=BAD_ORIENTATIONS["text digit"][0])
    with pytest.raises(JudgeFailure, match=r"c.png \(candidate\): EXIF Orientation tag is '6'"):
        load_rgb(path)

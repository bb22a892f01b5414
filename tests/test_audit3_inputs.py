"""Issue #32 items 22, 10 and 15: bad input that reached the kit as a traceback (or as numbers) is one
line naming what is wrong and the fix: a malformed HF_ENDPOINT, arrays too small for a metric, an output
PNG whose EXIF Orientation tag is malformed."""
from __future__ import annotations

import pytest

from pytest_pstbench.cli import main


# ---- item 22: HF_ENDPOINT -------------------------------------------------------------------------------
@pytest.mark.parametrize("endpoint, rule", [
    ("http://[::1", "Invalid IPv6 URL"),
    ("http://127.0.0.1:70000", "Port out of range"),
    ("http://127.0.0.1:port", "Port"),
    ("localhost:8080", "expected http(s)://HOST[:PORT]"),
])
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

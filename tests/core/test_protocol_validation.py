"""A protocol file is validated completely when it loads: every value of the wrong type or out of
range is one line naming the file, the key, the rule and the fix (exit 2, nothing written), never
a traceback later and never a value silently read as something else."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol

BASE = yaml.safe_load(load_protocol().path.read_text(encoding="utf-8"))


def _set(data: dict, dotted: str, value) -> None:
    node = data
    keys = dotted.split(".")
    for k in keys[:-1]:
        node = node[k]
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value


class _Delete:
    def __repr__(self) -> str:  # a stable test id under xdist
        return "<deleted>"


_DELETE = _Delete()

CASES = [
    # (key, bad value, the part of the message that names the rule)
    ("aggregation.bootstrap.resamples", 0, "aggregation.bootstrap.resamples must be an integer >= 1"),
    ("aggregation.bootstrap.resamples", -5, "aggregation.bootstrap.resamples must be an integer >= 1"),
    ("aggregation.bootstrap.resamples", "many", "aggregation.bootstrap.resamples must be an integer >= 1"),
    (
        "aggregation.bootstrap.resamples",
        10**12,
        "aggregation.bootstrap.resamples must be an integer >= 1 and <= 10000000",
    ),
    ("aggregation.bootstrap.resamples", 100.0, "aggregation.bootstrap.resamples must be an integer"),
    ("aggregation.bootstrap.confidence", 1.5, "aggregation.bootstrap.confidence must be a finite number > 0 and < 1"),
    ("aggregation.bootstrap.confidence", 0, "aggregation.bootstrap.confidence must be a finite number > 0 and < 1"),
    ("aggregation.bootstrap.seed", -1, "aggregation.bootstrap.seed must be an integer >= 0"),
    ("aggregation.bootstrap.method", "bca", "aggregation.bootstrap.method must be percentile"),
    ("aggregation.statistic", "trimmed", "aggregation.statistic must be mean or median"),
    ("comparison.bootstrap.resamples", 0, "comparison.bootstrap.resamples must be an integer >= 1"),
    ("comparison.alpha", 1.0, "comparison.alpha must be a finite number > 0 and < 1"),
    ("comparison.zero_method", "drop", "comparison.zero_method must be one of wilcox, pratt, zsplit"),
    ("comparison.alternative", "bigger", "comparison.alternative must be one of two-sided, less, greater"),
    ("comparison.correction", "bonferroni", "comparison.correction must be holm"),
    ("comparison.tie_threshold.psnr", -0.1, "comparison.tie_threshold.psnr must be a finite number >= 0"),
    ("comparison.tie_threshold.psnrr", 0.1, "comparison.tie_threshold.psnrr: no such metric"),
    ("metrics.ssim.sigma", 0, "metrics.ssim.sigma must be a finite number > 0"),
    ("metrics.ssim.sigma", -1.5, "metrics.ssim.sigma must be a finite number > 0"),
    ("metrics.ssim.gaussian_weights", "yes", "metrics.ssim.gaussian_weights must be true or false"),
    ("metrics.ssim.data_range", 0, "metrics.ssim.data_range must be a finite number > 0"),
    ("metrics.psnr.data_range", ".inf", "metrics.psnr.data_range must be a finite number > 0"),
    ("metrics.psnr.cap_db", -5, "metrics.psnr.cap_db must be a finite number > 0"),
    ("metrics.psnr.cap_db", _DELETE, "metrics.psnr lacks 'cap_db'"),
    ("metrics.psnr.higher_is_better", "no", "metrics.psnr.higher_is_better must be true or false"),
    (
        "metrics.psnr.higher_is_better",
        False,
        "metrics.psnr.higher_is_better is false, but for a metric of kind psnr higher is better",
    ),
    (
        "metrics.lpips.higher_is_better",
        True,
        "metrics.lpips.higher_is_better is true, but for a metric of kind lpips lower is better",
    ),
    ("metrics.ssim.kind", "msssim", "metrics.ssim.kind 'msssim' is not one of psnr, ssim, ciede2000, hist_corr, lpips"),
    ("metrics.psnr.ranked", 1, "metrics.psnr.ranked must be true or false"),
    ("metrics.psnr.decimals", -1, "metrics.psnr.decimals must be an integer >= 0"),
    ("metrics.psnr.label", "", "metrics.psnr.label must be a non-empty string"),
    ("metrics.delta_e00.kL", 0, "metrics.delta_e00.kL must be a finite number > 0"),
    (
        "metrics.delta_e00.rgb_to_xyz",
        [[0.4, 0.3, 0.2], [0.2, 0.7], [0.0, 0.1, 0.9]],
        "metrics.delta_e00.rgb_to_xyz must be a 3x3 matrix",
    ),
    ("metrics.delta_e00.transfer", "bt709", "metrics.delta_e00.transfer must be srgb"),
    ("metrics.hcorr_gt.constant_both", 2, "metrics.hcorr_gt.constant_both must be a finite number >= -1 and <= 1"),
    ("metrics.lpips.package_version", 0.14, "metrics.lpips.package_version must be a version string"),
    ("io.format", _DELETE, "io lacks 'format'"),
    ("io.format", "JPEG", "io.format must be PNG"),
    ("io.mode", "L", "io.mode must be RGB"),
    ("io.exif_orientation", "true", "io.exif_orientation must be true or false"),
    ("io.icc.rendering_intent", "vivid", "io.icc.rendering_intent must be one of perceptual"),
    ("resolution.size", "content", "resolution.size must be reference"),
    ("resolution.allow_resize_filter", "cubic", "resolution.allow_resize_filter must be one of nearest"),
    (
        "resolution.evaluate",
        {"mode": "fixed", "width": 64, "height": 48, "filter": "sinc"},
        "resolution.evaluate.filter 'sinc' is not a PIL resampling filter",
    ),
    (
        "resolution.evaluate",
        {"mode": "short_side", "pixels": 0, "filter": "bicubic"},
        "resolution.evaluate.pixels must be an integer >= 1 and <= 65535",
    ),
    (
        "aggregation.per_metric",
        {"ssim": {"statistic": "pooled_mse"}},
        "aggregation.per_metric.ssim: pooled_mse applies only to a metric of kind psnr",
    ),
]


def _write(tmp_path: Path, key: str, value) -> Path:
    data = copy.deepcopy(BASE)
    if isinstance(value, str) and value == ".inf":
        value = float("inf")
    _set(data, key, value)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


@pytest.mark.parametrize("key,value,rule", CASES, ids=[f"{k}={v!r}"[:60] for k, v, _ in CASES])
def test_bad_value_is_one_line_naming_file_key_rule_and_fix(tmp_path, key, value, rule):
    path = _write(tmp_path, key, value)
    with pytest.raises(UserError) as err:
        load_protocol(path)
    text = str(err.value)
    assert text.startswith(f"{path}: invalid protocol: ")
    assert rule in text
    assert "\n" not in text and "fix:" in text


def test_the_shipped_protocols_load():
    for pid in ("pstbench", "vab"):
        assert load_protocol(pid).id == pid


@pytest.mark.parametrize("key,value", [("aggregation.bootstrap.resamples", 0), ("metrics.psnr.higher_is_better", "no")])
def test_score_with_a_bad_protocol_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys, key, value):
    monkeypatch.chdir(tmp_path)
    manifest = make_track(tmp_path / "track", n=2)
    outputs = make_outputs(manifest, tmp_path / "m")
    path = _write(tmp_path, key, value)
    assert main(["score", "--track", str(manifest), "--outputs", str(outputs), "--protocol", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and key in err and "Traceback" not in err
    assert not (tmp_path / "results").exists()


def test_a_new_metric_kind_is_one_registry_entry(tmp_path, monkeypatch):
    """Registering a kind (its check, required parameters, direction and function) is all it takes for
    a protocol to validate it and for PairScorer to compute it."""
    import numpy as np

    import pytest_pstbench.metrics as metrics
    from pytest_pstbench.metrics import registry
    from pytest_pstbench.metrics.scorer import PairScorer

    monkeypatch.setattr(registry, "KINDS", dict(registry.KINDS))

    def mae(a, b, *, scale):
        return float(np.mean(np.abs(a.astype(np.float64) - b.astype(np.float64)))) * scale

    monkeypatch.setattr(metrics, "mae", mae, raising=False)
    registry.register("mae", function="mae", required=("scale",), higher_is_better=False, reference="by hand")(
        lambda where, p: None if p["scale"] > 0 else f"{where}.scale must be > 0"
    )
    data = copy.deepcopy(BASE)
    data["metrics"] = {
        "mae": {
            "kind": "mae",
            "label": "MAE",
            "higher_is_better": False,
            "ranked": True,
            "against": "reference",
            "scale": 2.0,
        }
    }
    data["comparison"]["tie_threshold"] = {}
    path = tmp_path / "mae.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    proto = load_protocol(path)
    a = np.zeros((4, 4, 3), np.uint8)
    b = np.full((4, 4, 3), 3, np.uint8)
    assert PairScorer(proto).score(a, b, None) == {"mae": 6.0}
    data["metrics"]["mae"]["scale"] = -1.0
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(UserError, match="metrics.mae.scale must be > 0"):
        load_protocol(path)


def test_importing_the_protocol_and_the_registry_loads_no_numpy():
    import subprocess
    import sys

    code = (
        "import sys, pytest_pstbench.core.protocol as p; p.load_protocol(); "
        "print(sorted(m for m in ('numpy', 'torch', 'PIL', 'skimage', 'lpips') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_typed_sections_read_the_file_and_a_missing_comparison_is_one_line(tmp_path):
    proto = load_protocol()
    raw = BASE["comparison"]
    assert proto.comparison.alpha == raw["alpha"] and proto.comparison.zero_method == raw["zero_method"]
    assert proto.comparison.tie("psnr") == raw["tie_threshold"]["psnr"] and proto.comparison.tie("ssim") == 0.0
    assert proto.comparison.bootstrap.kwargs() == {k: raw["bootstrap"][k] for k in ("confidence", "resamples", "seed")}
    assert proto.aggregation.statistic_of("lpips") == BASE["aggregation"]["statistic"]
    data = copy.deepcopy(BASE)
    del data["comparison"]
    path = tmp_path / "nocmp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    loaded = load_protocol(path)  # a protocol may leave comparisons out ...
    with pytest.raises(UserError) as err:  # ... but then runs under it cannot be compared
        loaded.comparison
    assert str(err.value) == (
        f"{path.resolve()}: protocol pstbench has no comparison section, so runs under it cannot be "
        "compared; fix: add one (see the comparison section of the shipped protocols/pstbench.yaml)"
    )


def test_typed_io_and_resolution_sections_read_the_file(tmp_path):
    proto = load_protocol()
    io, res = BASE["io"], BASE["resolution"]
    assert (proto.io.format, proto.io.mode, proto.io.exif_orientation) == (
        io["format"],
        io["mode"],
        io["exif_orientation"],
    )
    assert (proto.io.icc_target, proto.io.rendering_intent) == (io["icc"]["target"], io["icc"]["rendering_intent"])
    assert proto.io.allowed_conversions == (io["allowed_conversions"] or {}) and proto.io.max_pixels is None
    assert proto.resolution.size == res["size"] and proto.resolution.allow_resize_filter == res["allow_resize_filter"]
    assert proto.resolution.evaluate_spec == {"mode": "full"}  # not in the file: full resolution
    data = copy.deepcopy(BASE)
    data["resolution"]["evaluate"] = {"mode": "short_side", "pixels": 32, "filter": "bicubic"}
    data["io"]["max_pixels"] = 5000
    path = tmp_path / "typed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    other = load_protocol(path)
    assert other.resolution.evaluate_spec == data["resolution"]["evaluate"]
    assert list(other.resolution.evaluate_spec) == ["mode", "pixels", "filter"]  # the file's order
    assert other.io.max_pixels == 5000


def test_allow_resize_under_a_protocol_without_a_resize_filter_is_refused_up_front(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    manifest = make_track(tmp_path / "track", n=2)
    outputs = make_outputs(manifest, tmp_path / "m")
    data = copy.deepcopy(BASE)
    del data["resolution"]["allow_resize_filter"]  # valid: the protocol then allows no resizing
    path = tmp_path / "noresize.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    assert (
        main(["score", "--track", str(manifest), "--outputs", str(outputs), "--protocol", str(path), "--allow-resize"])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err == (
        f"pstbench: error: --allow-resize: protocol pstbench ({path.resolve()}) names no "
        "resolution.allow_resize_filter, so it allows no resizing; fix: add one to the protocol "
        "(e.g. allow_resize_filter: bicubic), or drop --allow-resize"
    )
    assert not (tmp_path / "results").exists()

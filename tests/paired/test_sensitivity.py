"""`pstbench sensitivity`: variants as patches, values under variants against independent
computations, Kendall tau against scipy, swaps, unavailable metrics, reuse, CLI end to end."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.paired.sensitivity import SensitivityResult, parse_method_specs, resolve_methods
from pytest_pstbench.paired.sensitivity_analysis import analyse, run_sensitivity
from pytest_pstbench.paired.tracks import load_manifest
from pytest_pstbench.paired.variants import BASE_ID, flatten, load_variant, load_variants, shipped_variant_ids

REQUIRED = {
    "resolution-short512",
    "resolution-256",
    "ssim-skimage-defaults",
    "ssim-luma",
    "ssim-wang",
    "psnr-luma",
    "psnr-pooled",
    "lpips-vgg",
    "lpips-squeeze",
    "lpips-v00",
    "lpips-input01",
    "lpips-resize256",
    "deltae-skimage-white",
    "deltae-cie76",
    "hcorr-64bins",
    "aggregation-median",
}
BT601 = (0.299, 0.587, 0.114)


# ---- helpers ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A 4-pair track (64x48), two methods' outputs, and the protocol without LPIPS."""
    root = tmp_path_factory.mktemp("sens")
    manifest = make_track(root / "track", n=4)
    a = make_outputs(manifest, root / "half", strength=0.5)
    b = make_outputs(manifest, root / "most", strength=0.8)
    proto = protocol_without_lpips(root / "nolpips.yaml")
    return SimpleNamespace(
        root=root, manifest=manifest, methods={"half": str(a), "most": str(b), "identity": "identity"}, protocol=proto
    )


def engine(setup, variants, methods=None, protocol=None, out_dir=None):
    base = load_protocol(protocol or setup.protocol)
    track = load_manifest(setup.manifest)
    specs = parse_method_specs([f"{k}={v}" for k, v in (methods or setup.methods).items()])
    return run_sensitivity(track, base, load_variants(variants, base), resolve_methods(track, specs), out_dir=out_dir)


def write_variant(path: Path, vid: str, changes: dict) -> Path:
    path.write_text(yaml.safe_dump({"id": vid, "description": "test variant", "changes": changes}, sort_keys=False))
    return path


def images(setup, method: str):
    """Per pair: (output, reference, style) as read by Pillow, independent of the engine."""
    data = yaml.safe_load(setup.manifest.read_text())
    out = []
    for p in data["pairs"]:
        rd = lambda f: np.asarray(Image.open(setup.manifest.parent / f).convert("RGB"))  # noqa: E731
        o = (
            rd(p["content"])
            if method == "identity"
            else np.asarray(Image.open(Path(setup.methods[method]) / f"{p['id']}.png"))
        )
        out.append((o, rd(p["reference"]), rd(p["style"])))
    return out


# ---- variants as data -----------------------------------------------------------------------------------


def test_shipped_variants_cover_the_issue_and_change_only_what_they_say():
    base = load_protocol()
    assert REQUIRED <= set(shipped_variant_ids())
    base_flat = flatten(base.data)
    for v in load_variants(None, base)[1:]:
        patched_flat = flatten(v.protocol.data)
        differing = {
            k
            for k in set(base_flat) | set(patched_flat)
            if base_flat.get(k, "<absent>") != patched_flat.get(k, "<absent>")
        }
        # exactly the listed leaves differ, and every listed leaf is a real change
        assert differing == set(flatten(v.changes)), v.id
        assert v.description


def test_variant_contents_match_the_references_they_name():
    import inspect

    from skimage.color import colorconv
    from skimage.metrics import structural_similarity

    base = load_protocol()
    vs = {v.id: v for v in load_variants(None, base)}
    # skimage's default D65 / 2 degree white point, read from skimage itself
    assert vs["deltae-skimage-white"].protocol.metrics["delta_e00"]["white_point"] == pytest.approx(
        list(colorconv._illuminants["D65"]["2"])
    )
    # skimage's SSIM defaults: uniform window, sample covariance (win_size 7 is its documented default)
    sig = inspect.signature(structural_similarity).parameters
    ssim = vs["ssim-skimage-defaults"].protocol.metrics["ssim"]
    assert ssim["gaussian_weights"] == sig["gaussian_weights"].default is False
    assert ssim["use_sample_covariance"] is True and ssim["win_size"] == 7
    assert (
        vs["ssim-wang"].protocol.metrics["ssim"]["sigma"] == 1.5
        and vs["ssim-wang"].protocol.metrics["ssim"]["gaussian_weights"]
    )
    assert vs["lpips-squeeze"].protocol.metrics["lpips"]["net"] == "squeeze"
    assert vs["resolution-256"].protocol.data["resolution"]["evaluate"] == {
        "mode": "fixed",
        "width": 256,
        "height": 256,
        "filter": "bicubic",
    }


def test_patch_is_a_deep_merge_of_mappings(tmp_path):
    base = load_protocol()
    v = load_variant(
        write_variant(tmp_path / "v.yaml", "v", {"metrics": {"ssim": {"gaussian_weights": False, "win_size": 7}}}), base
    )
    assert v.protocol.metrics["ssim"]["sigma"] == base.metrics["ssim"]["sigma"]  # siblings kept
    assert v.protocol.metrics["ssim"]["gaussian_weights"] is False and v.protocol.metrics["ssim"]["win_size"] == 7
    assert v.protocol.metrics["psnr"] == base.metrics["psnr"]
    assert base.metrics["ssim"]["gaussian_weights"] is True  # the base is not modified


@pytest.mark.parametrize(
    "content, rule",
    [
        ({"id": "x", "description": "d", "changes": {"io": {"format": "JPEG"}}}, "may change only"),
        (
            {"id": "x", "description": "d", "changes": {"metrics": {"ssim": {"kind": "psnr"}}}},
            "may not change a metric's kind",
        ),
        ({"id": "x", "description": "d", "changes": {"metrics": {"nope": {"bins": 3}}}}, "no such metric"),
        (
            {"id": "x", "description": "d", "changes": {"resolution": {"evaluate": {"mode": "half"}}}},
            "resolution.evaluate.mode",
        ),
        (
            {"id": "x", "description": "d", "changes": {"aggregation": {"statistic": "trimmed"}}},
            "aggregation.statistic",
        ),
        (
            {
                "id": "x",
                "description": "d",
                "changes": {"aggregation": {"per_metric": {"ssim": {"statistic": "pooled_mse"}}}},
            },
            "kind psnr",
        ),
        ({"id": "protocol", "description": "d", "changes": {"aggregation": {"statistic": "median"}}}, "plain name"),
        ({"id": "x", "changes": {"aggregation": {"statistic": "median"}}}, "missing key 'description'"),
        ({"id": "x", "description": "d", "changes": {}, "extra": 1}, "unknown key"),
    ],
)
def test_bad_variant_files_are_one_line_user_errors(tmp_path, content, rule):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(content))
    with pytest.raises(UserError) as exc:
        load_variant(path, load_protocol())
    msg = str(exc.value)
    assert str(path) in msg and rule in msg and "\n" not in msg


# ---- values under variants ---------------------------------------------------------------------------------


def _hcorr64(a: np.ndarray, b: np.ndarray) -> float:
    rs = []
    for c in range(3):
        h1, _ = np.histogram(a[..., c], bins=64, range=(0, 256))
        h2, _ = np.histogram(b[..., c], bins=64, range=(0, 256))
        rs.append(np.corrcoef(h1, h2)[0, 1])
    return float(np.mean(rs))


def _lab(rgb: np.ndarray, matrix, white) -> np.ndarray:
    """sRGB (8-bit) -> CIELAB from the standards: IEC 61966-2-1 decoding, XYZ by `matrix`, CIE 1976 L*a*b*."""
    c = rgb / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    t = (lin @ np.asarray(matrix).T) / np.asarray(white)
    d = 6 / 29
    f = np.where(t > d**3, np.cbrt(t), t / (3 * d * d) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def _psnr_rgb(a, b) -> float:
    return 10 * math.log10(255**2 / np.mean((a.astype(float) - b.astype(float)) ** 2))


@pytest.fixture(scope="module")
def value_run(setup):
    return engine(
        setup,
        [
            "hcorr-64bins",
            "aggregation-median",
            "psnr-pooled",
            "psnr-luma",
            "ssim-skimage-defaults",
            "deltae-skimage-white",
            "deltae-cie76",
            "ssim-luma",
            "ssim-wang",
        ],
    )


def test_values_match_independent_computations(setup, value_run):
    from skimage.color import colorconv, deltaE_ciede2000
    from skimage.metrics import structural_similarity

    s = value_run.scores
    matrix = load_protocol().metrics["delta_e00"]["rgb_to_xyz"]
    for method in setup.methods:
        imgs = images(setup, method)
        assert s["hcorr-64bins"]["hcorr_gt"][method] == pytest.approx([_hcorr64(o, r) for o, r, _ in imgs], abs=1e-12)
        assert s["hcorr-64bins"]["hcorr_style"][method] == pytest.approx(
            [_hcorr64(o, st) for o, _, st in imgs], abs=1e-12
        )
        assert s[BASE_ID]["psnr"][method] == pytest.approx([_psnr_rgb(o, r) for o, r, _ in imgs], rel=1e-12)
        mse = [np.mean((o.astype(float) - r.astype(float)) ** 2) for o, r, _ in imgs]
        assert s["psnr-pooled"]["psnr"][method] == pytest.approx(mse, rel=1e-12)  # per-pair MSE
        y = lambda x: x.astype(float) @ np.array(BT601)  # noqa: E731
        assert s["psnr-luma"]["psnr"][method] == pytest.approx(
            [10 * math.log10(255**2 / np.mean((y(o) - y(r)) ** 2)) for o, r, _ in imgs], rel=1e-12
        )
        assert s["ssim-skimage-defaults"]["ssim"][method] == pytest.approx(
            [structural_similarity(o, r, channel_axis=-1, data_range=255) for o, r, _ in imgs], abs=1e-12
        )
        luma_ssim = [
            structural_similarity(
                y(o), y(r), data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
            )
            for o, r, _ in imgs
        ]
        assert s["ssim-luma"]["ssim"][method] == pytest.approx(luma_ssim, abs=1e-12)
        # Wang's downsampling factor is max(1, round(48/256)) = 1 here: the same as luma SSIM
        assert s["ssim-wang"]["ssim"][method] == pytest.approx(luma_ssim, abs=1e-12)
        # CIELAB by hand (CIE definition) with skimage's D65/2 white point, then skimage's CIEDE2000
        white = colorconv._illuminants["D65"]["2"]
        expected = [deltaE_ciede2000(_lab(o, matrix, white), _lab(r, matrix, white)).mean() for o, r, _ in imgs]
        assert s["deltae-skimage-white"]["delta_e00"][method] == pytest.approx(expected, rel=1e-12)
        if method != "identity":  # the white point matters more than the tolerance
            assert not np.allclose(s[BASE_ID]["delta_e00"][method], expected, rtol=1e-6, atol=0)
        rows = np.asarray(matrix).sum(axis=1)
        assert s["deltae-cie76"]["delta_e00"][method] == pytest.approx(
            [np.linalg.norm(_lab(o, matrix, rows) - _lab(r, matrix, rows), axis=-1).mean() for o, r, _ in imgs],
            rel=1e-12,
        )
        # metrics a variant does not change keep the protocol's values
        for vid, m in [
            ("hcorr-64bins", "psnr"),
            ("psnr-luma", "ssim"),
            ("deltae-cie76", "hcorr_gt"),
            ("ssim-wang", "delta_e00"),
        ]:
            np.testing.assert_array_equal(s[vid][m][method], s[BASE_ID][m][method])


def test_aggregates_median_and_pooled_psnr_by_hand(setup, value_run):
    a = value_run.analysis["aggregates"]
    for method in setup.methods:
        imgs = images(setup, method)
        psnrs = [_psnr_rgb(o, r) for o, r, _ in imgs]
        mse = [np.mean((o.astype(float) - r.astype(float)) ** 2) for o, r, _ in imgs]
        assert a[BASE_ID]["psnr"][method] == pytest.approx(np.mean(psnrs), rel=1e-12)
        assert a["aggregation-median"]["psnr"][method] == pytest.approx(np.median(psnrs), rel=1e-12)
        assert a["psnr-pooled"]["psnr"][method] == pytest.approx(10 * math.log10(255**2 / np.mean(mse)), rel=1e-12)
    entry = next(v for v in value_run.analysis["variants"] if v["id"] == "psnr-pooled")
    assert entry["statistic"]["psnr"] == "pooled_mse" and "MSE" in entry["per_pair_values"]["psnr"]


@pytest.mark.parametrize(
    "evaluate, size_of",
    [
        ({"mode": "fixed", "width": 40, "height": 40, "filter": "bicubic"}, lambda w, h: (40, 40)),
        ({"mode": "short_side", "pixels": 32, "filter": "bilinear"}, lambda w, h: (round(w * 32 / h), 32)),
    ],
)
def test_resolution_variant_equals_scoring_pre_resized_images(setup, tmp_path, evaluate, size_of):
    from pytest_pstbench.paired.session import RunSession, RunSettings

    variant = write_variant(tmp_path / "res.yaml", "res", {"resolution": {"evaluate": evaluate}})
    run = engine(setup, [str(variant)], methods={"half": setup.methods["half"], "identity": "identity"})
    # the same images resized beforehand with PIL, then scored by the ordinary session at full size
    resample = getattr(Image.Resampling, evaluate["filter"].upper())
    data = yaml.safe_load(setup.manifest.read_text())
    small = tmp_path / "small"
    small.mkdir()
    for p in data["pairs"]:
        for role in ("content", "style", "reference"):
            im = Image.open(setup.manifest.parent / p[role])
            im.resize(size_of(*im.size), resample).save(small / p[role])
        im = Image.open(Path(setup.methods["half"]) / f"{p['id']}.png")
        im.resize(size_of(*im.size), resample).save(small / f"{p['id']}.png")
    (small / "track.yaml").write_text(setup.manifest.read_text())
    track = load_manifest(small / "track.yaml")
    session = RunSession(
        track, load_protocol(setup.protocol), RunSettings(name="x", results_dir=tmp_path / "r", use_cache=False)
    )
    for method, out in (("half", lambda p: small / f"{p.id}.png"), ("identity", lambda p: p.content)):
        expected = [session.score_pair(p, out(p)).metrics for p in track.pairs]
        for m in run.scores["res"]:
            assert run.scores["res"][m][method] == pytest.approx([e[m] for e in expected], rel=1e-12, abs=1e-12), (
                method,
                m,
            )


def _count_computations(monkeypatch) -> dict:
    """Counts of the metric engine's computations (`MetricComputer.value`) by (metric kind, quantity)."""
    from pytest_pstbench.metrics.scorer import MetricComputer

    counts: dict = {}
    real = MetricComputer.value

    def counting(self, params, output, other, **kw):
        key = (params["kind"], kw.get("quantity", "value"))
        counts[key] = counts.get(key, 0) + 1
        return real(self, params, output, other, **kw)

    monkeypatch.setattr(MetricComputer, "value", counting)
    return counts


def test_short_side_larger_than_the_images_reuses_the_protocol_values(setup, tmp_path, monkeypatch):
    counts = _count_computations(monkeypatch)
    variant = write_variant(
        tmp_path / "big.yaml",
        "big",
        {"resolution": {"evaluate": {"mode": "short_side", "pixels": 512, "filter": "bicubic"}}},
    )
    run = engine(setup, [str(variant)], methods={"half": setup.methods["half"], "identity": "identity"})
    assert (
        counts[("hist_corr", "value")] == 4 * 2 * 2
    )  # pairs x methods x (hcorr_gt, hcorr_style), protocol only: no upscaling
    for m in run.scores[BASE_ID]:
        np.testing.assert_array_equal(run.scores["big"][m]["half"], run.scores[BASE_ID][m]["half"])


def test_each_distinct_computation_runs_once_per_method_and_pair(setup, monkeypatch):
    counts = _count_computations(monkeypatch)
    run = engine(setup, ["aggregation-median", "hcorr-64bins", "psnr-luma", "psnr-pooled"])
    n = 4 * 3  # pairs x methods
    assert {k: counts[k] for k in (("hist_corr", "value"), ("psnr", "value"), ("psnr", "mse"), ("ssim", "value"))} == {
        ("hist_corr", "value"): n * 4,  # base gt/style + 64-bin gt/style
        ("psnr", "value"): n * 2,  # base + luma PSNR
        ("psnr", "mse"): n,  # the per-pair MSE of psnr-pooled
        ("ssim", "value"): n,
    }
    assert run.counts["computed"] == n * (5 + 2 + 1 + 1)
    assert run.counts["values"] == n * 5 * 5


# ---- analysis ----------------------------------------------------------------------------------------------


def _result_from_scores(scores: dict, variant_ids: list[str], n_pairs: int) -> SensitivityResult:
    base = load_protocol()
    variants = load_variants(variant_ids, base)
    track = SimpleNamespace(
        id="synthetic",
        revision="r1",
        dataset_id="synthetic",
        pairs=[None] * n_pairs,
        pair_ids=[f"p{i}" for i in range(n_pairs)],
    )
    methods = [SimpleNamespace(name=n, spec=n) for n in next(iter(next(iter(scores.values())).values()))]
    return SensitivityResult(track, base, variants, methods, scores, {}, {}, {})


def test_kendall_tau_and_rankings_against_scipy():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(3)
    names = ["m1", "m2", "m3", "m4", "m5"]
    metrics = load_protocol().ranked_metrics
    scores = {
        vid: {m: {n: rng.normal(size=8) + i * 0.1 for i, n in enumerate(names)} for m in metrics}
        for vid in (BASE_ID, "aggregation-median")
    }
    a = analyse(_result_from_scores(scores, ["aggregation-median"], 8))
    hib = {m: load_protocol().metrics[m]["higher_is_better"] for m in metrics}
    for m in metrics:
        base_agg = [np.mean(scores[BASE_ID][m][n]) for n in names]
        var_agg = [np.median(scores["aggregation-median"][m][n]) for n in names]
        expected = kendalltau(base_agg, var_agg)
        got = a["kendall_tau"]["aggregation-median"][m]
        assert got["tau"] == pytest.approx(expected.statistic) and got["pvalue"] == pytest.approx(expected.pvalue)
        order = sorted(range(5), key=lambda i: -var_agg[i] if hib[m] else var_agg[i])
        assert a["rankings"]["aggregation-median"][m] == [names[i] for i in order]
        assert a["kendall_tau"][BASE_ID][m]["tau"] == pytest.approx(1.0)


def test_a_swap_is_detected_with_paired_significance_and_holm():
    from scipy.stats import wilcoxon

    rng = np.random.default_rng(7)
    n = 12
    base_b = rng.uniform(20, 30, n)
    c_noise = rng.normal(0, 3, n)
    metrics = load_protocol().ranked_metrics
    # continuous values without tied differences (scipy would switch to a slow permutation test)
    same = {m: {k: rng.uniform(0, 1, n) for k in "ABC"} for m in metrics}
    base = dict(same, psnr={"A": base_b + 1.0 + rng.uniform(0, 0.5, n), "B": base_b, "C": base_b + c_noise})
    variant = dict(same, psnr={"A": base_b - 0.2 - rng.uniform(0, 0.1, n), "B": base_b, "C": base_b + c_noise})
    a = analyse(_result_from_scores({BASE_ID: base, "hcorr-64bins": variant}, ["hcorr-64bins"], n))
    swaps = [s for s in a["swaps"] if s["metric"] == "psnr"]
    assert [(s["a"], s["b"]) for s in swaps] == [("A", "B")]
    s = swaps[0]
    assert s["base_order"] == ["A", "B"] and s["variant_order"] == ["B", "A"]

    def holm_by_hand(scores):
        pairs = [("A", "B"), ("A", "C"), ("B", "C")]
        p = [wilcoxon(scores[y] - scores[x]).pvalue for x, y in pairs]
        order = np.argsort(p)
        adj, running = [0.0] * 3, 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (3 - rank) * p[i]))
            adj[i] = running
        return adj[0]

    assert s["base_p_holm"] == pytest.approx(holm_by_hand(base["psnr"]))
    assert s["variant_p_holm"] == pytest.approx(holm_by_hand(variant["psnr"]))
    assert s["base_significant"] and s["variant_significant"]
    assert not [s for s in a["swaps"] if s["metric"] != "psnr"]  # identical scores elsewhere: no swap


# ---- unavailable metric, CLI -------------------------------------------------------------------------------------


def test_squeeze_is_reported_unavailable_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # no torchvision cache file for SqueezeNet
    monkeypatch.setenv("PSTBENCH_NO_TORCHVISION_DOWNLOAD", "1")
    manifest = make_track(tmp_path / "t", n=2)
    outs = make_outputs(manifest, tmp_path / "o")
    out = tmp_path / "sens"
    code = main(
        [
            "sensitivity",
            "--track",
            str(manifest),
            f"half={outs}",
            "identity=identity",
            "--variants",
            "lpips-squeeze",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    a = json.loads((out / "analysis.json").read_text())
    assert [(u["variant"], u["metric"]) for u in a["unavailable"]] == [("lpips-squeeze", "lpips")]
    assert "squeeze" in a["unavailable"][0]["reason"]
    assert "lpips" in a["aggregates"][BASE_ID] and "lpips" not in a["aggregates"]["lpips-squeeze"]
    assert "psnr" in a["aggregates"]["lpips-squeeze"]
    assert "Unavailable" in (out / "analysis.md").read_text()


def test_cli_end_to_end(setup, tmp_path, capsys):
    out = tmp_path / "sens"
    argv = [
        "sensitivity",
        "--track",
        str(setup.manifest),
        *[f"{k}={v}" for k, v in setup.methods.items()],
        "--variants",
        "hcorr-64bins",
        "aggregation-median",
        "--out",
        str(out),
        "--protocol",
        str(setup.protocol),
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "Kendall τ" in captured.out and "H-Corr(gt)" in captured.out
    assert "[4/4]" in captured.err  # progress on stderr
    rows = list(csv.DictReader((out / "scores.csv").open()))
    assert list(rows[0]) == ["variant", "method", "pair", "metric", "value"]
    assert len(rows) == 3 * 3 * 4 * 5  # variants x methods x pairs x metrics
    a = json.loads((out / "analysis.json").read_text())
    for key in (
        "track",
        "protocol",
        "protocol_sha256",
        "dataset_revision",
        "methods",
        "metrics",
        "variants",
        "aggregates",
        "rankings",
        "kendall_tau",
        "swaps",
        "unavailable",
        "timings",
    ):
        assert key in a
    assert [v["id"] for v in a["variants"]] == [BASE_ID, "hcorr-64bins", "aggregation-median"]
    assert a["methods"] == ["half", "most", "identity"] and a["protocol_sha256"] == load_protocol(setup.protocol).sha256
    assert set(a["timings"]["per_variant_s"]) == {BASE_ID, "hcorr-64bins", "aggregation-median"}
    first = (out / "scores.csv").read_bytes()
    assert main(argv) == 0
    assert (out / "scores.csv").read_bytes() == first  # deterministic
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left


@pytest.mark.parametrize(
    "specs, fragment",
    [
        (["half"], "expected NAME=PATH"),
        (["a={missing}", "identity=identity"], "outputs folder not found"),
        (["a={half}", "a=identity"], "given twice"),
        (["a={half}"], "at least two methods"),
        (["a={partial}", "identity=identity"], "no output for pair(s) p02"),
    ],
)
def test_cli_bad_specs_are_one_line_errors(setup, tmp_path, capsys, specs, fragment):
    partial = make_outputs(setup.manifest, tmp_path / "partial")
    (partial / "p02.png").unlink()
    fill = {"half": setup.methods["half"], "missing": str(tmp_path / "nope"), "partial": str(partial)}
    out = tmp_path / "sens"
    argv = [
        "sensitivity",
        "--track",
        str(setup.manifest),
        *[s.format(**fill) for s in specs],
        "--variants",
        "aggregation-median",
        "--out",
        str(out),
        "--protocol",
        str(setup.protocol),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pstbench: error:") and fragment in err[0]
    assert not out.exists()


def test_cli_unknown_variant_names_the_shipped_ones(setup, tmp_path, capsys):
    argv = [
        "sensitivity",
        "--track",
        str(setup.manifest),
        f"half={setup.methods['half']}",
        "identity=identity",
        "--variants",
        "no-such-variant",
        "--out",
        str(tmp_path / "s"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no-such-variant" in err and "hcorr-64bins" in err


def test_default_variants_skip_metrics_the_base_lacks(setup):
    notes = []
    ids = [v.id for v in load_variants(None, load_protocol(setup.protocol), progress=notes.append)]
    assert ids[0] == BASE_ID and "hcorr-64bins" in ids and not [i for i in ids if i.startswith("lpips-")]
    assert len(notes) == len([i for i in shipped_variant_ids() if i.startswith("lpips-")]) and all(
        "no metric lpips" in n for n in notes
    )
    with pytest.raises(UserError, match="no such metric"):
        load_variants(["lpips-vgg"], load_protocol(setup.protocol))  # named explicitly: refused


# ---- LPIPS from shared per-image features ------------------------------------------------------------------

LPIPS_VARIANTS = ["lpips-v00", "lpips-input01", "lpips-resize256", "lpips-vgg", "resolution-256"]


@pytest.fixture(scope="module")
def lpips_run(setup):
    return engine(setup, LPIPS_VARIANTS, protocol=load_protocol().path)


def test_lpips_variants_equal_the_protocol_path(setup, lpips_run):
    """Every LPIPS value of the engine (from shared features) equals LpipsMetric.distance, which calls
    lpips's own LPIPS.forward, on the images read by Pillow (and resized by Pillow for resolution-256)."""
    from pytest_pstbench.data.weights.resolve import resolve_features
    from pytest_pstbench.metrics.lpips_metric import LpipsMetric

    s = lpips_run.scores
    variants = {v.id: v for v in lpips_run.variants}
    assert set(s) == {BASE_ID, *LPIPS_VARIANTS} and all("lpips" in s[vid] for vid in s)
    small = lambda x: np.asarray(Image.fromarray(x).resize((256, 256), Image.Resampling.BICUBIC))  # noqa: E731
    for method in setup.methods:
        imgs = images(setup, method)
        for vid in [BASE_ID, *LPIPS_VARIANTS]:
            metric = LpipsMetric(variants[vid].protocol.metrics["lpips"], "cpu", weights=resolve_features)
            if vid == "resolution-256":
                expected = [metric.distance(small(o), small(r)) for o, r, _ in imgs]
            else:
                expected = [metric.distance(o, r) for o, r, _ in imgs]
            assert s[vid]["lpips"][method] == pytest.approx(expected, abs=1e-6), (vid, method)
        # the variants do change LPIPS (the comparison above is not between equal numbers)
        for vid in LPIPS_VARIANTS:
            assert not np.allclose(s[vid]["lpips"][method], s[BASE_ID]["lpips"][method], rtol=0.05, atol=1e-5), (
                vid,
                method,
            )
    # two routes to the same 256x256 bicubic images: LPIPS's own resize and the evaluation resolution
    np.testing.assert_allclose(s["lpips-resize256"]["lpips"]["half"], s["resolution-256"]["lpips"]["half"], atol=1e-6)


def test_reference_features_are_computed_once_per_pair_and_lpips_parameters(setup, monkeypatch):
    from pytest_pstbench.metrics.lpips_metric import LpipsMetric

    data = yaml.safe_load(setup.manifest.read_text())
    refs = [np.asarray(Image.open(setup.manifest.parent / p["reference"]).convert("RGB")) for p in data["pairs"]]
    calls = []  # (feature key, index of the reference it was given, or None for any other image)
    real_features, real_distance = LpipsMetric.features, LpipsMetric.distance

    def counting(self, x):
        calls.append((self.feature_key(), next((i for i, r in enumerate(refs) if np.array_equal(r, x)), None)))
        return real_features(self, x)

    def no_distance(self, a, b):  # the engine must not run the backbone twice per value
        raise AssertionError("LpipsMetric.distance called by the engine")

    monkeypatch.setattr(LpipsMetric, "features", counting)
    monkeypatch.setattr(LpipsMetric, "distance", no_distance)
    run = engine(setup, ["lpips-v00", "lpips-input01", "aggregation-median"], protocol=load_protocol().path)
    n_pairs, n_methods = len(refs), len(setup.methods)
    keys = {k for k, _ in calls}
    assert len(keys) == 3  # protocol, v0.0, input [0, 1]; aggregation-median reuses the protocol's values
    for k in keys:
        on_refs = sorted(i for kk, i in calls if kk == k and i is not None)
        assert on_refs == list(range(n_pairs))  # each pair's reference once, whatever the number of methods
        assert sum(1 for kk, i in calls if kk == k and i is None) == n_pairs * n_methods  # each output once
    assert run.counts["lpips_feature_passes"] == len(calls) == 3 * n_pairs * (1 + n_methods)
    monkeypatch.setattr(LpipsMetric, "distance", real_distance)
    for method in setup.methods:
        for vid in ("lpips-v00", "lpips-input01"):
            assert len(run.scores[vid]["lpips"][method]) == n_pairs


def test_each_distinct_family_of_paired_tests_runs_once(tmp_path, monkeypatch):
    """Variants that keep a metric's per-pair values and the comparison section reuse its tests; the
    p-values are still those of scipy.stats.wilcoxon on each variant's own values."""
    from scipy.stats import wilcoxon

    import pytest_pstbench.core.stats as stats

    calls = []
    real = stats.wilcoxon_test
    monkeypatch.setattr(stats, "wilcoxon_test", lambda d, **k: calls.append(1) or real(d, **k))
    rng = np.random.default_rng(11)
    n, names = 12, ["A", "B", "C"]
    metrics = load_protocol().ranked_metrics
    base = {m: {k: rng.uniform(0, 10, n) + 0.8 * i for i, k in enumerate(names)} for m in metrics}
    changed = dict(base, psnr={k: v + rng.uniform(0, 3, n) for k, v in base["psnr"].items()})
    alpha = write_variant(tmp_path / "alpha.yaml", "alpha-20", {"comparison": {"alpha": 0.2}})
    scores = {BASE_ID: base, "hcorr-64bins": changed, "aggregation-median": base, "alpha-20": base}
    a = analyse(_result_from_scores(scores, ["hcorr-64bins", "aggregation-median", str(alpha)], n))
    fam = len(names) * (len(names) - 1) // 2
    # protocol: every metric; hcorr-64bins: psnr only; aggregation-median: none; alpha-20: every metric again
    assert len(calls) == fam * (len(metrics) + 1 + 0 + len(metrics))
    for vid, vs in scores.items():
        for m in metrics:
            tests = a["paired_tests"][vid][m]
            assert [(t["a"], t["b"]) for t in tests] == [("A", "B"), ("A", "C"), ("B", "C")]
            for t in tests:
                assert t["p"] == pytest.approx(wilcoxon(vs[m][t["b"]] - vs[m][t["a"]]).pvalue, rel=1e-12)
                assert t["significant"] == (t["p_holm"] < (0.2 if vid == "alpha-20" else 0.05))


def test_allow_resize_resizes_other_sized_outputs_and_lists_them(setup, tmp_path, capsys):
    """Without --allow-resize an output of another size is a one-line error; with it the output is
    resized to the reference size with the protocol's filter (as `pstbench score --allow-resize`),
    listed in analysis.json, and scored like the pre-resized image."""
    big = tmp_path / "big"
    shutil.copytree(setup.methods["half"], big)
    src = Image.open(big / "p01.png")
    src.resize((src.width * 2, src.height * 2), Image.Resampling.NEAREST).save(big / "p01.png")
    out = tmp_path / "sens"
    argv = [
        "sensitivity",
        "--track",
        str(setup.manifest),
        f"big={big}",
        "identity=identity",
        "--variants",
        "hcorr-64bins",
        "--out",
        str(out),
        "--protocol",
        str(setup.protocol),
    ]
    assert main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.startswith("pstbench: error:")]
    assert (
        len(err) == 1 and "differs from the reference's" in err[0] and "--allow-resize" in err[0] and not out.exists()
    )

    assert main([*argv, "--allow-resize"]) == 0
    a = json.loads((out / "analysis.json").read_text())
    filt = load_protocol(setup.protocol).section("resolution")["allow_resize_filter"]
    assert a["resized"] == [
        {
            "method": "big",
            "pair": "p01",
            "from": [src.width * 2, src.height * 2],
            "to": [src.width, src.height],
            "filter": filt,
        }
    ]
    # independent: resize with PIL here and compute the protocol's PSNR by hand
    ref = np.asarray(
        Image.open(setup.manifest.parent / yaml.safe_load(setup.manifest.read_text())["pairs"][0]["reference"]).convert(
            "RGB"
        ),
        dtype=np.float64,
    )
    fixed = np.asarray(
        Image.open(big / "p01.png").resize((src.width, src.height), getattr(Image.Resampling, filt.upper())),
        dtype=np.float64,
    )
    rows = [
        r
        for r in csv.DictReader((out / "scores.csv").open())
        if (r["variant"], r["method"], r["pair"], r["metric"]) == (BASE_ID, "big", "p01", "psnr")
    ]
    assert len(rows) == 1
    assert float(rows[0]["value"]) == pytest.approx(10 * np.log10(255.0**2 / np.mean((fixed - ref) ** 2)), abs=1e-9)


def test_out_naming_a_file_is_refused_before_anything_is_scored(setup, tmp_path, capsys, monkeypatch):
    """`--out FILE`: one line before the scoring starts (it used to be refused only when the files were written)."""
    from pytest_pstbench.paired import sensitivity_analysis

    def no_scoring(*a, **k):
        raise AssertionError("scored although --out cannot be written")

    monkeypatch.setattr(sensitivity_analysis, "run_sensitivity", no_scoring, raising=False)
    monkeypatch.setattr("pytest_pstbench.cli.sensitivity.run_sensitivity", no_scoring, raising=False)
    out = tmp_path / "analysis.txt"
    out.write_text("keep me")
    argv = [
        "sensitivity",
        "--track",
        str(setup.manifest),
        f"half={setup.methods['half']}",
        "identity=identity",
        "--variants",
        "aggregation-median",
        "--out",
        str(out),
        "--protocol",
        str(setup.protocol),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"pstbench: error: --out {out}: is a file, not a folder (analysis files go to {out}); fix: give --out a "
        "folder (or a path that does not exist yet)"
    ]
    assert out.read_text() == "keep me"

"""`pstbench score` computes under the whole protocol it records: the aggregation statistic (also per
metric), and the evaluation resolution. A score run under a protocol equals that protocol's row of
`pstbench sensitivity` (one engine), and the numbers equal independent computations."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.tracks import make_outputs, make_track
from PIL import Image
from skimage.metrics import peak_signal_noise_ratio

from pytest_pstbench.cli import main
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.paired.tracks import load_manifest

BASE = load_protocol()


def _read_csv(path: Path) -> dict[str, dict[str, float]]:
    with open(path, newline="") as fh:
        return {r.pop("pair_id"): {k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)}


def _protocol_file(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("honour")
    manifest = make_track(root / "track", n=4)
    return root, manifest, make_outputs(manifest, root / "half"), make_outputs(manifest, root / "most", strength=0.8)


def _score(root: Path, manifest: Path, outputs: Path, protocol: Path, name: str, capsys) -> Path:
    results = root / "results"
    assert (
        main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                str(outputs),
                "--protocol",
                str(protocol),
                "--name",
                name,
                "--results",
                str(results),
                "--no-cache",
            ]
        )
        == 0
    ), capsys.readouterr().err
    return results / "small" / name


def test_every_shipped_variant_scored_by_score_equals_its_sensitivity_row(setup, capsys):
    from pytest_pstbench.paired.aggregation import entry_value, statistic_of
    from pytest_pstbench.paired.sensitivity import resolve_methods
    from pytest_pstbench.paired.sensitivity_analysis import run_sensitivity
    from pytest_pstbench.paired.variants import BASE_ID, load_variants

    root, manifest, half, most = setup
    track = load_manifest(manifest)
    variants = load_variants(None, BASE)
    methods = resolve_methods(track, [("half", str(half)), ("most", str(most))])
    result = run_sensitivity(track, BASE, variants, methods)
    aggregates = result.analysis["aggregates"]
    checked = 0
    for v in variants:
        if any(vid == v.id for vid, _ in result.unavailable):
            continue  # e.g. lpips-squeeze without its weights: neither engine can score it
        proto = _protocol_file(root / f"{v.id}.yaml", v.protocol.data)
        run_dir = _score(root, manifest, half, proto, f"half-{v.id}", capsys)
        rows = _read_csv(run_dir / "metrics.csv")
        summary = json.loads((run_dir / "summary.json").read_text())
        for m in BASE.metric_names:
            per_pair = [rows[pid][m] for pid in track.pair_ids]
            expected = result.scores[v.id][m]["half"]
            # one metric engine (metrics/scorer.py: MetricComputer.value) for both: equal bit for bit, LPIPS too
            assert per_pair == list(expected), (v.id, m)
            stat = statistic_of(v.protocol, m)
            entry = summary["metrics"][m]
            assert entry.get("statistic", "mean") == stat, (v.id, m)
            if m in aggregates[v.id]:
                assert entry_value(entry) == pytest.approx(aggregates[v.id][m]["half"], rel=1e-15), (v.id, m)
        checked += 1
    assert checked >= len(variants) - 1 and BASE_ID in {v.id for v in variants}


def test_statistic_median_gives_medians_in_summary_and_table(setup, capsys):
    root, manifest, half, _ = setup
    data = yaml.safe_load(BASE.path.read_text(encoding="utf-8"))
    data["aggregation"]["statistic"] = "median"
    run_dir = _score(root, manifest, half, _protocol_file(root / "median.yaml", data), "median", capsys)
    out = capsys.readouterr().out
    rows = _read_csv(run_dir / "metrics.csv")
    summary = json.loads((run_dir / "summary.json").read_text())
    for m in BASE.metric_names:
        values = sorted(r[m] for r in rows.values())
        median = (values[1] + values[2]) / 2  # 4 pairs, by hand
        entry = summary["metrics"][m]
        assert "mean" not in entry and entry["statistic"] == "median"
        assert entry["value"] == pytest.approx(median, rel=1e-15)
        assert entry["ci_low"] <= entry["value"] <= entry["ci_high"]
        assert values[0] <= entry["ci_low"] and entry["ci_high"] <= values[-1]  # a median's CI stays in range
    header = next(line for line in out.splitlines() if line.startswith("method"))
    assert "PSNR↑ (median)" in header
    row = next(line for line in out.splitlines() if line.startswith("median"))
    assert f"{summary['metrics']['psnr']['value']:.2f} ± {summary['metrics']['psnr']['pm']:.2f}" in row
    # the plain mean is not what is shown
    mean = np.mean([r["psnr"] for r in rows.values()])
    assert f"{mean:.2f} ±" not in row


def _rgb(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def test_pooled_mse_psnr_is_computed_from_the_dataset_mse(setup, capsys):
    root, manifest, half, _ = setup
    data = yaml.safe_load(BASE.path.read_text(encoding="utf-8"))
    data["aggregation"]["per_metric"] = {"psnr": {"statistic": "pooled_mse"}}
    run_dir = _score(root, manifest, half, _protocol_file(root / "pooled.yaml", data), "pooled", capsys)
    rows = _read_csv(run_dir / "metrics.csv")
    summary = json.loads((run_dir / "summary.json").read_text())
    track = load_manifest(manifest)
    mses = []
    for p in track.pairs:
        a = _rgb(half / f"{p.id}.png").astype(np.float64)
        b = _rgb(p.reference).astype(np.float64)
        mses.append(np.mean((a - b) ** 2))
        assert rows[p.id]["psnr"] == pytest.approx(mses[-1], rel=1e-12)  # per-pair values are MSE
    entry = summary["metrics"]["psnr"]
    assert entry["statistic"] == "pooled_mse" and entry["per_pair"] == "mse"
    assert entry["value"] == pytest.approx(10 * np.log10(255.0**2 / np.mean(mses)), rel=1e-12)
    assert summary["metrics"]["ssim"].keys() >= {"mean"}  # the other metrics keep the mean


def test_evaluation_resolution_resizes_every_image_before_the_metrics(setup, capsys):
    root, manifest, half, _ = setup
    data = yaml.safe_load(BASE.path.read_text(encoding="utf-8"))
    data["resolution"]["evaluate"] = {"mode": "fixed", "width": 48, "height": 36, "filter": "bilinear"}
    run_dir = _score(root, manifest, half, _protocol_file(root / "fixed.yaml", data), "fixed", capsys)
    rows = _read_csv(run_dir / "metrics.csv")
    track = load_manifest(manifest)
    for p in track.pairs:
        small = lambda path: np.asarray(Image.fromarray(_rgb(path)).resize((48, 36), Image.Resampling.BILINEAR))  # noqa: E731
        expected = peak_signal_noise_ratio(small(p.reference), small(half / f"{p.id}.png"), data_range=255)
        assert rows[p.id]["psnr"] == pytest.approx(expected, rel=1e-12)
        full = peak_signal_noise_ratio(_rgb(p.reference), _rgb(half / f"{p.id}.png"), data_range=255)
        assert abs(rows[p.id]["psnr"] - full) > 1e-6  # it did change something


def test_compare_on_pooled_runs_treats_per_pair_mse_as_lower_is_better(setup, capsys):
    from pytest_pstbench.paired.compare import compare_runs, load_runs

    root, manifest, half, most = setup
    data = yaml.safe_load(BASE.path.read_text(encoding="utf-8"))
    data["aggregation"]["per_metric"] = {"psnr": {"statistic": "pooled_mse"}}
    proto = _protocol_file(root / "pooled2.yaml", data)
    a = _score(root, manifest, half, proto, "p-half", capsys)
    b = _score(root, manifest, most, proto, "p-most", capsys)  # closer to the reference: lower MSE, better
    comp = compare_runs(load_runs([a, b]), protocol=load_protocol(proto), metrics=["psnr"])
    (row,) = comp.rows
    assert row.higher_is_better is False and row.wins == 4 and row.losses == 0


def test_bounds_name_the_protocols_statistic(setup, pytester):
    """A --pstbench-min bound under a median protocol checks the median and says so (not 'mean')."""
    root, manifest, half, _ = setup
    data = yaml.safe_load(BASE.path.read_text(encoding="utf-8"))
    data["aggregation"]["statistic"] = "median"
    del data["metrics"]["lpips"]
    data["comparison"]["tie_threshold"].pop("lpips", None)
    proto = _protocol_file(root / "median-bounds.yaml", data)
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-outputs={half}",
        f"--pstbench-protocol={proto}",
        "--pstbench-min",
        "psnr=99",
        "--pstbench-no-cache",
    )
    assert r.ret == 1
    summary = json.loads((pytester.path / "results" / "small" / "half" / "summary.json").read_text())
    median = summary["metrics"]["psnr"]["value"]
    r.stdout.fnmatch_lines(
        [f"*pstbench gate FAILED: PSNR↑ (psnr) median {median:.6g} is below the minimum 99 (--pstbench-min)*"]
    )

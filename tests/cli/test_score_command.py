"""The `pstbench` command: score, demo, run file formats, bad input."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main
from pytest_pstbench.core.protocol import load_protocol

PROTOCOL = load_protocol()


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "method")
    return manifest, outputs


def test_score_writes_run_files_in_the_documented_formats(env, tmp_path, capsys):
    manifest, outputs = env
    (outputs / "method.yaml").write_text("code: https://example.org/m@abc123\nsettings: {steps: 3}\n")
    assert (
        main(["score", "--track", str(manifest), "--outputs", str(outputs), "--method-info", "weights=sha256:ff"]) == 0
    )
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("track: small   protocol: pstbench   dataset: small@") and lines[0].endswith("n=4")
    assert lines[1].split() == ["method", "PSNR↑", "SSIM↑", "LPIPS↓", "ΔE00↓", "H-Corr(gt)↑", "H-Corr(style)↑"]
    assert lines[3].startswith("Identity") and lines[4].startswith("method")
    run_dir = tmp_path / "results" / "small" / "method"
    rows = list(csv.reader((run_dir / "metrics.csv").open()))
    assert rows[0] == ["pair_id", "psnr", "ssim", "lpips", "delta_e00", "hcorr_gt", "hcorr_style"]
    assert [r[0] for r in rows[1:]] == ["p01", "p02", "p03", "p04"]
    values = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary) >= {"track", "protocol", "dataset_revision", "name", "n", "metrics"}
    assert summary["n"] == 4 and summary["name"] == "method"
    for j, m in enumerate(rows[0][1:]):
        entry = summary["metrics"][m]
        assert entry["mean"] == pytest.approx(values[:, j].mean(), rel=1e-12)
        assert entry["ci_low"] <= entry["mean"] <= entry["ci_high"]
        assert entry["pm"] == pytest.approx((entry["ci_high"] - entry["ci_low"]) / 2)
        assert entry["higher_is_better"] == PROTOCOL.metrics[m]["higher_is_better"]
        assert entry["ranked"] == PROTOCOL.metrics[m]["ranked"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["protocol"] == {"id": "pstbench", "sha256": PROTOCOL.sha256, "path": str(PROTOCOL.path)}
    assert run["complete"] is True and run["n_pairs"] == 4 and run["failures"] == []
    assert run["method"] == {"code": "https://example.org/m@abc123", "settings": {"steps": 3}, "weights": "sha256:ff"}
    assert [o["pair"] for o in run["outputs"]] == ["p01", "p02", "p03", "p04"]
    import hashlib

    assert run["outputs"][0]["sha256"] == hashlib.sha256((outputs / "p01.png").read_bytes()).hexdigest()
    for key in ("python", "torch", "lpips", "scikit-image", "numpy", "pytest_pstbench", "device"):
        assert key in run["environment"]
    assert run["command"].startswith("pstbench score --track")


def test_same_inputs_byte_identical_and_identity_rescored(env, tmp_path, capsys):
    manifest, outputs = env
    args = ["score", "--track", str(manifest), "--outputs", str(outputs), "--no-cache"]
    runs = [(run, f) for run in ("method", "identity") for f in ("metrics.csv", "summary.json")]
    assert main(args) == 0
    first = {(run, f): (tmp_path / "results/small" / run / f).read_bytes() for run, f in runs}
    assert "scoring Identity" in capsys.readouterr().err
    assert main(args) == 0
    assert "scoring Identity" in capsys.readouterr().err  # under --no-cache as every run: not reused from a run folder
    for (run, f), data in first.items():
        assert (tmp_path / "results/small" / run / f).read_bytes() == data


def test_failed_pairs_exit_1_and_incomplete_run(env, tmp_path, capsys):
    manifest, outputs = env
    (outputs / "p02.png").write_bytes((outputs / "p02.png").read_bytes()[:200])  # truncated
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(outputs / "p03.png")  # wrong size
    assert main(["score", "--track", str(manifest), "--outputs", str(outputs)]) == 1
    err = capsys.readouterr().err
    assert "2 of 4 pairs failed; run.json says complete: false" in err
    assert f"{outputs / 'p02.png'} (output): truncated or corrupt PNG" in err
    assert f"{outputs / 'p03.png'} (output): size 10x10 differs from the reference's 64x48" in err
    assert "Traceback" not in err
    run = json.loads((tmp_path / "results/small/method/run.json").read_text())
    assert run["complete"] is False and run["n_scored"] == 2
    summary = json.loads((tmp_path / "results/small/method/summary.json").read_text())
    assert summary["complete"] is False and summary["n"] == 2
    rows = list(csv.reader((tmp_path / "results/small/method/metrics.csv").open()))
    assert rows[2] == ["p02", "", "", "", "", "", ""]


def test_allow_resize_is_recorded(env, tmp_path):
    manifest, outputs = env
    img = Image.open(outputs / "p01.png")
    img.resize((128, 96), Image.Resampling.NEAREST).save(outputs / "p01.png")
    assert main(["score", "--track", str(manifest), "--outputs", str(outputs), "--allow-resize"]) == 0
    run = json.loads((tmp_path / "results/small/method/run.json").read_text())
    assert run["resized"] == [{"pair": "p01", "from": [128, 96], "to": [64, 48], "filter": "bicubic"}]
    assert {"kind": "resized", "flag": "--allow-resize", "pairs": ["p01"]} in run["deviations"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--track", "nonesuch", "--outputs", "."], "--track nonesuch: unknown track"),
        (["--track", "{manifest}", "--outputs", "missing-dir"], "missing-dir: outputs folder not found"),
        (["--track", "{tmp}/nope.yaml", "--outputs", "."], "nope.yaml: track manifest not found"),
        (
            ["--track", "{manifest}", "--outputs", "{outputs}", "--device", "tpu"],
            "--device 'tpu': expected cpu or cuda",
        ),
        (
            ["--track", "{manifest}", "--outputs", "{outputs}", "--method-info", "novalue"],
            "--method-info 'novalue': expected key=value",
        ),
        (
            ["--track", "{manifest}", "--outputs", "{outputs}", "--protocol", "nonesuch"],
            "nonesuch.yaml: protocol file not found",
        ),
    ],
)
def test_user_errors_exit_2_one_line_nothing_written(env, tmp_path, capsys, argv, message):
    manifest, outputs = env
    argv = [a.format(manifest=manifest, outputs=outputs, tmp=tmp_path) for a in argv]
    assert main(["score", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pstbench: error: ") and message in err[0]
    assert not (tmp_path / "results").exists()


def test_stray_png_lists_all(env, tmp_path, capsys):
    manifest, outputs = env
    for name in ("extra.png", "p1.png"):
        Image.new("RGB", (4, 4)).save(outputs / name)
    assert main(["score", "--track", str(manifest), "--outputs", str(outputs)]) == 2
    assert "PNG files not named after a pair of track small: extra.png, p1.png; fix:" in capsys.readouterr().err


def test_bad_manifest(tmp_path, capsys):
    (tmp_path / "track.yaml").write_text("id: x\npairs:\n  - {id: a, content: c.png, style: s.png}\n")
    assert main(["score", "--track", str(tmp_path / "track.yaml"), "--outputs", str(tmp_path)]) == 2
    assert "invalid track manifest: pairs[0] lacks reference" in capsys.readouterr().err


def test_demo(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("track: demo   protocol: pstbench   dataset: demo@") and out[0].endswith("n=10")
    ident = next(line for line in out if line.startswith("Identity")).split()
    rein = next(line for line in out if line.startswith("reinhard")).split()
    # the baseline beats Identity on PSNR and delta E on the demo track
    assert float(rein[1]) > float(ident[1]) and float(rein[10]) < float(ident[10])
    for method in ("identity", "reinhard"):
        assert json.loads((tmp_path / "results/demo" / method / "run.json").read_text())["complete"] is True


def test_weights_fetch_nets(capsys):
    """`pstbench weights fetch --net ...`: alex is ready from the (session) cache; squeeze has no offline
    source here and gives one line naming the file to provide."""
    from pytest_pstbench.cli import main
    from pytest_pstbench.data.weights.backbones import cache_path

    assert main(["weights", "fetch", "--net", "alex"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"LPIPS alex (alexnet) weights ready: {cache_path('alexnet')} (source: ")
    assert cache_path("alexnet").is_file()
    assert main(["weights", "fetch", "--net", "squeeze"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pstbench: error: the squeezenet1_1") and "squeezenet1_1-b8a52dc0.pth" in err[-1]

"""The public Python API (`import pytest_pstbench as pst`, issue #24): cheap import, the README example,
and each function checked against the CLI's run files."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_import_is_cheap_and_lists_the_api():
    code = "import pytest_pstbench as pst, sys; print(sorted(pst.__all__)); print(callable(pst.score))"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert "pytest_pstbench" in imported
    for heavy in ("numpy", "torch", "lpips", "skimage", "PIL", "scipy", "yaml"):
        assert heavy not in imported, f"import pytest_pstbench (and its API's names) imported {heavy}"
    assert proc.stdout.splitlines()[1] == "True"
    import pytest_pstbench as pst

    for name in pst.__all__:
        assert getattr(pst, name) is not None
    with pytest.raises(AttributeError):
        pst.nonesuch  # noqa: B018


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return block


def test_readme_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_readme_example(), "README.md", "exec"), {})
    psnr, worse = out.getvalue().split(maxsplit=1)
    run_dir = tmp_path / "results" / "demo" / "my-method"
    ident = tmp_path / "results" / "demo" / "identity"
    assert worse.strip() == "[]"
    # the content as arrays scores what the CLI's Identity run (the content files) scores
    assert (run_dir / "metrics.csv").read_bytes() == (ident / "metrics.csv").read_bytes()
    import json

    assert float(psnr) == json.loads((ident / "summary.json").read_text())["metrics"]["psnr"]["mean"]


@pytest.fixture
def small(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    track = make_track(tmp_path / "track", n=4)
    return track, make_outputs(track, tmp_path / "m" / "outputs"), protocol_without_lpips(tmp_path / "proto.yaml")


def test_score_folder_equals_the_cli(small, tmp_path):
    import pytest_pstbench as pst

    track, outputs, proto = small
    outcome = pst.score(track, outputs, protocol=proto, results="api", method_info={"code": "x@1"})
    assert outcome.complete and outcome.run_dir == Path("api") / "small" / "m"
    assert outcome.run["method"] == {"code": "x@1"}
    assert (
        main(["score", "--track", str(track), "--outputs", str(outputs), "--protocol", str(proto), "--results", "cli"])
        == 0
    )
    for f in ("metrics.csv", "summary.json"):
        assert (tmp_path / "api/small/m" / f).read_bytes() == (tmp_path / "cli/small/m" / f).read_bytes()
    run = pst.load_run(outcome.run_dir)
    assert run.complete and run.name == "m" and sorted(run.scores) == ["p01", "p02", "p03", "p04"]


def test_metric_under_the_protocol_equals_the_run(small):
    import pytest_pstbench as pst

    track, outputs, proto = small
    run = pst.load_run(pst.score(track, outputs, protocol=proto).run_dir)
    pair = pst.track(track).pairs[1]
    images = pst.load_pair(pair, protocol=proto)
    output = pst.load_image(outputs / f"{pair.id}.png", protocol=proto, role="output")
    assert pst.metric_names(proto) == ["psnr", "ssim", "delta_e00", "hcorr_gt", "hcorr_style"]
    for name in ("ssim", "delta_e00", "hcorr_style"):
        m = pst.metric(name, protocol=proto)
        other = images.style if m.against == "style" else images.reference
        assert m(output, other) == run.scores[pair.id][name], name


def test_score_arrays_and_compare_with_margins(small):
    import numpy as np

    import pytest_pstbench as pst

    track, outputs, proto = small
    good = pst.score(track, outputs, protocol=proto, name="good")
    darker = {
        pid: np.clip(
            pst.load_image(outputs / f"{pid}.png", protocol=proto, role="output").astype(int) - 40, 0, 255
        ).astype(np.uint8)
        for pid in pst.track(track).pair_ids
    }
    dark = pst.score(track, darker, protocol=proto, name="dark")
    assert dark.complete and dark.summary["metrics"]["psnr"]["mean"] < good.summary["metrics"]["psnr"]["mean"]
    comp = pst.compare(baseline=good.run_dir, candidate=dark.run_dir, metrics=["psnr"])
    assert [r.metric for r in comp.rows] == ["psnr"] and comp.rows[0].baseline == "good"
    # issue #53: the CLI's order by keyword; a positional run takes the open role (the old candidate-first call
    # with baseline= reads one way only); two different positional runs read both ways and are refused
    old_order = pst.compare(dark.run_dir, baseline=good.run_dir, metrics=["psnr"])
    assert old_order.to_json() == comp.to_json()
    assert pst.compare(good.run_dir, candidate=dark.run_dir, metrics=["psnr"]).to_json() == comp.to_json()
    with pytest.raises(
        pst.UserError, match=r"read both ways .*fix: name them, pst.compare\(baseline=..., candidate=...\)"
    ):
        pst.compare(dark.run_dir, good.run_dir)
    assert not pst.compare(good.run_dir, good.run_dir).worse
    margin = pst.compare(baseline=good.run_dir, candidate=dark.run_dir, metrics=["psnr"], margins={"psnr": 1000.0})
    assert margin.worse == []
    partial = pst.score(track, lambda pair: darker[pair.id] if pair.id != "p03" else None, protocol=proto, name="part")
    assert partial.complete is False and [f["pair"] for f in partial.run["failures"]] == ["p03"]


def test_api_errors_are_one_line_user_errors(small):
    import numpy as np

    import pytest_pstbench as pst

    track, outputs, proto = small
    with pytest.raises(pst.UserError) as exc:
        pst.score(track, {"p01": np.zeros((4, 4, 3), np.uint8)})
    assert str(exc.value) == (
        "score(outputs=<arrays>): a run of arrays has no folder to be named after; "
        "fix: pass name=, e.g. score(track, outputs, name='my-method')"
    )
    with pytest.raises(
        pst.UserError, match=r"^metric 'nope': not a metric of protocol pstbench \(.*\); fix: use one of psnr, ssim"
    ):
        pst.metric("nope")
    with pytest.raises(
        pst.UserError, match=r"^metric ssim: the output is float64 \(4, 4, 3\), not a uint8 HxWx3 RGB array; fix: "
    ):
        pst.metric("ssim")(np.zeros((4, 4, 3)), np.zeros((4, 4, 3), np.uint8))

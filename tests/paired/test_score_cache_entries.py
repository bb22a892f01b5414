"""The per-pair score cache: keyed by the files read, entries verified (--verify-cache), a forged or
stale entry is a miss, a non-finite value is never stored.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track


def _psnr(a_path, b_path) -> float:
    """Independent PSNR over RGB (data range 255), as the protocol defines it."""
    import numpy as np
    from PIL import Image

    a = np.asarray(Image.open(a_path), dtype=np.float64)
    b = np.asarray(Image.open(b_path), dtype=np.float64)
    return float(10 * np.log10(255.0**2 / np.mean((a - b) ** 2)))


def _csv_column(run_dir, metric):
    import csv

    with open(run_dir / "metrics.csv", newline="") as fh:
        return {r["pair_id"]: float(r[metric]) for r in csv.DictReader(fh)}


def _declared_revision_track(tmp_path):
    import yaml

    manifest = make_track(tmp_path / "track")
    data = yaml.safe_load(manifest.read_text())
    data["revision"] = "r1"  # a declared revision: it does not change when an image does
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    return manifest


def test_a_changed_reference_is_a_cache_miss(tmp_path):
    """Issue #11 case 05."""
    from PIL import Image

    manifest = _declared_revision_track(tmp_path)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.9)
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    run_dir = tmp_path / "results" / "small" / "run"
    ref = manifest.parent / "p02_reference.png"
    assert _csv_column(run_dir, "psnr")["p02"] == pytest.approx(_psnr(outputs / "p02.png", ref), abs=1e-9)
    Image.open(manifest.parent / "p03_style.png").save(ref)  # another picture, same size; manifest unchanged
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    psnr = _csv_column(run_dir, "psnr")["p02"]
    assert psnr == pytest.approx(_psnr(outputs / "p02.png", ref), abs=1e-9)
    assert psnr < 20  # not the stale ~30 dB of the old reference


def test_a_changed_style_is_a_cache_miss(tmp_path):
    """Issue #11 case 05."""
    from PIL import Image

    manifest = _declared_revision_track(tmp_path)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.9)
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    run_dir = tmp_path / "results" / "small" / "run"
    before = _csv_column(run_dir, "hcorr_style")["p02"]
    Image.open(manifest.parent / "p03_content.png").save(manifest.parent / "p02_style.png")
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    assert _csv_column(run_dir, "hcorr_style")["p02"] != before
    assert score_cli(tmp_path, manifest, outputs, proto, "--no-cache", results="fresh") == 0
    assert _csv_column(run_dir, "hcorr_style") == _csv_column(tmp_path / "fresh" / "small" / "run", "hcorr_style")


def _entries():
    return sorted((Path(os.environ["PSTBENCH_CACHE"]) / "scores").rglob("*.json"))


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A score cache of this test's own: tests that edit every entry must not see (or damage) the
    entries other tests of the session wrote (e.g. tests/plugin/test_regression_gate.py's deliberately broken one)."""
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "own-cache"))


def test_a_forged_cache_entry_is_a_miss(tmp_path, own_cache):
    """Issue #11 case 07."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.9)
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    forged = 0
    for e in _entries():  # forge every entry: PSNR 99 for every pair
        data = json.loads(e.read_text())
        if "psnr" in data.get("metrics", {}):
            data["metrics"]["psnr"] = 99.0
            e.write_text(json.dumps(data))
            forged += 1
    assert forged >= 4
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    got = _csv_column(tmp_path / "results" / "small" / "run", "psnr")
    for pid, value in got.items():
        assert value == pytest.approx(_psnr(outputs / f"{pid}.png", manifest.parent / f"{pid}_reference.png"), abs=1e-9)


def test_verify_cache_catches_a_forged_entry_with_a_valid_digest(tmp_path, own_cache, monkeypatch, capsys):
    """An entry forged by someone who also recomputes its digest is caught by --verify-cache. Issue #11 case 07."""
    from pytest_pstbench.paired import scorecache as cache_mod

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.9)
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    for e in _entries():
        data = json.loads(e.read_text())
        if "psnr" in data.get("metrics", {}):
            data["metrics"]["psnr"] = 99.0
            data["digest"] = cache_mod.entry_digest(data["key"], data["metrics"], data["notes"])
            e.write_text(json.dumps(data))
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto, "--verify-cache", "2") == 1
    err = capsys.readouterr().err
    # the run's two failures, and the Identity row's first (it verifies under the same rules: 2 of its pairs)
    assert err.count("differs from a fresh computation (psnr: cached 99.0, recomputed ") == 3
    assert "the Identity row is incomplete: 2 of 4 pairs scored" in err
    assert "fix: delete the score cache" in err and "trusted" in err
    run = json.loads((tmp_path / "results" / "small" / "run" / "run.json").read_text())
    assert run["complete"] is False and len(run["failures"]) == 2
    # unforged entries verify cleanly
    assert score_cli(tmp_path, manifest, outputs, proto, "--no-cache", results="clean") == 0
    for e in _entries():
        e.unlink()
    assert score_cli(tmp_path, manifest, outputs, proto, name="v") == 0
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto, "--verify-cache", "3", name="v") == 0
    assert "verify-cache: rescored 3 cached pairs; every one equals its cache entry" in capsys.readouterr().err


def test_verify_cache_refuses_a_bad_value(tmp_path, capsys):
    """Issue #11 case 07."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    assert score_cli(tmp_path, manifest, outputs, proto, "--verify-cache", "-1") == 2
    assert capsys.readouterr().err.strip() == (
        "pstbench: error: --verify-cache '-1': expected a whole number of cached pairs to rescore (0 or more); fix: e.g. --verify-cache 5"
    )


def test_the_pytest_verify_cache_option(pytester):
    """Issue #11 case 07."""
    manifest = make_track(pytester.path / "track")
    outputs = make_outputs(manifest, pytester.path / "out")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    base = (
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={outputs}",
        "--pstbench-name=v",
    )
    pytester.runpytest_subprocess(*base).assert_outcomes(passed=4)
    r = pytester.runpytest_subprocess(*base, "--pstbench-verify-cache=4")
    r.assert_outcomes(passed=4)
    r.stdout.fnmatch_lines(["*verify-cache: rescored 4 cached pairs; every one equals its cache entry*"])


def test_a_non_finite_metric_never_reaches_the_cache(tmp_path, monkeypatch, capsys):
    """Issue #11 case 16."""
    from pytest_pstbench.metrics.scorer import PairScorer
    from pytest_pstbench.paired.scorecache import ScoreCache

    c = ScoreCache(tmp_path / "c")
    c.put("ab" * 32, {"psnr": float("nan")}, {})
    c.put("cd" * 32, {"psnr": float("inf")}, {})
    assert list((tmp_path / "c").rglob("*")) == [] or not any(p.is_file() for p in (tmp_path / "c").rglob("*"))

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.37)  # outputs no other test caches
    real = PairScorer.score

    def nan_for_p02(self, output, reference, style, shared=None):
        values = real(self, output, reference, style, shared=shared)
        if np.array_equal(output, p02):
            values["ssim"] = float("nan")
        return values

    import numpy as np
    from PIL import Image

    p02 = np.asarray(Image.open(outputs / "p02.png"))
    monkeypatch.setattr(PairScorer, "score", nan_for_p02)
    n_before = len(_entries())
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto) == 1
    err = capsys.readouterr().err
    assert (
        f"{outputs / 'p02.png'} (output): metric ssim is nan for pair p02, not a finite number; the pair is not scored"
        in err
    )
    assert "Traceback" not in err
    run = json.loads((tmp_path / "results" / "small" / "run" / "run.json").read_text())
    assert run["complete"] is False and [f["pair"] for f in run["failures"]] == ["p02"]
    cache = Path(os.environ["PSTBENCH_CACHE"]) / "scores"
    assert list(cache.rglob("*.tmp")) == []
    for e in _entries():
        assert "NaN" not in e.read_text()
    assert len(_entries()) <= n_before + 3 + 4  # 3 good pairs (+ Identity's 4), never p02


def test_no_entry_is_stored_when_a_file_changed_under_its_key(tmp_path, monkeypatch):
    """The key is computed before decoding; if the bytes decoded are not the bytes hashed (a file replaced
    in between, or a stale per-process hash), the values are used for this run but not cached. Issue #11 case 05."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired import scorecache as cache_mod
    from pytest_pstbench.paired.scorecache import ScoreCache
    from pytest_pstbench.paired.session import RunSession, RunSettings
    from pytest_pstbench.paired.tracks import load_manifest

    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.71)
    track = load_manifest(manifest)
    session = RunSession(
        track,
        load_protocol(protocol_without_lpips(tmp_path / "proto.yaml")),
        RunSettings(
            name="r",
            results_dir=tmp_path / "results",
        ),
    )
    session.cache = ScoreCache(tmp_path / "c")
    pair = track.pair("p01")
    monkeypatch.setattr(
        cache_mod, "dataset_file_sha256", lambda path: "0" * 64
    )  # a stale digest for every dataset file
    result = session.score_pair(pair, outputs / "p01.png")
    assert result.ok
    assert list((tmp_path / "c").rglob("*.json")) == []
    monkeypatch.undo()
    session.score_pair(pair, outputs / "p01.png")
    assert len(list((tmp_path / "c").rglob("*.json"))) == 1

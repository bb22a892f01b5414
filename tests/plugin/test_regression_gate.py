"""The pytest regression gate, the pstbench_compare fixture and the per-pair score cache."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.metrics.scorer import PairScorer
from pytest_pstbench.paired.scorecache import ScoreCache


@pytest.fixture
def gate_setup(gated_track):
    s = gated_track  # conftest: 8 pairs, the protocol without LPIPS, a baseline run scored by the plugin
    return s.manifest, s.good, s.proto, s.base, s.baseline


def test_gate_fails_on_degraded_candidate(pytester, gate_setup):
    manifest, good, proto, base, baseline = gate_setup
    bad = make_outputs(manifest, pytester.path / "bad", strength=0.3)
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={bad}", f"--pstbench-baseline={baseline}", "--junitxml=report.xml"
    )
    r.assert_outcomes(passed=8)  # every pair scored ...
    assert r.ret == pytest.ExitCode.TESTS_FAILED  # ... but the session fails on the gate
    r.stdout.fnmatch_lines(
        [
            "*baseline gate (paired Wilcoxon, Holm, alpha 0.05):*",
            "*PSNR↑*baseline*bad*0/0/8*worse*",
            "*pstbench gate FAILED: PSNR↑ (psnr) is significantly worse than baseline run baseline*",
        ]
    )
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "report.xml").iter("property")}
    assert props["pstbench_gate"] == "failed"
    assert props["pstbench_verdict[baseline][psnr]"].startswith("worse;")
    assert "; mde " in props["pstbench_verdict[baseline][psnr]"]  # issue #46: the minimum detectable effect


def test_gate_passes_on_identical_candidate(pytester, gate_setup):
    manifest, good, proto, base, baseline = gate_setup
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={good}", "--pstbench-name=candidate", f"--pstbench-baseline={baseline}"
    )
    assert r.ret == 0
    r.stdout.fnmatch_lines(["*0/8/0*no significant difference*", "*pstbench gate passed*"])


def test_gate_metrics_and_bounds(pytester, gate_setup):
    manifest, good, proto, base, baseline = gate_setup
    bad = make_outputs(manifest, pytester.path / "bad", strength=0.3)
    # gated on hcorr_style only (not ranked, unaffected here) -> no significant worsening
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={bad}", f"--pstbench-baseline={baseline}", "--pstbench-gate-metrics=hcorr_style"
    )
    r.stdout.fnmatch_lines(["*H-Corr(style)*"])
    assert "PSNR↑        baseline" not in r.stdout.str()
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={good}", "--pstbench-min", "psnr=99", "--pstbench-max", "delta_e00=100"
    )
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*pstbench gate FAILED: PSNR↑ (psnr) mean * is below the minimum 99 (--pstbench-min)*"])
    r = pytester.runpytest_subprocess(*base, f"--pstbench-outputs={good}", "--pstbench-min", "nonesuch=1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--pstbench-min 'nonesuch=1': unknown metric 'nonesuch'*"])


def test_gate_refuses_baseline_of_another_track(pytester, gate_setup):
    manifest, good, proto, base, baseline = gate_setup
    other = make_track(pytester.path / "other", n=8, track_id="other")
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={other}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={good}",
        f"--pstbench-baseline={baseline}",
    )
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*pstbench gate FAILED: baseline refused: *run.json track is 'other' but * has 'small'*"])


def test_pstbench_compare_fixture(pytester, gate_setup):
    manifest, good, proto, base, baseline = gate_setup
    bad = make_outputs(manifest, pytester.path / "bad", strength=0.3)
    pytester.runpytest_subprocess(*base, f"--pstbench-outputs={bad}").assert_outcomes(passed=8)
    pytester.makepyfile(
        test_cmp=f"""
        def test_not_worse(pstbench_compare):
            result = pstbench_compare(candidate=r"{pytester.path / "results" / "small" / "bad"}", baseline=r"{baseline}")
            assert [r.metric for r in result.worse] == ["psnr", "ssim", "delta_e00", "hcorr_gt"]

        def test_same(pstbench_compare):
            assert not pstbench_compare(r"{baseline}", r"{baseline}").worse
    """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_cmp.py").assert_outcomes(passed=2)


# ---- score cache ------------------------------------------------------------------------------


def _score(tmp_path, manifest, outputs, proto, results, *extra):
    return cli_main(
        [
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(outputs),
            "--name",
            "run",
            "--results",
            str(tmp_path / results),
            "--protocol",
            str(proto),
            *extra,
        ]
    )


def test_cache_hit_skips_computation_and_files_are_identical(tmp_path, monkeypatch):
    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "out")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    assert _score(tmp_path, manifest, outputs, proto, "cold", "--no-cache") == 0
    assert _score(tmp_path, manifest, outputs, proto, "warm") == 0  # fills the cache

    def boom(*args, **kwargs):
        raise AssertionError("metrics computed despite a cache hit")

    monkeypatch.setattr(PairScorer, "score", boom)
    assert _score(tmp_path, manifest, outputs, proto, "warm") == 0  # every pair from the cache
    for f in ("metrics.csv", "summary.json"):
        assert (tmp_path / "cold" / "small" / "run" / f).read_bytes() == (
            tmp_path / "warm" / "small" / "run" / f
        ).read_bytes()
    with pytest.raises(AssertionError, match="despite a cache hit"):
        _score(tmp_path, manifest, outputs, proto, "bypass", "--no-cache")


def test_cache_miss_on_changed_output_and_corrupt_entry(tmp_path, monkeypatch):
    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "out")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    assert _score(tmp_path, manifest, outputs, proto, "r") == 0
    calls = []
    real = PairScorer.score

    def counting(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PairScorer, "score", counting)
    arr = np.asarray(Image.open(outputs / "p01.png")).copy()
    arr[0, 0] ^= 1
    Image.fromarray(arr).save(outputs / "p01.png")
    entries = sorted((Path(__import__("os").environ["PSTBENCH_CACHE"]) / "scores").rglob("*.json"))
    assert entries
    for e in entries:  # corrupt every entry: all must be recomputed, none trusted
        e.write_text("{not json")
    assert _score(tmp_path, manifest, outputs, proto, "r") == 0
    assert len(calls) == 8  # the 4 outputs and Identity's 4 (the Identity row goes through the cache too)
    calls.clear()
    assert _score(tmp_path, manifest, outputs, proto, "r") == 0
    assert calls == []  # rewritten entries hit again


def test_cache_key_depends_on_what_determines_scores(tmp_path):
    c = ScoreCache(tmp_path)
    base = dict(
        output_sha256="a" * 64,
        read_as="output",
        weights={},
        dataset_id="d",
        revision="r",
        pair_id="p",
        protocol_sha256="b" * 64,
        allow_resize=False,
        device="cpu",
        reference_sha256="1" * 64,
        style_sha256="2" * 64,
    )
    k = c.key(**base)
    for field, other in [
        ("output_sha256", "c" * 64),
        ("revision", "r2"),
        ("pair_id", "q"),
        ("reference_sha256", "3" * 64),
        ("style_sha256", "4" * 64),
        ("protocol_sha256", "e" * 64),
        ("allow_resize", True),
        ("device", "cuda"),
        ("dataset_id", "x"),
    ]:
        assert c.key(**{**base, field: other}) != k, field
    assert c.key(**base) == k


def test_cache_key_names_the_metric_engine(tmp_path, monkeypatch):
    # an entry written by an earlier metric engine (same package version) must not stand in for a fresh value
    from pytest_pstbench.paired import scorecache as cache

    c = ScoreCache(tmp_path)
    base = dict(
        output_sha256="a" * 64,
        read_as="output",
        weights={},
        dataset_id="d",
        revision="r",
        pair_id="p",
        protocol_sha256="b" * 64,
        allow_resize=False,
        device="cpu",
        reference_sha256="1" * 64,
        style_sha256="2" * 64,
    )
    k = c.key(**base)
    monkeypatch.setattr(cache, "ENGINE", cache.ENGINE - 1)
    assert c.key(**base) != k


def test_cache_key_names_torchs_thread_count(tmp_path, monkeypatch):
    """LPIPS's last digits depend on torch's CPU thread count (tests/metrics/test_fast_kernels.py::test_metrics_and_torchs_thread_count):
    an entry computed with 1 thread is a miss with 2, and run.json records the count."""
    import torch

    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    manifest = make_track(tmp_path / "track", n=2)
    outputs = make_outputs(manifest, tmp_path / "out")
    entries = lambda: sorted(p.name for p in (tmp_path / "cache" / "scores").rglob("*.json"))  # noqa: E731
    before = torch.get_num_threads()
    try:
        seen = []
        for threads in (1, 2, 1):
            torch.set_num_threads(threads)
            assert (
                cli_main(
                    [
                        "score",
                        "--track",
                        str(manifest),
                        "--outputs",
                        str(outputs),
                        "--results",
                        str(tmp_path / f"r{threads}"),
                    ]
                )
                == 0
            )
            seen.append(entries())
            run = json.loads((tmp_path / f"r{threads}" / "small" / "out" / "run.json").read_text())
            assert run["environment"]["torch_threads"] == threads
    finally:
        torch.set_num_threads(before)
    assert len(seen[0]) == 4 and len(seen[1]) == 8  # (the method and Identity) 2 threads: all four missed, scored again
    assert seen[2] == seen[1]  # 1 thread again: hits


def test_xdist_with_cache(pytester):
    manifest = make_track(pytester.path / "track", n=6)
    outputs = make_outputs(manifest, pytester.path / "out")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    args = (
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={outputs}",
        "-n",
        "2",
    )
    pytester.runpytest_subprocess(*args, "--pstbench-name=a").assert_outcomes(passed=6)
    pytester.runpytest_subprocess(*args, "--pstbench-name=b").assert_outcomes(passed=6)
    pytester.runpytest_subprocess(*args[:-2], "--pstbench-name=c", "--pstbench-no-cache").assert_outcomes(passed=6)
    res = pytester.path / "results" / "small"
    for f in ("metrics.csv", "summary.json"):
        assert (res / "a" / f).read_text().replace('"a"', "N") == (res / "b" / f).read_text().replace('"b"', "N")
        assert (res / "c" / f).read_text().replace('"c"', "N") == (res / "b" / f).read_text().replace('"b"', "N")
    assert json.loads((res / "b" / "run.json").read_text())["complete"] is True

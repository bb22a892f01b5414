"""Issue #53 "planning that uses what the user has": `pstbench power` takes the noise model from two runs the user
names (--noise-from), a correlation (--correlation) or a spread (--difference-sd) and says in its first line where
it came from; identical runs never print a tie threshold as an MDE; a clustered protocol is planned by simulating
its own sign-flip test of cluster means. Numbers are checked against hand simulations written here (scipy's
Wilcoxon; a plain enumeration of sign patterns)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats
from helpers.paired_runs import scores_from, write_run

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.paired.compare import compare_two, finish_with_power
from pytest_pstbench.paired.gate import detectable_line

PROTOCOL = load_protocol()
CLUSTERED = load_protocol("pstbench+clustered")


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(list(args))
        except SystemExit as exc:  # argparse's refusal of a bad value
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _hand_power(sd_source: np.ndarray, n: int, shift: float, reps: int = 1500, seed: int = 77) -> float:
    """Power of scipy's Wilcoxon test (two-sided, alpha 0.05, one test) against a PSNR drop `shift`, the per-pair
    noise resampled from `sd_source` (centred) with a seed of its own: plain scipy, one comparison at a time."""
    rng = np.random.default_rng(seed)
    e = sd_source - sd_source.mean()
    hits = 0
    for _ in range(reps):
        d = rng.choice(e, n) + rng.normal(0, 0.05 * e.std(), n) - shift
        d[np.abs(d) < PROTOCOL.comparison.tie("psnr")] = 0
        res = scipy.stats.wilcoxon(d, zero_method="wilcox")
        hits += res.pvalue < 0.05 and np.median(d) < 0
    return hits / reps


@pytest.fixture(scope="module")
def four_runs(tmp_path_factory):
    """A baseline, a previous commit's run and a new candidate that both track it closely (correlation ~0.97),
    and a rerun with identical values."""
    root = tmp_path_factory.mktemp("runs")
    rng = np.random.default_rng(3)
    n = 50
    ps = rng.normal(28, 3, n)
    runs = {
        "base": ps,
        "prev": ps + rng.normal(0, 0.7, n),
        "cand": ps + rng.normal(0, 0.7, n),
        "same": ps,
    }
    return {k: write_run(root, k, scores_from({"psnr": v}, n)) for k, v in runs.items()}, runs


def test_power_from_two_named_runs_equals_the_real_candidates_answer(four_runs):
    """issue #53 done-when: `power BASE --noise-from BASE PREV` (the previous commit's run) gives the MDE that the real
    candidate gives (`power BASE CAND`) within the simulation's error, where the default's assumed correlation 0.5
    is off by a factor of 3; the first line names the source; a hand simulation with scipy's Wilcoxon at that MDE
    has 80% power."""
    paths, values = four_runs
    base, prev, cand = (str(paths[k]) for k in ("base", "prev", "cand"))
    code, out, _ = _cli("power", base, cand, "--metrics", "psnr", "--json")
    real = json.loads(out)["metrics"][0]["mde"]
    code, out, _ = _cli("power", base, "--noise-from", base, prev, "--metrics", "psnr", "--json")
    planned = json.loads(out)
    mde = planned["metrics"][0]["mde"]
    assert code == 0 and "--noise-from" in planned["noise_source"]
    assert abs(mde / real - 1) < 0.15, (mde, real)
    assert 0.75 <= _hand_power(values["prev"] - values["base"], 50, mde) <= 0.87
    code, out, _ = _cli("power", base, "--metrics", "psnr", "--json")
    assumed = json.loads(out)["metrics"][0]["mde"]
    assert assumed > 3 * real  # what the issue saw: the assumed correlation 0.5 overstates the MDE
    code, out, _ = _cli("power", base, "--noise-from", base, prev, "--metrics", "psnr")
    assert out.splitlines()[0].startswith("noise model: the per-pair differences") and "prev" in out.splitlines()[0]
    code, out, _ = _cli("power", base, "--metrics", "psnr")
    assert "ASSUMING" in out.splitlines()[0] and "0.5" in out.splitlines()[0] and "--noise-from" in out.splitlines()[0]


def test_correlation_and_difference_sd_options(four_runs):
    """--correlation R plans with the baseline's values scaled by sqrt(2 (1 - R)); --difference-sd sets the spread;
    a hand simulation at the MDE has 80% power; a candidate and --noise-from together are one line refused."""
    paths, values = four_runs
    base = str(paths["base"])
    r = float(np.corrcoef(values["base"], values["prev"])[0, 1])
    code, out, _ = _cli("power", base, "--correlation", f"{r:.6f}", "--metrics", "psnr", "--json")
    row = json.loads(out)["metrics"][0]
    assert code == 0 and row["sd"] == pytest.approx(values["base"].std() * np.sqrt(2 * (1 - r)), rel=1e-4)
    scaled = (values["base"] - values["base"].mean()) * np.sqrt(2 * (1 - r))
    assert 0.75 <= _hand_power(scaled, 50, row["mde"]) <= 0.87
    code, out, _ = _cli("power", base, "--difference-sd", "psnr=0.7", "--metrics", "psnr", "--json")
    row = json.loads(out)["metrics"][0]
    assert row["sd"] == pytest.approx(0.7) and "--difference-sd" in json.loads(out)["noise_source"]
    code, out, err = _cli("power", base, str(paths["cand"]), "--noise-from", base, str(paths["prev"]))
    assert code == 2 and "give one of them" in err and len(err.strip().splitlines()) == 1
    code, out, err = _cli("power", base, "--correlation", "1.5")
    assert code == 2 and "from -1 to 1" in err


def test_identical_runs_print_no_tie_threshold_as_an_mde(four_runs):
    """issue #53 (4): a rerun with the same outputs: compare's MDE is unknown (the differences have no spread), not
    the tie threshold 0.001; the gate's line says the shifts are not known; `power` on them says so too."""
    paths, _ = four_runs
    base, same = str(paths["base"]), str(paths["same"])
    code, out, _ = _cli("compare", base, same, "--json", "--metrics", "psnr")
    det = json.loads(out)["tests"][0]["detectable"]
    assert det["mde"] is None and "no spread" in det["unknown"]
    code, out, _ = _cli("compare", base, same, "--metrics", "psnr")
    assert "unknown (no spread)" in out and "0.001" not in out
    runs = [PAIRED_LOAD(p) for p in (base, same)]
    comp = finish_with_power(compare_two(*runs, PROTOCOL, ["psnr", "ssim"]), PROTOCOL)
    line = detectable_line(comp, PROTOCOL)
    assert "not known from these runs" in line and "0.001" not in line and "PSNR 0" not in line
    code, out, _ = _cli("power", base, same, "--metrics", "psnr", "--effect", "psnr=0.5")
    assert "unknown: the per-pair differences have no spread" in out and "needs" not in out


def PAIRED_LOAD(path):
    from pytest_pstbench.paired.compare import PAIRED_RUNS

    return PAIRED_RUNS.load(Path(path))


# ---- the clustered protocol: its own sign-flip test simulated ------------------------------------------------
_PATTERNS = {}


def _plain_sign_flip_p(means) -> float:
    """Two-sided exact sign-flip p-value over every sign pattern (itertools.product), statistic the mean."""
    t = np.asarray(means, dtype=float)
    pats = _PATTERNS.setdefault(t.size, np.array(list(itertools.product((1.0, -1.0), repeat=t.size))))
    return float(np.mean(np.abs(pats @ t / t.size) >= abs(t.mean()) - 1e-12))


def _clustered_run(name, values, labels):
    ids = list(labels)
    return SimpleNamespace(
        name=name,
        path=Path(name),
        summary={"track": "t"},
        run={"clusters": {"pairs": labels}},
        scores={p: {"psnr": float(v)} for p, v in zip(ids, values)},
    )


def test_clustered_protocol_is_planned_with_its_own_cluster_test():
    """issue #53 (3): `power` under pstbench+clustered simulates the sign-flip test of cluster means: at the MDE it
    reports, a hand simulation (clusters drawn from the observed ones, plain enumeration of sign patterns) detects
    the drop in 80% of draws; the Wilcoxon plan of the same runs (pairs taken as independent) overstates power."""
    from pytest_pstbench.paired.power import planning_rows, planning_text

    rng = np.random.default_rng(11)
    k, size = 9, 4
    labels = {f"p{i:02d}": f"c{i // size}" for i in range(k * size)}
    base = rng.normal(28, 2, k * size)
    shared = np.repeat(rng.normal(0, 0.6, k), size)  # pairs of one cluster share most of their noise
    cand = base + shared + rng.normal(0, 0.1, k * size)
    runs = [_clustered_run("base", base, labels), _clustered_run("cand", cand, labels)]
    row = planning_rows(runs, CLUSTERED, ["psnr"])[0]
    assert row["clusters"] == k
    mde = row["mde"]
    plain = planning_rows(runs, PROTOCOL, ["psnr"])[0]["mde"]
    assert plain < 0.7 * mde  # the wrong test's answer: too optimistic where pairs share a source image

    resid = (cand - base) - (cand - base).mean()
    groups = [resid[c * size : (c + 1) * size] for c in range(k)]
    threshold = CLUSTERED.comparison.tie("psnr")
    hand = np.random.default_rng(99)

    def detects(shift):
        means = []
        for c in hand.integers(0, k, k):
            d = groups[c] - shift
            d[np.abs(d) < threshold] = 0
            means.append(d.mean())
        return _plain_sign_flip_p(means) < 0.05 and np.mean(means) < 0

    reps = 600
    got = np.mean([detects(mde) for _ in range(reps)])
    assert 0.74 <= got <= 0.87, got
    assert np.mean([detects(0.6 * mde) for _ in range(300)]) < 0.6
    text = planning_text([row], runs, CLUSTERED)
    assert "in 9 clusters" in text and "sign-flip test of cluster means" in text
    effect = planning_rows(runs, CLUSTERED, ["psnr"], effects={"psnr": mde}, pairs=72)[0]
    assert abs(effect["clusters_needed"] - k) <= 2 and effect["clusters_at_pairs"] == 18
    assert effect["mde_at_pairs"] < mde


@pytest.mark.parametrize("k", [5, 12, 20])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_simulated_cluster_pvalues_are_the_sign_flip_test_row_by_row(k, alternative):
    """The simulation's vectorised sign-flip p-values equal core.stats.sign_flip_test called on each row alone, exact
    enumeration and seeded patterns alike (without a pattern limit)."""
    from pytest_pstbench.core.stats import sign_flip_test
    from pytest_pstbench.paired.cluster_power import pvalues

    sf = SimpleNamespace(exact_max_clusters=16, resamples=3000, seed=0)
    t = np.random.default_rng(k).normal(0.3, 1, (20, k))
    t[0] = 0
    want = [sign_flip_test(r, alternative=alternative, exact_max_clusters=16, resamples=3000, seed=0).pvalue for r in t]
    assert pvalues(t, alternative, sf).tolist() == want
    if k <= 12:
        assert (
            pvalues(t[:5], alternative, sf).tolist() == [_plain_sign_flip_p(r) for r in t[:5]]
            or alternative != "two-sided"
        )

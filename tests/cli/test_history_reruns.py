"""Issue #53 item 1 (history tests what changed): consecutive versions whose per-item values are the same (reruns:
only run.json's timestamps changed) are one point, the later commits listed under it, adding no test to Holm's
correction; a history whose tests cannot reach alpha after Holm says so in one line naming what would help; a
series of reruns alone says why there is no step.

The planted series of the issue: 10 pairs, one commit drops PSNR 29.7 -> 26.6 and SSIM 0.94 -> 0.66 on every pair,
two rerun commits after it. The expected numbers are computed here: the smallest p-value of the exact two-sided
Wilcoxon test on 10 pairs is 2 / 2**10, and Holm multiplies the smallest p by the number of tests."""

from __future__ import annotations

import json

import numpy as np
from helpers.hostile_git import first_parent, init, put_files, raw_commit, rerun
from helpers.paired_runs import PROTOCOL, scores_from, write_run

from pytest_pstbench.cli import main as cli_main

N = 10
RUN = "results/t/m"
rng = np.random.default_rng(53)
RANKED = PROTOCOL.ranked_metrics
P_MIN = 2 / 2**N  # every pair one way, distinct magnitudes: the exact two-sided Wilcoxon's smallest p


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_files(tmp, tag: str, psnr: float, ssim: float) -> dict[str, bytes]:
    """A run of N pairs around `psnr` and `ssim` (noise: no tied differences), the other metrics constant."""
    cols = {"psnr": psnr + rng.normal(0, 0.3, N), "ssim": np.clip(ssim + rng.normal(0, 0.01, N), 0, 1)}
    d = write_run(tmp / f"stage-{tag}", "m", scores_from(cols, N))
    return {f.name: f.read_bytes() for f in sorted(d.iterdir())}


def make_series(tmp, plan) -> tuple:
    """A repository with one commit per entry of `plan`: ("run", psnr, ssim) for a new run, ("rerun",) for the
    previous run scored again (only run.json's timestamp changes). -> (repo, commit ids)."""
    repo = init(tmp / "repo")
    files, parents = None, []
    for i, entry in enumerate(plan):
        files = run_files(tmp, str(i), *entry[1:]) if entry[0] == "run" else rerun(files, f"2026-12-0{i}T00:00:00Z")
        put_files(repo, RUN, files)
        parents = [raw_commit(repo, f"{entry[0]} {i}\n".encode(), parents, when=1_790_000_000 + 86400 * i)]
    return repo, first_parent(repo, RUN)


PLANTED = [
    ("run", 29.7, 0.94),
    ("run", 29.7, 0.94),
    ("run", 26.6, 0.66),  # the real drop
    ("rerun",),
    ("rerun",),
    ("run", 26.6, 0.66),
    ("run", 26.6, 0.66),
]


def test_reruns_are_one_point_and_the_planted_step_is_found(tmp_path, capsys):
    """#53: before, the two reruns were points of their own: 6 x 5 = 30 tests, Holm's smallest p 30 x 2/1024 =
    0.059, "no significant step". Now they are listed under the drop's point: 4 x 5 = 20 tests, and the drop is a
    step on PSNR and SSIM at its commit."""
    repo, shas = make_series(tmp_path, PLANTED)
    assert len(shas) == 7
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    h = json.loads(out)
    assert [p["commit"] for p in h["points"]] == [shas[i] for i in (0, 1, 2, 5, 6)]
    assert [r["commit"] for r in h["points"][2]["repeats"]] == shas[3:5]
    assert all(p["repeats"] == [] for i, p in enumerate(h["points"]) if i != 2)
    assert h["n_tests"] == 4 * len(RANKED)
    steps = {(s["metric"], s["direction"], s["commit"]) for s in h["steps"]}
    assert {("psnr", "worse", shas[2]), ("ssim", "worse", shas[2])} <= steps, h["steps"]
    drop = next(s for s in h["steps"] if s["metric"] == "psnr")
    assert drop["p"] == P_MIN and drop["p_holm"] <= 4 * len(RANKED) * P_MIN
    assert h["limits"] == []
    code, text, err = cli(capsys, "history", repo / RUN)
    assert f"(the same values at 2 later version(s): {shas[3][:7]}, {shas[4][:7]})" in text, text


def test_a_series_of_reruns_alone_says_why_it_has_no_step(tmp_path, capsys):
    """#53: three versions of one run (two reruns): one point, no test, and a line saying why."""
    repo, shas = make_series(tmp_path, [("run", 29.7, 0.94), ("rerun",), ("rerun",)])
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    h = json.loads(out)
    assert [p["commit"] for p in h["points"]] == shas[:1] and h["n_tests"] == 0 and h["steps"] == []
    (line,) = h["limits"]
    assert line.startswith("no test: every later version has the same per-item values") and "2 rerun(s)" in line
    code, text, err = cli(capsys, "history", repo / RUN)
    assert "no significant step\nno test: every later version" in text, text


def test_a_history_that_cannot_reach_alpha_says_so_with_the_fix(tmp_path, capsys):
    """#53: seven different runs of 10 pairs: 30 tests, and Holm makes even the smallest possible p 30 x 2/1024,
    not below 0.05: one line (compare's wording) naming the numbers and what would help; --metric psnr (6 tests)
    can find the drop and the line is gone."""
    plan = [("run", 29.7, 0.94), ("run", 29.7, 0.94), ("run", 26.6, 0.66)] + [("run", 26.6, 0.66)] * 4
    repo, shas = make_series(tmp_path, plan)
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    h = json.loads(out)
    assert h["n_tests"] == 6 * len(RANKED) and h["steps"] == []
    (line,) = h["limits"]
    assert line.startswith("no difference can be significant here: with 10 pairs per test")
    assert f"{P_MIN:.4g}" in line and f"{min(1.0, 6 * len(RANKED) * P_MIN):.4g}" in line
    assert "--metric" in line and "more items" in line
    code, out, err = cli(capsys, "history", repo / RUN, "--json", "--metric", "psnr")
    h = json.loads(out)
    assert h["n_tests"] == 6 and h["limits"] == []
    assert [(s["metric"], s["commit"]) for s in h["steps"]] == [("psnr", shas[2])]

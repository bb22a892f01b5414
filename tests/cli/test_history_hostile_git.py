"""Issue #54 (history that git cannot fool): `pstbench history` on a git repository a stranger made. A subject
holding control bytes (0x1F, 0x1E, NUL, escape) is a point with that subject, never a traceback; a subject that
holds a forged record (record separators, a side branch's commit id, a date, a message) lists no point but the
first-parent history's own; a shallow clone says in one line that its history is cut, with the fix.

The expected commits are read here with plain git (`git rev-list --first-parent`, one `git log -1` per commit),
the repositories written as raw objects (tests/helpers/hostile_git.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from helpers.hostile_git import first_parent, forged_subject, git, init, put_files, raw_commit, shallow_clone
from helpers.paired_runs import scores_from, write_run

from pytest_pstbench.cli import main as cli_main

N = 12
RUN = "results/t/m"
rng = np.random.default_rng(11)
BASE = 30.0 + rng.normal(0, 1.0, N)


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def run_files(tmp, tag: str, psnr) -> dict[str, bytes]:
    """A run whose PSNR per pair is `psnr` plus noise (no tied differences: scipy's exact Wilcoxon stays fast)."""
    d = write_run(tmp / f"stage-{tag}", "m", scores_from({"psnr": np.asarray(psnr) + rng.normal(0, 0.01, N)}, N))
    return {f.name: f.read_bytes() for f in sorted(d.iterdir())}


def subject_of(repo, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%s", sha).rstrip("\n")


@pytest.mark.parametrize(
    "subject",
    [b"tune\x1fLUT", b"a\x1eb\x1fc", b"nul \x00 inside", b"esc \x1b[31mred\x1b[0m", "caf\u00e9 \u2028 ok".encode()],
)
def test_control_bytes_in_a_subject_are_a_point_with_that_subject(tmp_path, capsys, subject):
    """#54 item 7: before, a subject with 0x1F crashed history (a traceback); now every first-parent commit that
    changed the run is a point whose message is git's own subject of that commit."""
    repo = init(tmp_path / "repo")
    parent: list[str] = []
    for i, msg in enumerate([b"first", subject, b"last"]):
        put_files(repo, RUN, run_files(tmp_path, str(i), BASE + 0.01 * i))
        parent = [raw_commit(repo, msg + b"\n\nbody \x1f\x1e\x00 too\n", parent, when=1_790_000_000 + i)]
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0 and "Traceback" not in err, err
    h = json.loads(out)
    want = first_parent(repo, RUN)
    assert [p["commit"] for p in h["points"]] == want
    assert [p["message"] for p in h["points"]] == [subject_of(repo, sha) for sha in want]
    code, text, err = cli(capsys, "history", repo / RUN)
    point_lines = [ln for ln in text.splitlines() if re.match(r"  [0-9a-f]{7} \d{4}-\d\d-\d\d psnr ", ln)]
    assert code == 0 and len(point_lines) == len(want), text  # one line per point: nothing split
    assert "\x1b" not in text and "\x1f" not in text


def test_a_forged_record_in_a_subject_lists_no_side_branch_commit(tmp_path, capsys):
    """#54 item 8: a side branch's commit (its run far worse) exists in the repository; a main commit's subject
    holds a record naming it with a date and a message. Before, history listed it as a point (dated 2001,
    "forged"); now the points are exactly HEAD's first-parent commits that changed the run, the side branch
    merged in or not."""
    repo = init(tmp_path / "repo")
    put_files(repo, RUN, run_files(tmp_path, "0", BASE))
    root = raw_commit(repo, b"first\n", [])
    put_files(repo, RUN, run_files(tmp_path, "side", BASE - 5.0))
    side = raw_commit(repo, b"side: much worse\n", [root], when=1_790_000_100)
    git(repo, "read-tree", root)
    git(repo, "checkout-index", "-f", "-a")
    git(repo, "update-ref", "HEAD", root)
    put_files(repo, RUN, run_files(tmp_path, "1", BASE + 0.01))
    main1 = raw_commit(repo, forged_subject(side) + b"\n", [root], when=1_790_000_200)
    put_files(repo, RUN, run_files(tmp_path, "2", BASE + 0.02))
    merge = raw_commit(repo, forged_subject(side, message="merge") + b"\n", [main1, side], when=1_790_000_300)
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    h = json.loads(out)
    points = [p["commit"] for p in h["points"]]
    assert points == first_parent(repo, RUN) == [root, main1, merge]
    assert side not in [s["commit"] for s in h["steps"]] + [s["earlier"] for s in h["steps"]]
    assert all(not p["date"].startswith("2001") and p["message"] != "forged" for p in h["points"])
    assert [p["message"] for p in h["points"]] == [subject_of(repo, sha) for sha in points]


def test_a_shallow_clone_says_its_history_is_cut_with_the_fix(tmp_path, capsys):
    """#54 item 9: a `--depth 1` clone (the default of actions/checkout) gave a silent one-point history; now one
    line says the clone is shallow and how to fetch the rest; a partial clone (`--depth 2`) too; a full one not."""
    repo = init(tmp_path / "repo")
    parent: list[str] = []
    for i in range(4):
        put_files(repo, RUN, run_files(tmp_path, str(i), BASE - (1.0 if i >= 2 else 0.0) + 0.01 * i))
        parent = [raw_commit(repo, f"c{i}\n".encode(), parent, when=1_790_000_000 + i)]
    for depth, points in ((1, 1), (2, 2)):
        clone = shallow_clone(repo, tmp_path / f"clone{depth}", depth)
        code, text, err = cli(capsys, "history", clone / RUN)
        assert code == 0, err
        assert text.startswith(f"history: {points} points"), text
        lines = [ln for ln in text.splitlines() if "shallow clone" in ln]
        assert len(lines) == 1 and "fetch-depth: 0" in lines[0] and "git fetch --unshallow" in lines[0], text
    code, text, err = cli(capsys, "history", repo / RUN)
    assert code == 0 and "shallow" not in text + err and text.startswith("history: 4 points"), text

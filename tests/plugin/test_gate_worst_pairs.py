"""Issue #45 item 9 (the gate's part): a failed gate's terminal summary (after the FAILED lines) and its
Markdown summary ($GITHUB_STEP_SUMMARY, --pstbench-summary) show, per failing metric, the three pairs the
candidate lost most on: pair id, both values, the loss, the pair's content and style files. Checked against
a hand computation from the two runs' metrics.csv. Selection runs: the tasks whose pass^3 outcome went from
right to wrong, checked against the two runs' per_task.csv."""

from __future__ import annotations

import csv
import re

import pytest
import yaml
from helpers.tracks import make_outputs

FAILED = pytest.ExitCode.TESTS_FAILED


def _column(path, metric):
    with open(path, newline="") as f:
        return {r["pair_id"]: float(r[metric]) for r in csv.DictReader(f)}


def _expected(s, cand_dir, metric):
    """(label, [(pair, baseline, candidate, loss, content, style)]) of the 3 largest losses, by hand."""
    p = yaml.safe_load(s.proto.read_text())["metrics"][metric]
    hib, dec = p["higher_is_better"], int(p.get("decimals", 4)) + 1
    a, b = _column(s.baseline / "metrics.csv", metric), _column(cand_dir / "metrics.csv", metric)
    loss = {k: (a[k] - b[k]) if hib else (b[k] - a[k]) for k in a}
    top = sorted((k for k in loss if loss[k] > 0), key=lambda k: (-loss[k], k))[:3]
    track = yaml.safe_load(s.manifest.read_text())
    files = {e["id"]: (s.manifest.parent / e["content"], s.manifest.parent / e["style"]) for e in track["pairs"]}
    label = f"{p['label']}{'↑' if hib else '↓'} ({metric})"
    return label, [
        (k, f"{a[k]:.{dec}f}", f"{b[k]:.{dec}f}", f"{loss[k]:.{dec}f}", str(files[k][0]), str(files[k][1])) for k in top
    ]


def test_failed_gate_shows_the_worst_pairs_in_terminal_and_step_summary(pytester, gated_track, monkeypatch):
    s = gated_track
    bad = make_outputs(s.manifest, pytester.path / "bad", strength=0.3)
    step = pytester.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={bad}", "--pstbench-name=cand", f"--pstbench-baseline={s.baseline}"
    )
    assert r.ret == FAILED
    out = r.stdout.lines
    failing = [
        m.group(1)
        for line in out
        for m in [re.search(r"pstbench gate FAILED: .*? \((\w+)\) is significantly worse", line)]
        if m
    ]
    assert "psnr" in failing
    last_failed = max(i for i, line in enumerate(out) if "pstbench gate FAILED:" in line)
    text = step.read_text()
    for metric in failing:
        label, rows = _expected(s, pytester.path / "results" / "small" / "cand", metric)
        title = f"{label} against baseline run baseline: the 3 pairs the candidate lost most on"
        at = next(i for i, line in enumerate(out) if f"pstbench worst: {title}" in line)
        assert at > last_failed  # under the FAILED lines
        header = out[at + 1].split()
        assert header[:2] == ["pair", "baseline"] and header[-2:] == ["content", "style"]
        assert [line.split() for line in out[at + 3 : at + 6]] == [list(row) for row in rows]
        # the step summary: the title and a small table with the same cells (Markdown-escaped)
        md_title = title.replace("(", "(").replace("_", "\\_")
        assert md_title in text
        block = text[text.index(md_title) :].splitlines()
        assert block[2] == "| pair | baseline value | candidate value | loss | content | style |"
        for line, row in zip(block[4:7], rows):
            cells = [c.strip() for c in line.strip("|").split("|")]
            assert cells == [c.replace("_", "\\_") for c in row]


def test_passed_gate_and_bounds_show_no_worst_pairs(pytester, gated_track):
    s = gated_track
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", f"--pstbench-baseline={s.baseline}", "--pstbench-min=psnr=99"
    )
    assert r.ret == FAILED  # a broken bound fails the gate, but no test is worse: no pairs to show
    assert "lost most on" not in r.stdout.str()


def test_selection_gate_shows_the_tasks_that_went_from_right_to_wrong(pytester):
    from helpers.selection_runs import pattern, score, write_answers

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    demo, params = resolve_selection_track("vab-demo"), SelectionParams.of(load_protocol("vab"))
    baseline = score(pytester.path, "base", demo, params, pattern(0, {"top1": 1.0, "bot1": 1.0, "tb1": 1.0}))
    worse = write_answers(
        pytester.path / "worse.jsonl", demo, params, pattern(5, {"top1": 1.0, "bot1": 0.2, "tb1": 1.0})
    )
    step = pytester.path / "step.md"
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={worse}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={baseline}",
        f"--pstbench-summary={step}",
    )
    assert r.ret == FAILED

    def rows(run):
        with open(run / "per_task.csv", newline="") as f:
            return {row["task_id"]: sum(row[f"bot1_t{t}"] == "1" for t in range(3)) for row in csv.DictReader(f)}

    a, b = rows(baseline), rows(pytester.path / "results" / "vab-demo" / "cand")
    order = list(a)
    lost = sorted((t for t in a if a[t] == 3 and b[t] < 3), key=lambda t: (b[t], order.index(t)))[:3]
    assert len(lost) == 3
    out = r.stdout.lines
    title = (
        "bot1 against baseline run base: 3 tasks whose pass^3 outcome went from right (baseline) to wrong (candidate)"
    )
    at = [i for i, line in enumerate(out) if f"pstbench worst: {title}" in line]
    assert len(at) == 1  # once per metric, though bot1 pass^3 and ap@1 both failed
    assert at[0] > max(i for i, line in enumerate(out) if "pstbench gate FAILED:" in line)
    assert [line.split() for line in out[at[0] + 3 : at[0] + 6]] == [[t, "3/3", f"{b[t]}/3"] for t in lost]
    text = step.read_text()
    assert title in text
    assert "| task | baseline trials right | candidate trials right |" in text
    for t in lost:
        assert f"| {t.replace('_', chr(92) + '_')} | 3/3 | {b[t]}/3 |" in text
    assert "top1 against baseline" not in r.stdout.str()

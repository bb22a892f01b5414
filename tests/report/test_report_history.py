"""Issue #41: `pstbench report RUN... --history SOURCE...` adds a History section to the page: the step list of
`pstbench history SOURCE --json` (the same steps, in order, with the same numbers), one plot per metric (every
image the page references exists in the report folder), the breaks and the versions left out. The commit messages
are a stranger's text: a hostile one renders as text (no element of it reaches the page)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
from helpers.paired_runs import scores_from, write_run

from pytest_pstbench.cli import main as cli_main

N = 16
RUN = "results/t/m"
HOSTILE = '<script>alert(1)</script> "faster" & <img src=x onerror=alert(2)>'


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def make_repo(tmp: Path) -> Path:
    """5 commits of RUN; the third (with HOSTILE as its message) makes PSNR worse by 1 dB; the fourth is incomplete."""
    rng = np.random.default_rng(11)
    base = 30.0 + rng.normal(0, 1.0, N)
    repo = tmp / "method"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    for i, message in enumerate(["first", "refactor", HOSTILE, "half run", "tidy"]):
        psnr = base - (1.0 if i >= 2 else 0.0) + rng.normal(0, 0.01, N)
        d = write_run(tmp / f"stage-{i}", "m", scores_from({"psnr": psnr}, N), complete=i != 3)
        if (repo / RUN).exists():
            shutil.rmtree(repo / RUN)
        shutil.copytree(d, repo / RUN)
        git("add", "-A")
        git("commit", "-q", "-m", message)
    return repo


class Page(HTMLParser):
    """The elements of the page: every tag with its attributes, the step rows' cells' text."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.rows: list[tuple[dict, list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "tr" and "step" in (a.get("class") or "").split():
            self.rows.append((a, []))
        elif tag == "td" and self.rows and self._cell is None and self.tags_open_in_step():
            self._cell = []

    def tags_open_in_step(self) -> bool:
        return any(t == "tr" for t, _ in self.tags[-12:]) and len(self.rows[-1][1]) < 8

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell))
            self._cell = None
        if tag == "table":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_the_report_shows_the_history_steps_plots_and_escapes_commit_messages(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    repo = make_repo(tmp_path)
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    h = json.loads(out)
    assert h["steps"] and h["left_out"]
    code, out, err = cli(capsys, "report", repo / RUN, "--out", tmp_path / "rep", "--history", repo / RUN)
    assert code == 0, err
    text = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    got = [
        (
            a["data-commit"],
            a["data-metric"],
            a["data-direction"],
            float(a["data-mean-diff"]),
            float(a["data-p"]),
            float(a["data-p-holm"]),
            cells[5],
        )
        for a, cells in page.rows
    ]
    want = [
        (s["commit"], s["metric"], s["direction"], s["mean_diff"], s["p"], s["p_holm"], s["message"])
        for s in h["steps"]
    ]
    assert got == want  # the message cell reads as the commit's message: text, not markup
    assert ("a", {"href": "#history"}) in page.tags and any(a.get("id") == "history" for _t, a in page.tags)
    assert not [a for t, a in page.tags if t == "script" or "onerror" in a]  # nothing of the hostile message is markup
    assert HOSTILE not in text
    refs = [
        a.get("src") or a.get("href") for t, a in page.tags if t in ("img", "a") and (a.get("src") or a.get("href"))
    ]
    local = [r for r in refs if not r.startswith(("#", "http:", "https:"))]
    history = [r for r in local if r.startswith("history/")]
    assert len({r for r in history if r.endswith(".png")}) == len(h["points"][0]["metrics"])
    missing = [r for r in local if not (tmp_path / "rep" / r).is_file()]
    assert not missing, missing
    assert all((tmp_path / "rep" / r).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for r in history)
    for x in h["left_out"]:
        assert x["commit"][:7] in text.split('id="history-left-out"', 1)[1].split("</ul>", 1)[0]


def test_a_history_source_inside_the_report_folder_is_refused(tmp_path, capsys):
    repo = make_repo(tmp_path)
    code, out, err = cli(capsys, "report", repo / RUN, "--out", repo / "results", "--history", repo / RUN)
    assert code != 0 and "--out" in err and "Traceback" not in err, err


def test_a_page_of_selection_runs_gains_the_history_section_too(tmp_path, capsys):
    """The section is the frame's: a selection page shows it (in the navigation too), with the steps of
    `pstbench history --json` over the same runs in order (McNemar, Holm over the history)."""
    from helpers.selection_runs import BAD, GOOD, pattern, score

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    runs = [
        score(tmp_path, n, demo, params, pattern(seed, rates))
        for n, seed, rates in (("g1", 1, GOOD), ("b1", 2, BAD), ("g2", 3, GOOD))
    ]
    capsys.readouterr()
    code, out, err = cli(capsys, "history", *runs, "--json")
    assert code == 0, err
    h = json.loads(out)
    assert h["steps"]
    code, out, err = cli(capsys, "report", runs[-1], "--out", tmp_path / "rep", "--history", *runs)
    assert code == 0, err
    page = Page()
    page.feed((tmp_path / "rep" / "index.html").read_text(encoding="utf-8"))
    got = [
        (a["data-source"], a["data-metric"], a["data-direction"], float(a["data-p-holm"])) for a, _cells in page.rows
    ]
    assert got == [(s["source"], s["metric"], s["direction"], s["p_holm"]) for s in h["steps"]]
    assert ("a", {"href": "#history"}) in page.tags
    imgs = [a["src"] for t, a in page.tags if t == "img" and a.get("src", "").startswith("history/")]
    assert imgs and all((tmp_path / "rep" / r).is_file() for r in imgs)


def test_report_history_takes_metric_and_its_plots_say_order_date_and_direction(tmp_path, capsys, monkeypatch):
    """Issue #53 item 1: `report --history SOURCE --metric M ...` follows the metrics named (as `history --metric`),
    and `--metric` without `--history` is one line; each plot's x-axis names the points by order (oldest first),
    commit date and commit (read here with git), and its title carries the metric's direction (PSNR ↑, LPIPS ↓)."""
    from matplotlib.axes import Axes

    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    repo = make_repo(tmp_path)
    titles, ticks = [], []
    real_title, real_ticks = Axes.set_title, Axes.set_xticklabels
    monkeypatch.setattr(Axes, "set_title", lambda ax, t, *a, **k: (titles.append(t), real_title(ax, t, *a, **k))[1])
    monkeypatch.setattr(
        Axes, "set_xticklabels", lambda ax, ls, *a, **k: (ticks.append(list(ls)), real_ticks(ax, ls, *a, **k))[1]
    )
    code, out, err = cli(
        capsys, "report", repo / RUN, "--out", tmp_path / "rep", "--history", repo / RUN, "--metric", "psnr", "lpips"
    )
    assert code == 0, err
    text = (tmp_path / "rep" / "index.html").read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    imgs = [a["src"] for t, a in page.tags if t == "img" and a.get("src", "").startswith("history/")]
    assert imgs == ["history/01-psnr.png", "history/02-lpips.png"]
    mine = [t for t in titles if t.endswith(": value and interval per point")]  # the page's other figures have theirs
    assert mine == ["psnr ↑: value and interval per point", "lpips ↓: value and interval per point"]
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--reverse", "--format=%H %cI"], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    commits = [line.split() for line in log if line]
    points = [commits[i] for i in (0, 1, 2, 4)]  # the fourth commit's run is incomplete: left out
    want = [f"#{k + 1} {date[:10]} {sha[:7]}" for k, (sha, date) in enumerate(points)]
    assert [t for t in ticks if t and str(t[0]).startswith("#")] == [want, want]
    code, out, err = cli(capsys, "report", repo / RUN, "--out", tmp_path / "rep2", "--metric", "psnr")
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert code != 0 and len(errors) == 1 and "--metric" in errors[0] and "--history" in errors[0], err

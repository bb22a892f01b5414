"""`pstbench report` over selection runs, the Answers (issue #42 "Answers"): a model judge's answer texts per
trial and prompt type in `<details>`, escaped and cut to a bound, the unparseable answers and the API errors
marked; a scoring function's run shows none; a published run says once that its answers file is not here."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.hub_server import FakeHub, point_at
from helpers.selection_runs import GOOD, pattern, write_answers

from pytest_pstbench.cli import main

SOURCE = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]
HOSTILE = "<script>alert(1)</script>\x1b[2J\x1b]0;owned\x07" + "x" * 10000
TOKEN = "hf_pstbenchSECRETtoken0123456789"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A scoring function's run and a model's run scored from an answers file whose first task (k >= 3) has a
    hostile response (trial 0 pick_best, parseable at its end), an unparseable one (trial 0 pick_worst) and
    an API error (trial 1 pick_best)."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.permutations import orders_for
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    root = tmp_path_factory.mktemp("selanswers")
    judge = f"{SOURCE / 'examples' / 'judges' / 'no_reference.py'}:sharpness"
    assert main(["vab", "score", "--track", "vab-demo", "--judge", judge, "--results", str(root / "results")]) == 0
    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    task = next(t for t in demo.tasks if t.k >= 3)
    best = params.labels[orders_for(task, params)[0].index(task.best)]
    path = write_answers(root / "model.jsonl", demo, params, pattern(1, GOOD))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for line in lines:
        key = (line["task_id"], line["trial"], line["prompt_type"])
        base = {"task_id": task.id, "trial": line["trial"], "prompt_type": line["prompt_type"]}
        if key == (task.id, 0, "pick_best"):
            line.clear(), line.update(base, response=f"{HOSTILE}\nBEST: {best}")
        elif key == (task.id, 0, "pick_worst"):
            line.clear(), line.update(base, response="I cannot tell <b>which</b>.")
        elif key == (task.id, 1, "pick_best"):
            line.clear(), line.update(base, error="RateLimitError: <i>429</i>")
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert (
        main(
            [
                "vab",
                "score",
                "--track",
                "vab-demo",
                "--answers",
                str(path),
                "--name",
                "model",
                "--results",
                str(root / "results"),
            ]
        )
        == 0
    )
    return root, task.id, [root / "results" / "vab-demo" / "sharpness", root / "results" / "vab-demo" / "model"]


class Answers(HTMLParser):
    """The page's answer blocks: per (judge, task) its <details> as (attrs, summary text, body text)."""

    def __init__(self):
        super().__init__()
        self.blocks: dict[tuple[str, str], list] = {}
        self._block = self._details = None
        self._in = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "div" and a.get("class") == "answers":
            self._block = self.blocks.setdefault((a["data-judge"], a["data-task"]), [])
        elif tag == "details" and self._block is not None:
            self._details = [a, "", ""]
            self._block.append(self._details)
        elif tag in ("summary", "pre", "p") and self._details is not None:
            self._in = tag

    def handle_endtag(self, tag):
        if tag == "details":
            self._details = None
        elif tag == "div" and self._details is None:
            self._block = None
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._details is not None and self._in == "summary":
            self._details[1] += data
        elif self._details is not None and self._in in ("pre", "p"):
            self._details[2] += data


def report(tmp_path, *runs) -> tuple[str, Answers]:
    out = tmp_path / "rep"
    assert main(["report", *map(str, runs), "--out", str(out), "--max-tasks", "0"]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    parser = Answers()
    parser.feed(html)
    return html, parser


def test_answer_texts_render_escaped_cut_and_marked(runs, tmp_path):
    """Issue #42 Answers: the hostile response is text (no markup, no ESC byte) cut to 2,000 characters, saying
    so; the unparseable answer and the API error are marked; every other trial shows its labels unmarked."""
    root, tid, paths = runs
    html, page = report(tmp_path, *paths)
    assert "<script>" not in html and "\x1b" not in html and "<i>429" not in html and "<b>which" not in html
    details = {(a["data-trial"], a["data-prompt"]): (a, summary, body) for a, summary, body in page.blocks[("2", tid)]}
    a, summary, body = details[("0", "pick_best")]
    assert a["data-status"] == "ok" and "unparseable" not in summary and "API error" not in summary
    assert body.count("<script>alert(1)</script>") == 1  # the text, as the parser reads the escaped page
    assert "\\x1b[2J" in body  # the ESC byte shown as an escape
    length = len(HOSTILE) + len("\nBEST: X")
    assert f"{length:,} characters (cut: the first 2,000 shown)" in body
    pre = re.search(r'data-prompt="pick_best"[^>]*>.*?<pre>(.*?)</pre>', html, re.S).group(1)
    assert "BEST:" not in pre  # cut before the end
    a, summary, body = details[("0", "pick_worst")]
    assert a["data-status"] == "unparseable" and "unparseable" in summary and "no WORST: line" in summary
    assert "I cannot tell <b>which</b>." in body
    a, summary, body = details[("1", "pick_best")]
    assert a["data-status"] == "error" and "API error" in summary and "RateLimitError: <i>429</i>" in body
    marked = sorted(k for k, (a, _, _) in details.items() if a["data-status"] != "ok")
    assert marked == [("0", "pick_worst"), ("1", "pick_best")]
    run = json.loads((paths[1] / "run.json").read_text())
    assert {(p["task"], str(p["trial"]), p["prompt_type"]) for p in run["answers"]["problems"]} == {
        (tid, t, p) for t, p in marked
    }


def test_a_function_judge_shows_no_answers(runs, tmp_path):
    """Issue #42 Answers: a scoring function's run has no answer texts (only the model judge has blocks)."""
    _, _, paths = runs
    _, page = report(tmp_path, *paths)
    assert page.blocks and {judge for judge, _ in page.blocks} == {"2"}
    html, page = report(tmp_path / "f", paths[0])
    assert page.blocks == {} and 'class="answers"' not in html


def test_an_answers_file_changed_since_scoring_is_not_shown(runs, tmp_path):
    """Issue #42 Answers: the texts shown are those the run was scored from (sha256 of run.json), or none."""
    root, _, paths = runs
    answers = root / "model.jsonl"
    kept = answers.read_bytes()
    try:
        answers.write_bytes(kept + b"\n")
        html, page = report(tmp_path, paths[1])
    finally:
        answers.write_bytes(kept)
    assert page.blocks == {} and "has changed since the run was scored" in html


def test_a_published_run_says_once_its_answers_are_not_here(runs, tmp_path, monkeypatch, capsys):
    """Issue #42 Answers: a published model run (hf://) has no answers file here; the page says so once."""
    _, _, paths = runs
    hub = FakeHub().start()
    try:
        hub.tokens.add(TOKEN)
        point_at(hub, tmp_path, monkeypatch)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
        assert main(["runs", "push", str(paths[1]), "hf://datasets/me/rep/vab-demo/model", "--create"]) == 0
        capsys.readouterr()
        html, page = report(tmp_path, "hf://datasets/me/rep@main/vab-demo/model")
    finally:
        hub.stop()
    assert page.blocks == {}
    assert html.count("a published run (hf://) holds no answers file") == 1

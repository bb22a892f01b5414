"""`pstbench report` over selection runs (issue #42): vab-demo runs of two judges (a scoring function and an
answers file with a hostile run name) made in-process; the page's numbers are `pstbench table`'s, its picks
and lists are per_task.csv's, every text is escaped, `--max-tasks` bounds the gallery, and what it cannot
draw is refused in one line."""

from __future__ import annotations

import csv
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.selection_runs import GOOD, pattern, score

from pytest_pstbench.cli import main

SOURCE = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]
HOSTILE = '<img src=x onerror=alert(1)>&"j'


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    root = tmp_path_factory.mktemp("selreport")
    judge = f"{SOURCE / 'examples' / 'judges' / 'no_reference.py'}:sharpness"
    assert main(["vab", "score", "--track", "vab-demo", "--judge", judge, "--results", str(root / "results")]) == 0
    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    model = score(root, HOSTILE, demo, params, pattern(1, GOOD))
    return root, [root / "results" / "vab-demo" / "sharpness", model]


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs, self.hrefs, self.ids, self.items = [], [], set(), []
        self.cells = []  # (attrs, text) of elements with data-* attributes
        self._open = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.ids.update([a["id"]] if "id" in a else [])
        if tag in ("img", "script", "link"):
            self.srcs.append(a.get("src") or a.get("href") or f"<{tag}>")
        if tag == "a":
            self.hrefs.append(a.get("href"))
        if tag in ("td", "li") and any(k.startswith("data-") for k in a):
            self._open.append((tag, a, []))

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            _, a, text = self._open.pop()
            self.cells.append((a, "".join(text).strip()))

    def handle_data(self, data):
        for _, _, text in self._open:
            text.append(data)


def build(runs, tmp_path, *extra) -> tuple[Path, Page, str]:
    out = tmp_path / "rep"
    assert main(["report", *map(str, runs), "--out", str(out), *extra]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    page = Page()
    page.feed(html)
    return out, page, html


def per_task(run: Path) -> dict[str, dict[str, str]]:
    with open(run / "per_task.csv", newline="", encoding="utf-8") as fh:
        return {r["task_id"]: r for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def built(runs, tmp_path_factory):
    return build(runs[1], tmp_path_factory.mktemp("page"), "--max-tasks", "0")


def test_summary_is_pstbench_tables_numbers_and_marks(runs, built, capsys):
    """issue #42: every overall number of each run's summary.json, in the digits (and marks) of `pstbench table`."""
    _, page, _ = built
    capsys.readouterr()
    assert main(["table", *map(str, runs[1]), "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    shown = {(a["data-row"], a["data-col"]): (a, text) for a, text in page.cells if "data-row" in a}
    n = 0
    for col in table["columns"]:
        for row, cell in col["cells"].items():
            a, text = shown[(row, col["label"])]
            assert text.rstrip(" †") == cell["text"]
            assert text.endswith("†") == bool(cell.get("worse"))
            assert ("best" in a["class"].split()) == (cell.get("rank") == 1)
            n += 1
    assert n == len(shown) and n == 6 * 4  # Random, the human row, two judges
    for run in runs[1]:  # the page's value is summary.json's overall mean of the column's metric and aggregation
        s = json.loads((run / "summary.json").read_text())
        overall = next(c for c in s["cells"] if c["group"] == "overall")
        for col in table["columns"]:
            a, _ = shown[(s["name"], col["label"])]
            assert float(a["data-mean"]) == overall["metrics"][col["metric"]][col["aggregation"]]["mean"]
    assert any(r.startswith("Human (leave-one-out") for r, _ in shown) and any(r == "Random" for r, _ in shown)


def test_picks_and_lists_are_per_task_csvs(runs, built):
    """issue #42: each judge's picks per trial are per_task.csv's; "wrong" and "moved" list exactly its tasks."""
    out, page, _ = built
    picks = [(a, t) for a, t in page.cells if "data-pick" in a]
    cols = {"best": ("best_t",), "worst": ("worst_t",), "best+worst": ("bw_best_t", "bw_worst_t")}
    for i, run in enumerate(runs[1], start=1):
        rows = per_task(run)
        mine = [a for a, _ in picks if a["data-judge"] == str(i)]
        assert len(mine) == len(rows) * 3 * 3
        for a in mine:
            row = rows[a["data-task"]]
            assert a["data-cols"] == ",".join(row[f"{c}{a['data-trial']}"] for c in cols[a["data-pick"]])
        wrong = [
            t for t, r in rows.items() if any(r[f"{m}_t{k}"] == "0" for m in ("top1", "bot1", "tb1") for k in range(3))
        ]
        moved = [
            t
            for t, r in rows.items()
            if any(
                len({r[f"{c}{k}"] for k in range(3)} - {""}) > 1
                for c in ("best_t", "worst_t", "bw_best_t", "bw_worst_t")
            )
        ]
        assert wrong and (moved or i == 1)  # a scoring function picks the same candidate in every order
        for name, want in (("wrong", wrong), ("moved", moved)):
            listed = [
                a["data-task"]
                for a, _ in page.cells
                if "data-task" in a and "data-pick" not in a and a.get("data-list") == f"{name}-{i}"
            ]
            assert listed == want, name
    for src in page.srcs:  # offline: every image is a file of the page's folder
        assert not src.startswith(("http:", "https:", "//", "/", "<")), src
        assert (out / src).is_file(), src
    assert len([s for s in page.srcs if s.startswith("thumbs/")]) == sum(
        int(r["k"]) for r in per_task(runs[1][0]).values()
    )
    assert (
        len([s for s in page.srcs if s.startswith("figures/") and "/bias-" not in s]) == 6
    )  # bias: test_selection_report_bias
    assert all(h.startswith("#") and h[1:] in page.ids or (out / h).is_file() for h in page.hrefs)


def test_a_hostile_run_name_renders_as_text(built):
    """issue #42: a run name with markup of its own is text on the page (no element of it)."""
    _, page, html = built
    assert "<img src=x" not in html and "onerror=alert(1)>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;&amp;&quot;j" in html
    assert all(s != "x" for s in page.srcs)


def test_max_tasks_bounds_the_gallery_and_names_the_rest(runs, tmp_path):
    """issue #42: --max-tasks N shows N tasks, names the ones left out; the lists still name every task."""
    out, page, html = build(runs[1], tmp_path, "--max-tasks", "4")
    tasks = list(per_task(runs[1][1]))
    assert {f"task-{i}" for i in range(1, 5)} <= page.ids and "task-5" not in page.ids
    assert "left-out" in page.ids
    left = html[html.index('id="left-out"') :].split("</p>")[0]
    assert all(t in left for t in tasks[4:]) and not any(f" {t}," in left for t in tasks[:4])
    assert len(list((out / "thumbs").iterdir())) == sum(int(per_task(runs[1][0])[t]["k"]) for t in tasks[:4])
    listed = [a["data-task"] for a, _ in page.cells if a.get("data-list") == "wrong-2"]
    assert any(tasks.index(t) >= 4 for t in listed)


def error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_old_refusal_is_gone(runs, tmp_path, capsys):
    """issue #42: a selection run right after the quick start is drawn, not 'missing metrics.csv'."""
    code = main(["report", str(runs[1][0]), "--out", str(tmp_path / "one")])
    err = capsys.readouterr().err
    assert code == 0 and "metrics.csv" not in err and (tmp_path / "one" / "index.html").is_file()


def test_a_paired_and_a_selection_run_are_refused_in_one_line(runs, tmp_path, capsys):
    """issue #42: a paired run and a selection run in one call: one line naming both kinds and a fix."""
    from helpers.paired_runs import METRICS, write_run

    paired = write_run(tmp_path / "p", "m", {"p1": {m: 0.5 for m in METRICS}})
    code = main(["report", str(runs[1][0]), str(paired), "--out", str(tmp_path / "rep")])
    line = error_line(capsys.readouterr().err)
    assert code == 2 and "paired run" in line and "selection run" in line and "fix:" in line
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--max-pairs", "3"], ["--max-pairs 3", "--max-tasks"]),
        (["--sensitivity", "x"], ["--sensitivity x", "selection runs"]),
    ],
)
def test_options_of_the_paired_page_are_refused(runs, tmp_path, capsys, argv, words):
    code = main(["report", str(runs[1][0]), "--out", str(tmp_path / "rep"), *argv])
    line = error_line(capsys.readouterr().err)
    assert code == 2 and all(w in line for w in words)


def test_runs_of_another_revision_are_refused(runs, tmp_path, capsys):
    """issue #42: runs of different dataset revisions (or tracks, protocols) in one call: one line naming the field."""
    other = tmp_path / "other"
    shutil.copytree(runs[1][1], other)
    record = json.loads((other / "run.json").read_text())
    record["dataset"]["revision"] = "0000"
    (other / "run.json").write_text(json.dumps(record))
    code = main(["report", str(runs[1][0]), str(other), "--out", str(tmp_path / "rep")])
    line = error_line(capsys.readouterr().err)
    assert code == 2 and "run.json dataset.revision" in line and str(other) in line

"""`pstbench report` over selection runs, the Position bias section (issue #42): per judge a figure (a file of the
page's folder) and the numbers of selection/position_bias.py as text, checked for one judge against an independent
computation (a plain loop over per_task.csv's picks and the track's orders, scipy's chi-square); a hostile judge
name is text there; and the page is built from one read of each run (not one for the page and one for its table)."""

from __future__ import annotations

import csv
import math
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers.selection_runs import GOOD, pattern, score

from pytest_pstbench.cli import main

SOURCE = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]
HOSTILE = '<i onmouseover=alert(1)>judge&"'


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    root = tmp_path_factory.mktemp("selbias")
    judge = f"{SOURCE / 'examples' / 'judges' / 'no_reference.py'}:sharpness"
    assert main(["vab", "score", "--track", "vab-demo", "--judge", judge, "--results", str(root / "results")]) == 0
    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    return [root / "results" / "vab-demo" / "sharpness", score(root, HOSTILE, demo, params, pattern(4, GOOD))]


class BiasPage(HTMLParser):
    """The Position bias section: its cells with data-field, its headings' text, the images it references."""

    def __init__(self):
        super().__init__()
        self.in_bias = False
        self.depth = 0
        self.fields, self.all_k, self.headings, self.srcs, self.all_srcs = [], [], [], [], []
        self._h3 = None
        self._td = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.all_srcs.append(a.get("src"))
        if tag == "section":
            self.in_bias = a.get("id") == "bias"
        if not self.in_bias:
            return
        if tag == "img":
            self.srcs.append(a.get("src"))
        if tag == "h3":
            self._h3 = []
        elif self._h3 is not None:
            self.headings.append(f"<{tag}>")  # an element inside a heading: markup of the name's own
        if tag == "td" and "data-field" in a:
            self._td = a
        if tag == "span" and a.get("data-k") == "all":
            self.all_k.append(a)

    def handle_endtag(self, tag):
        if tag == "section":
            self.in_bias = False
        if tag == "h3" and self._h3 is not None:
            self.headings.append("".join(self._h3))
            self._h3 = None
        if tag == "td" and self._td is not None:
            self.fields.append(self._td)
            self._td = None

    def handle_data(self, data):
        if self._h3 is not None:
            self._h3.append(data)


@pytest.fixture(scope="module")
def built(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("biaspage") / "rep"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    page = BiasPage()
    page.feed((out / "index.html").read_text(encoding="utf-8"))
    return out, page


def _summary(run: Path) -> dict:
    import json

    return json.loads((run / "summary.json").read_text(encoding="utf-8"))


def test_the_numbers_are_position_bias_pys(runs, built):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.position_bias import rows
    from pytest_pstbench.selection.protocol import SelectionParams

    _, page = built
    params = SelectionParams.of(load_protocol("vab"))
    shown = {(f["data-judge"], f["data-role"], f["data-k"], f["data-field"]): f["data-value"] for f in page.fields}
    for j, run in enumerate(runs, 1):
        summary = _summary(run)
        want = rows(summary, params)
        assert want
        for r in want:
            for key in ("n", "chi2", "df", "p", "effect_w", "tvd", "same_image", "same_slot"):
                assert shown.pop((str(j), r["role"], str(r["k"]), key)) == repr(r[key])
        for role, entry in summary["position_bias"]["roles"].items():
            got = next(a for a in page.all_k if a["data-judge"] == str(j) and a["data-role"] == role)
            assert got["data-p"] == repr(entry["all_k"]["p"])
    assert not shown


def test_one_judges_numbers_against_scipy(runs, built):
    """An independent computation for the model judge, roles best and worst: the observed position counts from
    per_task.csv's picks and the track's display orders, the position-blind expectation as the docstring of
    position_bias.py states it (a plain loop), scipy's chi-square statistic (its permutation p-value is checked
    against a brute-force enumeration in tests/selection/test_position_bias.py)."""
    from scipy.stats import chisquare

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.permutations import orders_for
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    _, page = built
    params = SelectionParams.of(load_protocol("vab"))
    tasks = {t.id: t for t in resolve_selection_track("vab-demo").tasks}
    with open(runs[1] / "per_task.csv", newline="", encoding="utf-8") as fh:
        per_task = list(csv.DictReader(fh))
    shown = {
        (f["data-role"], f["data-k"], f["data-field"]): float(f["data-value"])
        for f in page.fields
        if f["data-judge"] == "2" and f["data-value"] != "None"
    }
    checked = 0
    for role in ("best", "worst"):
        for k in sorted({int(r["k"]) for r in per_task}):
            obs, exp = [0] * k, [0.0] * k
            for r in (r for r in per_task if int(r["k"]) == k):
                orders = orders_for(tasks[r["task_id"]], params)
                picks = {t: int(r[f"{role}_t{t}"]) for t in range(params.trials) if r[f"{role}_t{t}"] != ""}
                for t, x in picks.items():
                    obs[orders[t].index(x)] += 1
                    for s in picks:
                        exp[orders[s].index(x)] += 1 / len(picks)
            keep = [i for i in range(k) if exp[i] > 1e-12]
            stat = chisquare([obs[i] for i in keep], [exp[i] for i in keep]).statistic
            n = sum(obs)
            assert shown[(role, str(k), "n")] == n
            assert shown[(role, str(k), "chi2")] == pytest.approx(stat, rel=1e-9, abs=1e-12)
            assert 0 < shown[(role, str(k), "p")] <= 1
            assert shown[(role, str(k), "effect_w")] == pytest.approx(math.sqrt(stat / n), rel=1e-9, abs=1e-12)
            checked += 1
    assert checked >= 4


def test_each_judge_has_a_figure_in_the_pages_folder(runs, built):
    from PIL import Image

    out, page = built
    assert len(page.srcs) == len(runs)
    for src in page.all_srcs:  # every image the page references, the bias figures among them
        assert not src.startswith(("http:", "https:", "//", "/")), src
        assert (out / src).is_file(), src
    for src in page.srcs:
        with Image.open(out / src) as im:
            assert im.format == "PNG" and im.size[0] > 100


def test_a_hostile_judge_name_is_text_in_the_section(built):
    _, page = built
    assert HOSTILE in page.headings and not any(h.startswith("<") and h.endswith(">") for h in page.headings)


def test_the_runs_are_read_once(runs, tmp_path, monkeypatch):
    """issue #42: the page and its summary table read each run's per_task.csv once and validate each run once."""
    import pytest_pstbench.selection.compare as compare
    import pytest_pstbench.selection.runs as selruns
    from pytest_pstbench.core.store.folder import read_item_csv as real_read

    reads, checks = [], []
    real_check = compare._check_against_files

    def read(path, *a, **kw):
        reads.append(Path(path))
        return real_read(path, *a, **kw)

    def check(run, *a, **kw):
        checks.append(run.path)
        return real_check(run, *a, **kw)

    monkeypatch.setattr(selruns, "read_item_csv", read)
    monkeypatch.setattr(compare, "_check_against_files", check)
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "rep")]) == 0
    assert sorted(reads) == sorted(r / "per_task.csv" for r in runs)
    assert sorted(checks) == sorted(runs)

"""`pstbench board` (issue #52): the ranks equal 1 + the number of methods significantly better, computed here
independently from the runs' metrics.csv (scipy's Wilcoxon with the protocol's settings, a hand-written Holm);
two methods with the same outputs share a rank; hostile run names are escaped; board.json and board.csv hold the
page's numbers; a selection board over vab-demo answers; a published path of 50+ runs on the local fake Hub."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.dom import HAS_CHROMIUM, Elements, chromium
from helpers.hub_server import hub  # noqa: F401 (a fixture)
from helpers.paired_runs import scores_from, write_run
from helpers.selection_runs import selection  # noqa: F401 (a module fixture)
from scipy.stats import wilcoxon

from pytest_pstbench.cli import main as cli_main

N = 14
HOSTILE = '<img src=x onerror=alert(1)>"&\u202e'
PROTOCOL = yaml.safe_load((Path(__file__).resolve().parents[2] / "protocols" / "pstbench.yaml").read_text())


def method_scores(seed: int, offset: float) -> dict:
    rng = np.random.default_rng(seed)
    return scores_from({"psnr": np.arange(N) * 0.5 + offset + rng.normal(0, 0.6, N)}, N)


def paired_results(root: Path, n_methods: int = 5) -> Path:
    """results/t/: Identity, methods m0.. at rising offsets (some separable, some not), m0's twin and a hostile name."""
    ident = write_run(root, "identity", scores_from({"psnr": np.arange(N) * 0.5 - 4}, N))
    rec = json.loads((ident / "run.json").read_text())
    (ident / "run.json").write_text(json.dumps({**rec, "method": {"method": "identity"}}))
    for k in range(n_methods):
        write_run(root, f"m{k}", method_scores(k, 0.45 * k))
    write_run(root, "twin", method_scores(0, 0.0))  # the same outputs as m0
    write_run(root, HOSTILE.replace("/", "_"), method_scores(99, 0.3))
    return root


def read_psnr(run_dir: Path) -> np.ndarray:
    with open(run_dir / "metrics.csv", newline="") as fh:
        return np.array([float(r["psnr"]) for r in csv.DictReader(fh)])


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, written out here (independent of core.stats.holm)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (m - step) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def expected_ranks(run_dirs: dict[str, Path]) -> dict[str, int]:
    cmp = PROTOCOL["comparison"]
    threshold = cmp["tie_threshold"]["psnr"]
    names = list(run_dirs)
    pairs, ps, signs = [], [], []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            d = read_psnr(run_dirs[b]) - read_psnr(run_dirs[a])
            d[np.abs(d) < threshold] = 0.0
            if not d.any():
                p, s = 1.0, 0.0
            else:
                p = wilcoxon(
                    d, zero_method=cmp["zero_method"], alternative=cmp["alternative"], method=cmp["method"]
                ).pvalue
                s = float(np.median(d[d != 0]))  # direction: which run is better
            pairs.append((a, b))
            ps.append(float(p))
            signs.append(s)
    better = {n: 0 for n in names}
    for (a, b), p, s in zip(pairs, holm(ps), signs):
        if p < cmp["alpha"]:
            better[a if s > 0 else b] += 1  # psnr: higher is better
    return {n: 1 + k for n, k in better.items()}


def board(capsys, *args) -> tuple[int, str, str]:
    code = cli_main(["board", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def page_numbers_match(site: Path, data: dict) -> None:
    rows = list(csv.DictReader(io.StringIO((site / "board.csv").read_text())))
    for t in data["tracks"]:
        page = (site / t["folder"] / "index.html").read_text()
        for row in t["rows"]:
            for m in t["metrics"]:
                v = row["values"][m]
                dec = t["decimals"][m]
                if v["mean"] is not None:
                    assert f"{v['mean']:.{dec}f}" in page
                if v["low"] is not None:
                    assert f"[{v['low']:.{dec}f}, {v['high']:.{dec}f}]" in page
                line = next(r for r in rows if (r["track"], r["row"], r["metric"]) == (t["track"], row["name"], m))
                assert float(line["mean"]) == v["mean"] and line["rank"] == str(row["rank"] or "")


def test_ranks_are_one_plus_the_methods_significantly_better(tmp_path, capsys):
    results = paired_results(tmp_path / "results")
    code, out, err = board(capsys, tmp_path / "results", "--out", tmp_path / "site")
    assert code == 0, err
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    (t,) = data["tracks"]
    got = {r["name"]: r["rank"] for r in t["rows"] if not r["reference"]}
    dirs = {p.name: p for p in sorted((results / "t").iterdir()) if p.name != "identity"}
    assert got == expected_ranks(dirs)
    assert got["twin"] == got["m0"]  # the same outputs: the tests cannot separate them
    assert len(set(got.values())) > 1  # some methods are separable, so the check has teeth
    assert [r["name"] for r in t["rows"] if r["reference"]] == ["identity"]
    assert t["rows"][0]["rank"] is None
    order = t["ranking"]["order"]
    sig = {frozenset((x["a"], x["b"])) for x in t["ranking"]["tests"] if x["verdict"] != "no significant difference"}
    separable = sum(frozenset(p) in sig for p in zip(order, order[1:]))
    assert t["ranking"]["separable"] == separable
    page = (tmp_path / "site" / t["folder"] / "index.html").read_text()
    assert f"{separable} of {len(order) - 1}</b> adjacent pairs are separable" in page
    page_numbers_match(tmp_path / "site", data)


def test_hostile_names_are_escaped_and_bad_runs_listed(tmp_path, capsys):
    results = paired_results(tmp_path / "results", n_methods=2)
    bad = write_run(results, "broken", method_scores(5, 0.0))
    (bad / "summary.json").write_text("{not json")
    code, _, err = board(capsys, results, "--out", tmp_path / "site")
    assert code == 1 and "1 run(s) left out" in err and "broken/summary.json" in err  # written, and said
    page = (tmp_path / "site" / "t" / "index.html").read_text()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "\u202e" not in page
    assert "broken" in page and "Left out (1)" in page  # the run that fails validation, with its reason
    # an earlier board is replaced whole; a folder of something else is refused
    shutil.rmtree(bad)
    assert board(capsys, results, "--out", tmp_path / "site")[0] == 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    code, _, err = board(capsys, results, "--out", tmp_path / "other")
    assert code != 0 and "holds no earlier pstbench board" in err


def test_selection_board(selection, tmp_path, capsys):  # noqa: F811
    code, _, err = board(capsys, *selection.values(), "--out", tmp_path / "site")
    assert code == 0, err
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    (t,) = data["tracks"]
    assert t["kind"] == "selection" and t["track"] == "vab-demo"
    ranks = {r["name"]: r["rank"] for r in t["rows"]}
    assert ranks["good"] <= ranks["bad"] and ranks["good2"] <= ranks["bad"]
    assert "." in t["primary"]  # METRIC.OUTCOME
    page_numbers_match(tmp_path / "site", data)
    code, _, err = board(capsys, *selection.values(), "--out", tmp_path / "s2", "--metric", "nope")
    assert code != 0 and "--metric nope" in err


def test_published_path_of_many_runs(hub, tmp_path, capsys):
    results = tmp_path / "results"
    paired_results(results, n_methods=0)
    for k in range(50):
        write_run(results, f"pub{k:02d}", method_scores(100 + k, 0.05 * k))
    files = {
        f"t/{run.name}/{f.name}": f.read_bytes() for run in sorted((results / "t").iterdir()) for f in run.iterdir()
    }
    sha = "c" * 40
    hub.add_commit("me/board", sha, files, refs=["main"], lfs=False)
    code, out, err = board(capsys, "hf://datasets/me/board@main/t", "--out", tmp_path / "site")
    assert code == 0, err
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    (t,) = data["tracks"]
    assert len(t["rows"]) == 53  # identity, twin... 50 published methods + twin + hostile + identity
    assert all(r["provenance"]["uri"].startswith(f"hf://datasets/me/board@{sha}/t/") for r in t["rows"])
    page = (tmp_path / "site" / "t" / "index.html").read_text()
    assert f"hf://datasets/me/board@{sha}/t/pub00" in page


SCRIPT_NAME = "<script>alert(1)"  # an unescaped name would open a script element that swallows the page


@pytest.mark.skipif(not HAS_CHROMIUM, reason="chromium is not installed")
def test_page_renders_in_headless_chromium(tmp_path, capsys):
    paired_results(tmp_path / "results", n_methods=3)
    write_run(tmp_path / "results", SCRIPT_NAME, method_scores(7, 0.1))
    assert board(capsys, tmp_path / "results", "--out", tmp_path / "site")[0] == 0
    page = (tmp_path / "site" / "t" / "index.html").as_uri()
    parsed = Elements()
    parsed.feed(chromium("--dump-dom", page))
    # the DOM Chromium built: no element came from a run name, each name is shown literally, the table is whole
    assert "script" not in parsed.tags and "img" not in parsed.tags
    text = "".join(parsed.text)
    assert HOSTILE.replace("\u202e", "\\u202e") in text and SCRIPT_NAME in text  # the override shown as an escape
    assert parsed.tags.count("tr") == 2 * (1 + 3 + 1 + 1 + 1) + 2  # board and provenance: 7 rows and a header each
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,800", page)
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape[:2] == (800, 1200) and len(np.unique(img.reshape(-1, 3), axis=0)) > 10
    inked = (img.min(axis=2) < 200).mean(axis=1) > 0.01  # rows of the screenshot with text or rules on them
    assert inked.sum() > 200  # the header, the note and the table's rows, not a blank or an error page


def compare_json(capsys, *args) -> dict:
    assert cli_main(["compare", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_board_pvalues_are_compares(tmp_path, capsys):
    """The board's tests (only the test, no interval) give the p-value `pstbench compare` gives for the same pair."""
    results = paired_results(tmp_path / "results", n_methods=3)
    assert board(capsys, results, "--out", tmp_path / "site")[0] == 0
    (t,) = json.loads((tmp_path / "site" / "board.json").read_text())["tracks"]
    tests = t["ranking"]["tests"]
    assert len(tests) == 10  # 5 methods (identity is a reference row)
    for x in tests[::4]:
        got = compare_json(capsys, results / "t" / x["a"], results / "t" / x["b"], "--metrics", "psnr")
        (row,) = got["tests"]
        assert (row["baseline"], row["candidate"]) == (x["a"], x["b"])
        assert row["pvalue"] == x["p"]
        assert row["diff_ci_low"] is not None  # compare still computes its interval


def uniform_random_accuracy(manifest: Path) -> dict[str, float]:
    """Per METRIC.OUTCOME, the expected accuracy of a judge picking uniformly at random among each task's candidates
    (read from the track's manifest): best or worst right with p = 1/k, both with 1/(k(k-1)) (an ordered pair of two
    distinct candidates); pass^3: all three independent trials right, p^3; averaged over the tasks."""
    ks = [len(task["candidates"]) for task in yaml.safe_load(manifest.read_text())["tasks"]]
    p = {"top1": [1 / k for k in ks], "bot1": [1 / k for k in ks], "tb1": [1 / (k * (k - 1)) for k in ks]}
    out = {}
    for m, ps in p.items():
        out[f"{m}.ap@1"] = sum(ps) / len(ps)
        out[f"{m}.pass^3"] = sum(x**3 for x in ps) / len(ps)
    return out


def test_selection_reference_rows(selection, tmp_path, capsys):  # noqa: F811
    from pytest_pstbench.selection.demo import build_vab_demo

    runs = list(selection.values())
    assert board(capsys, *runs, "--out", tmp_path / "site")[0] == 0
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    (t,) = data["tracks"]
    refs = [r for r in t["rows"] if r["reference"]]
    assert [r["name"] for r in refs] == ["Random", "Human (leave-one-out, 10 experts)"]
    assert t["rows"][:2] == refs and all(r["rank"] is None for r in refs)  # first, not ranked
    tested = {name for x in t["ranking"]["tests"] for name in (x["a"], x["b"])}
    assert tested == {"good", "bad", "good2"}  # nor tested
    random_row, human_row = refs
    expected = uniform_random_accuracy(build_vab_demo())
    for key in t["metrics"]:
        assert random_row["values"][key]["mean"] == pytest.approx(expected[key], rel=1e-12)
        assert random_row["values"][key]["low"] is None
    # the same numbers as `pstbench table` shows for the same runs
    assert cli_main(["table", *map(str, runs), "--format", "json", "--out", str(tmp_path / "table.json")]) == 0
    capsys.readouterr()
    table = json.loads((tmp_path / "table.json").read_text())
    assert table["reference_rows"] == [r["name"] for r in refs]
    for col in table["columns"]:
        key = f"{col['metric']}.{col['aggregation']}"
        if key not in t["metrics"]:
            continue
        for row in refs:
            cell = col["cells"][row["name"]]
            v = row["values"][key]
            assert (v["mean"], v["low"], v["high"]) == (cell["value"], cell["ci_low"], cell["ci_high"])
    assert {f"{c['metric']}.{c['aggregation']}" for c in table["columns"]} >= set(t["metrics"])
    page = (tmp_path / "site" / t["folder"] / "index.html").read_text()
    assert '<tr class="ref"><td class="rank">ref.</td><td>Random</td>' in page
    assert "not ranked nor tested" in page and t["notes"] == []
    lines = list(csv.DictReader(io.StringIO((tmp_path / "site" / "board.csv").read_text())))
    assert {(x["row"], x["reference"], x["rank"]) for x in lines if x["row"] == "Random"} == {("Random", "1", "")}
    page_numbers_match(tmp_path / "site", data)


def test_selection_track_without_votes_says_so(tmp_path, capsys):
    """A track whose runs carry no human row: the board shows Random only and says why there is no human row."""
    from helpers.selection_runs import BAD, GOOD, pattern, write_answers

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.demo import build_vab_demo
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    track = tmp_path / "track"
    shutil.copytree(build_vab_demo().parent, track)
    manifest = track / "track.yaml"
    manifest.write_text("".join(ln for ln in manifest.read_text().splitlines(True) if not ln.startswith("votes:")))
    demo = resolve_selection_track(str(manifest))
    params = SelectionParams.of(load_protocol("vab"))
    for name, seed, rates in (("good", 1, GOOD), ("bad", 2, BAD), ("Random", 3, BAD)):
        answers = write_answers(tmp_path / f"{name}.jsonl", demo, params, pattern(seed, rates))
        args = ["--track", str(manifest), "--answers", str(answers), "--name", name, "--results", tmp_path / "results"]
        assert cli_main(["vab", "score", *map(str, args)]) == 0
    capsys.readouterr()
    code, _, err = board(capsys, tmp_path / "results", "--out", tmp_path / "site")
    assert code == 1 and "run name 'Random' is the name of a reference row" in err  # left out, and said
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    (t,) = data["tracks"]
    assert [r["name"] for r in t["rows"]] == ["Random", "good", "bad"]
    assert [r["name"] for r in t["rows"] if r["reference"]] == ["Random"]
    assert t["rows"][0]["values"]["top1.ap@1"]["mean"] == pytest.approx(uniform_random_accuracy(manifest)["top1.ap@1"])
    assert len(t["notes"]) == 1 and t["notes"][0].startswith("No human reference row: the track's runs carry no")
    assert "No human reference row" in (tmp_path / "site" / t["folder"] / "index.html").read_text()

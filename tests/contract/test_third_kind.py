"""A third kind, for real (issue #51): the toy kind of tests/helpers/toykind/, a package with a KindSpec and
nothing else, registered the way an installed package is (an entry point of the group `pytest_pstbench.kinds` in a
generated *.dist-info on sys.path), runs through the pytest face, `pstbench score`, `compare`, `table`, `report`,
`ls` and a command of its own; and no file of the kit names it. Its answers are checked against the expected
numbers written here, its comparison's p-value against the sign test computed by hand below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.toykind.engine import DEMO_ITEMS

from pytest_pstbench.cli import main
from pytest_pstbench.core import kinds

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def toy_kind(tmp_path, monkeypatch):
    """The toy kind installed: a distribution on sys.path whose one entry point of the kinds group names its spec."""
    site = tmp_path / "site"
    info = site / "toykind-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toykind\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[pytest_pstbench.kinds]\ntoy = helpers.toykind.kind:KIND\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(site))
    kinds.registered.cache_clear()
    yield
    kinds.registered.cache_clear()


def _answers(folder: Path, wrong: set[str] = frozenset()) -> Path:
    folder.mkdir(parents=True)
    for item, value in DEMO_ITEMS.items():
        (folder / f"{item}.txt").write_text(f"{value + 1 if item in wrong else value}\n", encoding="utf-8")
    return folder


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_toy_kind_runs_through_every_door(toy_kind, tmp_path, capsys, monkeypatch):
    assert kinds.names() == ["paired", "selection", "toy"]
    results = tmp_path / "results"
    good = _answers(tmp_path / "good")
    bad = _answers(tmp_path / "bad", wrong=set(DEMO_ITEMS))

    # pstbench score: the registry says the track is a toy track, the toy kind scores it
    code, out, err = _cli(capsys, "score", "--track", "toy-demo", "--outputs", good, "--results", results)
    assert code == 0, err
    code, out, err = _cli(capsys, "score", "--track", "toy-demo", "--outputs", bad, "--results", results)
    assert code == 0, err
    run_good, run_bad = results / "toy-demo" / "good", results / "toy-demo" / "bad"
    assert json.loads((run_good / "summary.json").read_text())["accuracy"] == 1.0
    assert json.loads((run_bad / "summary.json").read_text())["accuracy"] == 0.0

    # pstbench compare: every item discordant, all in the baseline's favour: p = 2 / 2**n (the sign test by hand)
    code, out, err = _cli(capsys, "compare", run_good, run_bad, "--json", "--fail-on-worse")
    (row,) = json.loads(out)["tests"]
    n = len(DEMO_ITEMS)
    assert code == 1 and row["verdict"] == "worse" and row["pvalue"] == pytest.approx(2 / 2**n)
    code, out, err = _cli(capsys, "compare", run_good, run_bad, "--margin", "accuracy=0.1")
    assert code == 2 and "toy runs have no margins" in err

    # pstbench reproduce: a kind that declares no reproduce hook is refused in one line saying so
    code, out, err = _cli(capsys, "reproduce", run_good, "--outputs", good)
    assert code == 2 and "the toy kind cannot reproduce its runs" in err and len(err.strip().splitlines()) == 1

    # pstbench table and report: the kind's own builders, through the registry
    code, out, err = _cli(capsys, "table", run_good, run_bad)
    assert code == 0 and "Accuracy↑" in out and "| good" in out
    code, out, err = _cli(capsys, "report", run_good, run_bad, "--out", tmp_path / "page")
    assert code == 0, err
    assert "<td>bad</td><td>0.0</td>" in (tmp_path / "page" / "index.html").read_text()

    # pstbench ls, data revision and the kind's own command
    code, out, err = _cli(capsys, "data", "revision", "toy-demo")
    assert (code, out) == (0, "1\n"), err
    code, out, err = _cli(capsys, "ls", "tracks")
    assert code == 0 and any(line.split()[:2] == ["toy-demo", "toy"] for line in out.splitlines())
    code, out, err = _cli(capsys, "toy-items")
    assert out.splitlines()[0] == f"q01 {DEMO_ITEMS['q01']}"

    # pytest: its pytest face, with the kind's own option
    monkeypatch.chdir(tmp_path)
    pytest_results = tmp_path / "pytest-results"
    wrong = _answers(tmp_path / "half", wrong={"q01", "q02"})
    ret = pytest.main(
        [
            "-q",
            "-p",
            "no:cacheprovider",
            "--pstbench-track=toy-demo",
            f"--pstbench-toy-answers={wrong}",
            f"--pstbench-results={pytest_results}",
            str(tmp_path / "good"),
        ]
    )
    capsys.readouterr()
    summary = json.loads((pytest_results / "toy-demo" / "pytest" / "summary.json").read_text())
    assert ret == 0 and summary["accuracy"] == pytest.approx((n - 2) / n)


def test_no_file_of_the_kit_names_the_third_kind():
    """The toy kind is its package and the entry point its test writes: nothing outside tests/helpers/toykind/
    and this test names it."""
    named = [
        str(p.relative_to(REPO))
        for folder in ("pytest_pstbench", "protocols")
        for p in (REPO / folder).rglob("*")
        if p.is_file() and p.suffix in (".py", ".yaml", ".toml") and "toykind" in p.read_text(encoding="utf-8")
    ]
    assert not named and "toykind" not in (REPO / "pyproject.toml").read_text(encoding="utf-8")

"""Contract tests: the same checks, run the same way, on both track kinds (paired and selection).

Each kind supplies a track, the pytest options that score it completely, the options of a run in
which some items fail, and the names of its run files; every test below runs against both. A third
track kind joins by adding one `Kind` here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers.tracks import make_outputs, make_track
from PIL import Image

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

JUDGES = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"


@dataclass
class Kind:
    name: str
    track: str  # --pstbench-track value
    good: list[str]  # options that score every item
    bad: list[str]  # options under which `n_failing` items fail
    files: tuple[str, ...]  # run files that must be byte-identical serial vs xdist
    n_items: int
    session_class: str  # "module:Class" whose finish() the plugin calls
    n_failing: int = 1


def _paired(root: Path) -> Kind:
    manifest = make_track(root / "track", n=4)
    good = make_outputs(manifest, root / "good")
    bad = make_outputs(manifest, root / "bad")
    (bad / "p02.png").unlink()
    return Kind(
        "paired",
        str(manifest),
        [f"--pstbench-outputs={good}", "--pstbench-no-cache"],
        [f"--pstbench-outputs={bad}", "--pstbench-no-cache"],
        ("metrics.csv", "summary.json"),
        4,
        "pytest_pstbench.paired.session:RunSession",
    )


def _selection(root: Path) -> Kind:
    from pytest_pstbench.selection.tracks import resolve_selection_track

    track = resolve_selection_track("vab-demo")

    def digest(path):
        return hashlib.sha256(np.ascontiguousarray(np.asarray(Image.open(path).convert("RGB"))).tobytes()).hexdigest()

    target = digest(track.tasks[0].candidates[0])
    n_failing = sum(any(digest(c) == target for c in t.candidates) for t in track.tasks)  # the image recurs
    judge = root / "flaky_judge.py"
    judge.write_text(
        "import hashlib\nimport numpy as np\n"
        f"TARGET = {target!r}\n"
        "def score(image):\n"
        "    if hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest() == TARGET:\n"
        "        raise ValueError('cannot judge this one')\n"
        "    return float(np.asarray(image, dtype=np.float64).std())\n"
    )
    return Kind(
        "selection",
        "vab-demo",
        [f"--pstbench-judge={JUDGES}:sharpness"],
        [f"--pstbench-judge={judge}:score"],
        ("per_task.csv", "summary.json"),
        len(track.tasks),
        "pytest_pstbench.selection.session:SelectionSession",
        n_failing,
    )


@pytest.fixture(params=["paired", "selection"])
def kind(request, tmp_path_factory) -> Kind:
    root = tmp_path_factory.mktemp(f"contract-{request.param}")
    return {"paired": _paired, "selection": _selection}[request.param](root)


def _run(pytester, kind: Kind, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--pstbench-track={kind.track}", *args)


def _run_dir(pytester, kind: Kind, results: str, name: str) -> Path:
    dirs = list((pytester.path / results).glob(f"*/{name}"))
    assert len(dirs) == 1, dirs
    return dirs[0]


def test_xdist_run_files_are_byte_identical_to_a_serial_run(pytester, kind):
    serial = _run(pytester, kind, *kind.good, "--pstbench-name=r", "--pstbench-results=serial")
    parallel = _run(pytester, kind, *kind.good, "--pstbench-name=r", "--pstbench-results=xdist", "-n", "2")
    assert serial.ret == 0 and parallel.ret == 0, serial.stdout.str() + parallel.stdout.str()
    serial.assert_outcomes(passed=kind.n_items)
    parallel.assert_outcomes(passed=kind.n_items)
    a, b = _run_dir(pytester, kind, "serial", "r"), _run_dir(pytester, kind, "xdist", "r")
    for name in kind.files:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    run = json.loads((a / "run.json").read_text())
    assert run["complete"] is True
    # one environment record (core/environment.py): the same leading keys, then the kind's packages
    import platform

    env = run["environment"]
    assert list(env)[:3] == ["python", "platform", "pytest_pstbench"] and env["python"] == platform.python_version()
    assert env["numpy"] == __import__("numpy").__version__


def test_an_item_that_fails_gives_complete_false_and_exit_1(pytester, kind):
    r = _run(pytester, kind, *kind.bad, "--pstbench-name=r")
    assert r.ret == 1
    r.assert_outcomes(passed=kind.n_items - kind.n_failing, failed=kind.n_failing)
    run = json.loads((_run_dir(pytester, kind, "results", "r") / "run.json").read_text())
    assert run["complete"] is False and len(run["failures"]) == kind.n_failing
    r.stdout.fnmatch_lines([f"*run incomplete: * scored, {kind.n_failing} failed; run.json says complete: false*"])


def test_an_incomplete_baseline_is_refused_by_the_gate(pytester, kind):
    assert _run(pytester, kind, *kind.bad, "--pstbench-name=base").ret == 1
    base = _run_dir(pytester, kind, "results", "base")
    r = _run(pytester, kind, *kind.good, "--pstbench-name=new", f"--pstbench-baseline={base}")
    assert r.ret == 1
    r.stdout.fnmatch_lines(["*pstbench gate FAILED*baseline refused*complete*"])


def test_a_user_error_while_the_run_finishes_fails_the_session_with_one_line(pytester, kind):
    module, _, cls = kind.session_class.partition(":")
    pytester.makeconftest(
        f"import {module} as m\n"
        "from pytest_pstbench.core.errors import UserError\n"
        "def _finish(self, *a, **k):\n"
        "    raise UserError('results/x: cannot write the run here (disk full); fix: free space')\n"
        f"m.{cls}.finish = _finish\n"
    )
    r = _run(pytester, kind, *kind.good, "--pstbench-name=r")
    assert r.ret == 1, r.stdout.str()
    r.stdout.fnmatch_lines(["pstbench: error: results/x: cannot write the run here (disk full); fix: free space"])
    assert "Traceback" not in r.stdout.str() + r.stderr.str()


@pytest.mark.parametrize("name", ["a/b", "a\\b", ".hidden", "x" * 300])
def test_run_names_follow_one_rule(pytester, kind, name):
    r = _run(pytester, kind, *kind.good, f"--pstbench-name={name}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    rule = "at most 200" if len(name) > 200 else "a run name must be a plain folder name"
    assert f"pstbench: --name {name!r}" in err and rule in err and "Traceback" not in err
    assert not (pytester.path / "results").exists()


def test_run_json_carries_its_format_and_a_newer_format_is_refused(pytester, kind, capsys):
    from pytest_pstbench.cli import main
    from pytest_pstbench.core.store.folder import RUN_FORMAT

    assert _run(pytester, kind, *kind.good, "--pstbench-name=a").ret == 0
    assert _run(pytester, kind, *kind.good, "--pstbench-name=b").ret == 0
    a, b = _run_dir(pytester, kind, "results", "a"), _run_dir(pytester, kind, "results", "b")
    run = json.loads((b / "run.json").read_text())
    assert list(run)[0] == "format" and run["format"] == RUN_FORMAT == 1
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--json"]) == 0  # today's format reads back
    del run["format"]  # a run written before the field existed reads as format 0
    (b / "run.json").write_text(json.dumps(run))
    assert main(["compare", str(a), str(b), "--json"]) == 0
    run["format"] = RUN_FORMAT + 1
    (b / "run.json").write_text(json.dumps(run))
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"pstbench: error: {b / 'run.json'}: run.json has format {RUN_FORMAT + 1}, written by a newer "
        f"pytest-pstbench (this one reads formats up to {RUN_FORMAT}); fix: upgrade pytest-pstbench"
    )

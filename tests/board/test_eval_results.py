"""`pstbench runs eval-results` (issue #52): a run's numbers as the Hub's `.eval_results/*.yaml`, read back with
huggingface_hub's own parser (`parse_eval_result_entries`) and compared with numbers computed here from the run's
files (metrics.csv's column means for a paired run, summary.json's overall cell for a selection run), never through
the kit; the pull request reaches the fake Hub (tests/helpers/hub_server.py) with those files; hostile run text stays
data; bad input is one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.paired_runs import scores_from, write_run
from helpers.selection_runs import selection  # noqa: F401 (a module fixture)
from huggingface_hub import parse_eval_result_entries
from hypothesis import given
from hypothesis import strategies as st

from pytest_pstbench.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
PAIRED = yaml.safe_load((ROOT / "protocols" / "pstbench.yaml").read_text())
RANKED = [m for m, e in PAIRED["metrics"].items() if isinstance(e, dict) and e.get("ranked")]
CREATED = "2025-03-04T05:06:07+00:00"
TOKEN = "hf_eval_results_test_token_0123456789"
N = 12


def paired_run(root: Path, name: str = "m", seed: int = 0, method=None) -> Path:
    rng = np.random.default_rng(seed)
    d = write_run(root, "m", scores_from({"psnr": 20 + rng.normal(0, 1, N), "ssim": rng.uniform(0.4, 0.9, N)}, N))
    rec = json.loads((d / "run.json").read_text())
    rec.update(name=name, created=CREATED, method={"method": method if method is not None else "mine"})
    (d / "run.json").write_text(json.dumps(rec))
    summary = json.loads((d / "summary.json").read_text())
    (d / "summary.json").write_text(json.dumps({**summary, "name": name}))
    return d


def column_means(run_dir: Path) -> dict[str, float]:
    with open(run_dir / "metrics.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {m: float(np.mean([float(r[m]) for r in rows])) for m in RANKED}


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = cli_main(["runs", "eval-results", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def read_entries(folder: Path):
    (f,) = sorted((folder / ".eval_results").iterdir())
    return f, parse_eval_result_entries(yaml.safe_load(f.read_text(encoding="utf-8")))


def test_paired_entries_round_trip_with_the_runs_numbers(tmp_path, capsys):
    run = paired_run(tmp_path / "results")
    code, out, err = run_cli(capsys, run, "--dataset-id", "me/pst50", "--out", tmp_path / "o")
    assert code == 0, err
    f, entries = read_entries(tmp_path / "o")
    assert f.name == "pst50-t.yaml" and str(f) in out
    expected = column_means(run)
    assert [e.task_id for e in entries] == RANKED  # one entry per ranked metric, in the protocol's order
    for e in entries:
        assert e.dataset_id == "me/pst50" and e.dataset_revision == "r1" and e.date == CREATED
        assert e.value == pytest.approx(expected[e.task_id], rel=1e-12, abs=1e-12)
        assert e.source_url is None and "not published" in e.notes  # a local run: no source, and the notes say so
    assert "not published" in err  # and the command says so too
    # the default: the same YAML on stdout
    code, out, _ = run_cli(capsys, run, "--dataset-id", "me/pst50")
    assert code == 0 and out == f.read_text(encoding="utf-8")
    # --task-id T: T.METRIC
    code, out, _ = run_cli(capsys, run, "--dataset-id", "me/pst50", "--task-id", "pst50_v1")
    assert [e.task_id for e in parse_eval_result_entries(yaml.safe_load(out))] == [f"pst50_v1.{m}" for m in RANKED]


def test_selection_entries_are_the_headline_numbers(selection, tmp_path, capsys):  # noqa: F811
    run = selection["good"]
    code, out, err = run_cli(capsys, run, "--dataset-id", "me/vab")
    assert code == 0, err
    entries = parse_eval_result_entries(yaml.safe_load(out))
    summary = json.loads((run / "summary.json").read_text())
    cell = next(c for c in summary["cells"] if c["group"] == "overall")["metrics"]
    vab = yaml.safe_load((ROOT / "protocols" / "vab.yaml").read_text())
    expected = {f"{m}.{o}": cell[m][o]["mean"] for m in vab["metrics"] for o in vab["comparison"]["outcomes"]}
    assert {e.task_id: e.value for e in entries} == expected
    assert {"top1.ap@1", "top1.pass^3"} <= set(expected)
    run_json = json.loads((run / "run.json").read_text())
    assert all(e.dataset_revision == run_json["dataset"]["revision"] for e in entries)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    from helpers.hub_server import FakeHub, point_at

    h = FakeHub().start()
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    h.tokens.add(TOKEN)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    yield h
    h.stop()


def publish(hub, run: Path) -> str:
    sha = "d" * 40
    hub.add_commit("me/runs", sha, {f"t/m/{f.name}": f.read_bytes() for f in run.iterdir()}, refs=["main"], lfs=False)
    return sha


def test_a_published_run_names_its_pinned_source(hub, tmp_path, capsys):
    run = paired_run(tmp_path / "results")
    sha = publish(hub, run)
    code, out, err = run_cli(capsys, "hf://datasets/me/runs@main/t/m", "--dataset-id", "me/pst50")
    assert code == 0, err
    entries = parse_eval_result_entries(yaml.safe_load(out))
    expected = column_means(run)
    for e in entries:
        assert e.source_url == f"{hub.url}/datasets/me/runs/tree/{sha}/t/m"
        assert f"hf://datasets/me/runs@{sha}/t/m" in e.notes
        assert e.value == pytest.approx(expected[e.task_id], rel=1e-12, abs=1e-12)


def test_push_opens_a_pull_request_holding_the_files(hub, tmp_path, capsys):
    hub.add_commit("me/model", "a" * 40, {"README.md": b"# model\n"}, refs=["main"], lfs=False, repo_type="model")
    run = paired_run(tmp_path / "results")
    code, out, err = run_cli(capsys, run, "--dataset-id", "me/pst50", "--push", "me/model", "--out", tmp_path / "o")
    assert code == 0, err
    f, entries = read_entries(tmp_path / "o")
    repo = hub.model_repos["me/model"]
    assert f"{hub.url}/me/model/discussions/1" in out
    pr = repo.commits[repo.refs["refs/pr/1"]]
    assert pr.files[f".eval_results/{f.name}"] == f.read_bytes()  # what reached the Hub is what was written
    assert pr.files["README.md"] == b"# model\n" and pr.parent == "a" * 40
    assert repo.refs["main"] == "a" * 40  # main untouched: a pull request, not a commit to the branch
    assert parse_eval_result_entries(yaml.safe_load(pr.files[f".eval_results/{f.name}"])) == entries
    code, out, err = run_cli(capsys, run, "--dataset-id", "me/pst50", "--push", "me/model")  # a second PR: #2
    assert code == 0 and f"{hub.url}/me/model/discussions/2" in out and "refs/pr/2" in repo.refs


def test_push_errors_are_one_line_naming_the_repo_and_the_fix(hub, tmp_path, capsys, monkeypatch):
    hub.add_commit("me/model", "a" * 40, {"README.md": b"x"}, refs=["main"], lfs=False, repo_type="model")
    run = paired_run(tmp_path / "results")
    args = (run, "--dataset-id", "me/pst50", "--push")
    code, _, err = run_cli(capsys, *args, "me/nothing")
    line = one_line(err)
    assert code != 0 and "me/nothing" in line and "not found" in line and "fix:" in line
    monkeypatch.setenv("HF_TOKEN", "hf_a_token_the_hub_does_not_know_000")
    code, _, err = run_cli(capsys, *args, "me/model")
    line = one_line(err)
    assert code != 0 and "me/model" in line and "fix:" in line and "hf_a_token" not in line
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))
    code, _, err = run_cli(capsys, *args, "me/model")
    line = one_line(err)
    assert code != 0 and "me/model" in line and "token" in line and "hf auth login" in line
    assert not any(r.startswith("refs/pr/") for r in hub.model_repos["me/model"].refs)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    from helpers.unreachable import endpoint, says

    with endpoint("refused") as url:  # a port nothing listens on
        monkeypatch.setenv("HF_ENDPOINT", url)
        code, out, err = run_cli(capsys, *args, "me/model")
    line = one_line(err)
    assert code != 0 and "--push me/model" in line and not says("refused", url, line), (out, err)


@pytest.mark.parametrize(
    "extra, words",
    [
        (("--dataset-id", "not a repo"), ("--dataset-id", "OWNER/NAME")),
        (("--dataset-id", "me/x", "--task-id", "a b"), ("--task-id",)),
        (("--dataset-id", "me/x", "--push", "../up"), ("--push", "OWNER/NAME")),
    ],
)
def test_bad_options_are_one_line(tmp_path, capsys, extra, words):
    run = paired_run(tmp_path / "results")
    code, _, err = run_cli(capsys, run, *extra)
    line = one_line(err)
    assert code != 0 and all(w in line for w in words) and "fix:" in line


def test_not_a_run_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for what in (tmp_path / "empty", tmp_path / "missing"):
        code, _, err = run_cli(capsys, what, "--dataset-id", "me/x")
        line = one_line(err)
        assert code != 0 and str(what) in line and "fix:" in line
    paired_run(tmp_path / "results")
    paired_run(tmp_path / "r2")
    (tmp_path / "r2" / "t" / "m").rename(tmp_path / "results" / "t" / "m2")
    code, _, err = run_cli(capsys, tmp_path / "results", "--dataset-id", "me/x")  # a results folder: many runs
    line = one_line(err)
    assert code != 0 and "2 runs" in line and "fix:" in line


@given(name=st.text(min_size=1, max_size=40), method=st.text(max_size=40))
def test_property_hostile_run_text_round_trips_as_data(tmp_path_factory, name, method):
    """Any run name and method text: the YAML parses back to exactly the ranked entries, the text verbatim in
    the notes (never a key, an entry or a document of its own)."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("hostile")
    run = paired_run(root, name=name, method=method)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["runs", "eval-results", str(run), "--dataset-id", "me/pst50"])
    if code != 0:  # a name the run reader refuses: one line, no traceback
        one_line(err.getvalue())
        return
    entries = parse_eval_result_entries(yaml.safe_load(out.getvalue()))
    assert [e.task_id for e in entries] == RANKED and {e.dataset_id for e in entries} == {"me/pst50"}
    assert all(name in e.notes and json.dumps({"method": method}, ensure_ascii=False) in e.notes for e in entries)

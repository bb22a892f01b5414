"""pyiqa metrics as judges (`--judge pyiqa:NAME`, a `pstbench_judge` fixture returning "pyiqa:NAME").

The adapter's rules run against a fake `pyiqa` module put into sys.modules (so they run where pyiqa is not
installed, as in CI): the metric is created once, on the device asked for; a task's candidates of one size
go in one batch; a lower-is-better metric is negated and run.json says so; a metric that cannot be created,
an unknown one, a full-reference one and a missing pyiqa are one-line errors. With pyiqa installed, the
weight-free metric PIQE scores vab-demo, and its scores are checked against pyiqa called directly on each
image (skipped otherwise: pyiqa is the optional extra `[iqa]`).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.judges import load_judge, score_candidates
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import load_selection_manifest


class FakeMetric:
    """Scores an image by the mean of its red channel (in [0, 1]); records every batch it gets."""

    def __init__(self, name, device, lower_better, one_at_a_time=False):
        self.name, self.device, self.lower_better, self.one_at_a_time = name, device, lower_better, one_at_a_time
        self.score_range = "0, 1"
        self.batches: list[tuple] = []

    def __call__(self, x):
        assert x.dtype == torch.float32 and x.dim() == 4 and x.shape[1] == 3
        assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
        self.batches.append(tuple(x.shape))
        assert not self.one_at_a_time or x.shape[0] == 1, "Currently, only support batch size 1."  # as pyiqa's Q-Align
        return x[:, 0].mean(dim=(1, 2)).reshape(-1, 1)  # pyiqa's shape for many metrics: (N, 1)


def fake_pyiqa(fail: Exception | None = None) -> types.ModuleType:
    mod = types.ModuleType("pyiqa")
    mod.__version__ = "0.0.fake"
    mod.created = []
    nr = {"redness": False, "blueness_low": True, "one_at_a_time": False}

    def list_models(metric_mode=None, filter="", exclude_filters=""):
        if metric_mode == "NR":
            return sorted(nr)
        if metric_mode == "FR":
            return ["ssim", "lpips"]
        return sorted(nr) + ["lpips", "ssim"]

    def create_metric(name, as_loss=False, device=None, **kwargs):
        if fail is not None:
            raise fail
        m = FakeMetric(name, device, nr[name], one_at_a_time=name == "one_at_a_time")
        mod.created.append(m)
        return m

    mod.list_models, mod.create_metric = list_models, create_metric
    return mod


@pytest.fixture
def fake(monkeypatch):
    mod = fake_pyiqa()
    monkeypatch.setitem(sys.modules, "pyiqa", mod)
    return mod


@pytest.fixture
def small_track(tmp_path) -> Path:
    """Two tasks: t0 with k = 3 of two sizes (red levels 10, 200, 90), t1 with k = 2 (red 50, 20)."""
    specs = {"t0": [(10, (8, 6)), (200, (8, 6)), (90, (10, 7))], "t1": [(50, (6, 6)), (20, (6, 6))]}
    tasks = []
    for tid, cands in specs.items():
        files = []
        for c, (red, (w, h)) in enumerate(cands):
            p = tmp_path / tid / f"c{c}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (w, h), (red, 7, 7)).save(p)
            files.append(f"{tid}/c{c}.png")
        tasks.append({"id": tid, "candidates": files, "best": 1, "worst": 0})
    manifest = tmp_path / "track.yaml"
    manifest.write_text(
        yaml.safe_dump({"kind": "selection", "id": "iqatrack", "revision": "r1", "tasks": tasks}, sort_keys=False)
    )
    return manifest


def test_a_higher_is_better_metric_is_used_as_it_is_batched_by_size(fake, small_track):
    track = load_selection_manifest(small_track)
    judge = load_judge("pyiqa:redness", default_num_trials=1)
    assert len(fake.created) == 1 and str(fake.created[0].device) == "cpu"
    scores = score_candidates(track.tasks[0], judge)
    assert scores == pytest.approx([10 / 255, 200 / 255, 90 / 255], abs=1e-6)
    assert fake.created[0].batches == [(2, 3, 6, 8), (1, 3, 7, 10)]  # the two 8x6 candidates in one batch
    score_candidates(track.tasks[1], judge)
    assert len(fake.created) == 1  # created once for the run
    assert judge.provenance["lower_better"] is False and judge.provenance["negated"] is False


def test_a_lower_is_better_metric_is_negated(fake, small_track):
    track = load_selection_manifest(small_track)
    judge = load_judge("pyiqa:blueness_low", default_num_trials=2)
    scores = score_candidates(track.tasks[0], judge)
    assert scores == pytest.approx([-10 / 255, -200 / 255, -90 / 255], abs=1e-6)
    assert len(fake.created[0].batches) == 4  # num_trials 2: each size group twice
    assert judge.provenance["lower_better"] is True and judge.provenance["negated"] is True


def test_a_metric_that_refuses_a_batch_gets_one_image_per_call(fake, small_track):
    track = load_selection_manifest(small_track)
    judge = load_judge("pyiqa:one_at_a_time")
    assert score_candidates(track.tasks[0], judge) == pytest.approx([10 / 255, 200 / 255, 90 / 255], abs=1e-6)
    assert fake.created[0].batches == [(2, 3, 6, 8), (1, 3, 6, 8), (1, 3, 6, 8), (1, 3, 7, 10)]


def test_run_json_records_metric_version_device_and_negation(fake, small_track, tmp_path, capsys):
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(small_track),
                "--judge",
                "pyiqa:blueness_low",
                "--results",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    run_dir = tmp_path / "r" / "iqatrack" / "pyiqa-blueness_low"
    run = json.loads((run_dir / "run.json").read_text())
    j = run["judge"]
    assert (j["kind"], j["metric"], j["pyiqa_version"], j["device"]) == ("pyiqa", "blueness_low", "0.0.fake", "cpu")
    assert j["lower_better"] is True and j["negated"] is True and j["spec"] == "pyiqa:blueness_low"
    assert j["torch_version"] == torch.__version__ and "weights_cache" in j
    rows = list(csv.DictReader((run_dir / "per_task.csv").read_text().splitlines()))
    # negated: the least red candidate is the best; t0 is labelled best 1 (the reddest), worst 0
    assert [float(x) for x in rows[0]["scores"].split(";")] == pytest.approx(
        [-10 / 255, -200 / 255, -90 / 255], abs=1e-6
    )
    assert rows[0]["best_t0"] == "0" and rows[0]["worst_t0"] == "1"
    assert "judge: pyiqa:blueness_low" in capsys.readouterr().out


@pytest.mark.parametrize(
    "spec, fail, message",
    [
        (
            "pyiqa:ssim",
            None,
            "--judge pyiqa:ssim: ssim is a full-reference pyiqa metric (it compares an image with a reference "
            "image); a judge scores each candidate alone; fix: give a no-reference metric (pyiqa.list_models(metric_mode='NR'), "
            "e.g. pyiqa:piqe, pyiqa:musiq, pyiqa:qalign)",
        ),
        (
            "pyiqa:redneses",
            None,
            "--judge pyiqa:redneses: pyiqa 0.0.fake has no metric redneses (did you mean redness?); fix: give "
            "a no-reference metric of pyiqa.list_models(metric_mode='NR'), e.g. pyiqa:piqe, pyiqa:musiq, pyiqa:qalign",
        ),
        (
            "pyiqa:",
            None,
            "--judge pyiqa:: name a pyiqa metric after 'pyiqa:' (e.g. pyiqa:piqe, pyiqa:qalign); fix: give pyiqa:NAME",
        ),
        (
            "pyiqa:redness",
            OSError("[Errno -2] Name or service\nnot known"),
            "--judge pyiqa:redness: pyiqa 0.0.fake could not create metric redness (OSError: [Errno -2] Name or service not known); "
            "pyiqa fetches its weights into CACHE (models on Hugging Face, such as qalign, into the Hugging Face cache); fix: "
            "`pstbench weights fetch pyiqa:redness` where they can be downloaded (checked against pinned digests), or run once "
            "there and copy that folder here (docs/selection.md, pinned pyiqa weights)",
        ),
    ],
)
def test_bad_pyiqa_judges_are_one_line_errors(monkeypatch, small_track, tmp_path, capsys, spec, fail, message):
    monkeypatch.setitem(sys.modules, "pyiqa", fake_pyiqa(fail))
    cache = str(Path(torch.hub.get_dir()) / "pyiqa")  # the fake has no pyiqa.utils: torch hub's folder, as pyiqa 0.1
    assert (
        cli_main(["vab", "score", "--track", str(small_track), "--judge", spec, "--results", str(tmp_path / "r")]) == 2
    )
    assert capsys.readouterr().err == f"pstbench: error: {message.replace('CACHE', cache)}\n"
    assert not (tmp_path / "r").exists()


def test_pyiqa_not_installed_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyiqa", None)  # import pyiqa raises ImportError
    with pytest.raises(UserError) as e:
        load_judge("pyiqa:piqe")
    source = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]  # the tests run from a source tree
    assert str(e.value) == f"--judge pyiqa:piqe: pyiqa is not installed; fix: pip install -e '{source}[iqa]'"


def test_a_device_without_cuda_is_refused_before_the_metric_is_made(fake, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(
        UserError, match=r"^--judge pyiqa:redness: device 'cuda' was asked for, but CUDA is not available"
    ):
        load_judge("pyiqa:redness", device="cuda")
    assert fake.created == []


def test_the_fixture_may_return_a_pyiqa_spec(small_track, pytester):
    """`pstbench_judge` returning "pyiqa:NAME" is resolved as --pstbench-judge is (here with the fake pyiqa)."""
    pytester.makeconftest(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import pytest
        from test_pyiqa_judges import fake_pyiqa

        sys.modules["pyiqa"] = fake_pyiqa()

        @pytest.fixture
        def pstbench_judge():
            return "pyiqa:blueness_low"
    """)
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--pstbench-track={small_track}")
    r.assert_outcomes(passed=2)
    run = json.loads((pytester.path / "results" / "iqatrack" / "pytest" / "run.json").read_text())
    assert (
        run["judge"]["kind"] == "pyiqa"
        and run["judge"]["negated"] is True
        and run["judge"]["fixture"] == "pstbench_judge"
    )


def test_a_function_judge_never_imports_pyiqa(tmp_path, small_track):
    code = (
        f"import sys; from pytest_pstbench.cli import main; "
        f"rc = main(['vab', 'score', '--track', {str(small_track)!r}, '--judge', 'examples/judges/no_reference.py:sharpness', "
        f"'--results', {str(tmp_path / 'r')!r}]); "
        "print(rc, 'pyiqa' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert out.strip().splitlines()[-1] == "0 False"


def test_pyiqa_piqe_scores_vab_demo(tmp_path, capsys):
    """The weight-free PIQE (lower is better) scores the demo track; each candidate's score is -PIQE of pyiqa
    called on that image alone (the adapter's decoding, scaling, batching and negation)."""
    pyiqa = pytest.importorskip(
        "pyiqa", reason="pyiqa is the optional extra [iqa] (from the clone: pip install -e '.[iqa]')"
    )
    assert (
        cli_main(["vab", "score", "--track", "vab-demo", "--judge", "pyiqa:piqe", "--results", str(tmp_path / "r")])
        == 0
    )
    assert "judge: pyiqa:piqe" in capsys.readouterr().out
    run_dir = tmp_path / "r" / "vab-demo" / "pyiqa-piqe"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True
    assert run["judge"]["pyiqa_version"] == pyiqa.__version__ and run["judge"]["metric"] == "piqe"
    assert run["judge"]["lower_better"] is True and run["judge"]["negated"] is True
    from pytest_pstbench.selection.tracks import resolve_selection_track

    track = resolve_selection_track("vab-demo")
    metric = pyiqa.create_metric("piqe", device="cpu")
    rows = {r["task_id"]: r for r in csv.DictReader((run_dir / "per_task.csv").read_text().splitlines())}
    for task in track.tasks[:6]:
        got = [float(x) for x in rows[task.id]["scores"].split(";")]
        want = []
        for path in task.candidates:
            with Image.open(path) as im:
                x = torch.from_numpy(np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0).permute(2, 0, 1)[None]
            want.append(-float(metric(x)))
        assert got == pytest.approx(want, rel=1e-5, abs=1e-4), task.id
    params = SelectionParams.of(load_protocol("vab"))
    assert params.judge["num_trials"] == run["judge"]["num_trials"]


def test_a_module_pyiqa_does_not_declare_is_named_with_the_extra_not_the_weights(
    monkeypatch, small_track, tmp_path, capsys
):
    """Issue #43: `pyiqa:qalign` failed with `No module named 'icecream'` and a fix about weights."""
    missing = ModuleNotFoundError("No module named 'icecream'", name="icecream")
    monkeypatch.setitem(sys.modules, "pyiqa", fake_pyiqa(missing))
    source = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]  # the tests run from a source tree
    assert (
        cli_main(
            ["vab", "score", "--track", str(small_track), "--judge", "pyiqa:redness", "--results", str(tmp_path / "r")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err == (
        f"pstbench: error: --judge pyiqa:redness: pyiqa 0.0.fake's metric redness imports the module icecream, "
        f"which is not installed (pyiqa does not declare it); fix: pip install -e '{source}[iqa]' (the [iqa] extra "
        "brings what pyiqa's metrics import), or pip install icecream\n"
    )
    assert "weights" not in err


def test_the_iqa_extra_declares_what_pyiqa_imports_without_declaring():
    import tomllib

    extra = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["iqa"]
    assert any(r.startswith("icecream") for r in extra) and "setuptools<81" in extra

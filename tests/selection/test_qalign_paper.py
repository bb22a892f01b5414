"""Q-Align as the VAB paper scores it (issue #43, "Q-Align as the paper scores it"): `--judge vab-paper:qalign`.

The paper (§H.4.2) scores Q-Align's aesthetic task with a softmax over the logits of the five words excellent,
good, fair, poor, bad weighted [1, 0.75, 0.5, 0.25, 0], each image scored `num_trials` times and averaged.
The weighting is checked against a hand computation on given logits; the adapter runs against a fake pyiqa
whose Q-Align returns given logits (the real model is never downloaded here); run.json records the word
weights, num_trials and the model revision. The paper's other reward models are refused in one line naming
what is missing (never a silent stand-in).
"""

from __future__ import annotations

import json
import math
import sys
import types

import pytest
import torch
import yaml
from PIL import Image

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection import qalign
from pytest_pstbench.selection.judges import load_judge, score_candidates
from pytest_pstbench.selection.tracks import load_selection_manifest


def test_word_weighting_equals_a_hand_computation():
    """issue #43: softmax over (excellent, good, fair, poor, bad) logits, weights [1, .75, .5, .25, 0]."""
    logits = [2.0, 1.0, 0.0, -1.0, -3.0]
    e = [math.exp(v) for v in logits]
    hand = (1.0 * e[0] + 0.75 * e[1] + 0.5 * e[2] + 0.25 * e[3] + 0.0 * e[4]) / sum(e)
    assert qalign.paper_aesthetic_score(logits) == pytest.approx(hand, rel=1e-12)
    assert qalign.paper_aesthetic_score([0.0] * 5) == pytest.approx(0.5, rel=1e-12)  # uniform: the mean weight
    assert qalign.paper_aesthetic_score([50.0, 0, 0, 0, 0]) == pytest.approx(1.0, abs=1e-12)  # all on "excellent"
    assert qalign.paper_aesthetic_score([0, 0, 0, 0, 50.0]) == pytest.approx(0.0, abs=1e-12)  # all on "bad"
    assert qalign.paper_aesthetic_score([1000.0, 999.0, 0, 0, 0]) == pytest.approx(
        (1 + 0.75 * math.exp(-1)) / (1 + math.exp(-1)), rel=1e-12
    )  # large logits: no overflow
    assert qalign.WORDS == ("excellent", "good", "fair", "poor", "bad")


def test_the_paper_score_is_q_aligns_five_level_score_mapped_to_0_1():
    """Q-Align's own scorer weights the words [5, 4, 3, 2, 1]; the paper's [1, .75, .5, .25, 0] is (s - 1) / 4."""
    logits = [0.3, 1.7, -0.4, 0.9, -2.0]
    e = [math.exp(v) for v in logits]
    five = sum(w * x for w, x in zip([5, 4, 3, 2, 1], e)) / sum(e)
    assert qalign.paper_aesthetic_score(logits) == pytest.approx((five - 1) / 4, rel=1e-12)


@pytest.mark.parametrize("bad", [[1.0, 2.0], [1.0, float("nan"), 0, 0, 0], [[1.0] * 5]])
def test_logits_that_are_not_five_finite_numbers_are_refused(bad):
    with pytest.raises(ValueError, match="five finite logits"):
        qalign.paper_aesthetic_score(bad)


class FakeQAlignNet:
    """pyiqa's QAlign arch: preprocess(x) and model.score(..., task_, return_dict, image_tensor) -> logits.

    The logits of an image are (red, 0, 0, 0, -red) shifted by the call count: each trial sees other logits."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.model = types.SimpleNamespace(score=self.score, config=types.SimpleNamespace(_commit_hash="abc123"))

    def preprocess(self, x):
        assert x.shape[0] == 1, "Currently, only support batch size 1."
        return x

    def score(self, images, task_="quality", input_="image", return_dict=False, image_tensor=None):
        assert images is None and input_ == "image" and return_dict
        self.calls.append((task_, tuple(image_tensor.shape)))
        red = float(image_tensor[0, 0].mean()) * 4
        shift = 0.5 * (len(self.calls) % 2)
        return {"logits": torch.tensor([[red + shift, 0.0, 0.0, 0.0, -red]], dtype=torch.float16)}


def fake_pyiqa_with_qalign():
    mod = types.ModuleType("pyiqa")
    mod.__version__ = "0.0.fake"
    mod.created = []

    def list_models(metric_mode=None, **_kw):
        return ["qalign"]

    def create_metric(name, device=None, **_kw):
        metric = types.SimpleNamespace(net=FakeQAlignNet(), lower_better=False, score_range="1, 5", name=name)
        mod.created.append(metric)
        return metric

    mod.list_models, mod.create_metric = list_models, create_metric
    return mod


@pytest.fixture
def fake(monkeypatch):
    mod = fake_pyiqa_with_qalign()
    monkeypatch.setitem(sys.modules, "pyiqa", mod)
    return mod


@pytest.fixture
def track_file(tmp_path):
    tasks = []
    for tid, reds in {"t0": [10, 200, 90], "t1": [50, 20]}.items():
        files = []
        for c, red in enumerate(reds):
            p = tmp_path / tid / f"c{c}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (6, 5), (red, 7, 7)).save(p)
            files.append(f"{tid}/c{c}.png")
        tasks.append({"id": tid, "candidates": files, "best": 1, "worst": 0})
    path = tmp_path / "track.yaml"
    path.write_text(
        yaml.safe_dump({"kind": "selection", "id": "qtrack", "revision": "r1", "tasks": tasks}, sort_keys=False)
    )
    return path


def expected(red: int, shifts) -> float:
    r = red / 255 * 4
    scores = [qalign.paper_aesthetic_score([r + s, 0.0, 0.0, 0.0, -r]) for s in shifts]
    return sum(scores) / len(scores)


def test_the_aesthetic_task_one_image_per_call_averaged_over_num_trials(fake, track_file):
    """issue #43: each image scored num_trials times (the logits differ per call here) and averaged."""
    track = load_selection_manifest(track_file)
    judge = load_judge("vab-paper:qalign", default_num_trials=2)
    scores = score_candidates(track.tasks[0], judge)
    net = fake.created[0].net
    assert [c[0] for c in net.calls] == ["aesthetic"] * 6 and {c[1] for c in net.calls} == {(1, 3, 5, 6)}
    # calls 1..6: candidate order within a trial, trial after trial; the shift is 0.5 on odd calls
    assert scores == pytest.approx(
        [expected(10, [0.5, 0.0]), expected(200, [0.0, 0.5]), expected(90, [0.5, 0.0])], abs=2e-3
    )  # fp16 logits, as the model gives them
    assert scores[1] > scores[2] > scores[0]
    assert judge.num_trials == 2 and len(fake.created) == 1


def test_run_json_records_word_weights_num_trials_and_revision(fake, track_file, tmp_path, capsys):
    """issue #43: the spec's provenance: the words, their weights, num_trials, the model and its revision."""
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track_file),
                "--judge",
                "vab-paper:qalign",
                "--results",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    run = json.loads((tmp_path / "r" / "qtrack" / "vab-paper-qalign" / "run.json").read_text())
    j = run["judge"]
    assert j["kind"] == "vab-paper" and j["spec"] == "vab-paper:qalign" and j["model"] == "qalign"
    assert j["words"] == ["excellent", "good", "fair", "poor", "bad"] and j["word_weights"] == [
        1.0,
        0.75,
        0.5,
        0.25,
        0.0,
    ]
    assert j["task"] == "aesthetic" and j["num_trials"] == 1 and j["score_range"] == "0, 1"
    assert j["model_repository"] == "q-future/one-align" and j["model_revision"] == "abc123"
    assert j["pyiqa_metric"] == "qalign" and j["pyiqa_version"] == "0.0.fake" and j["paper_section"] == "H.4.2"
    assert "judge: vab-paper:qalign" in capsys.readouterr().out


def test_the_revision_from_the_hugging_face_cache_when_the_config_has_none(tmp_path):
    refs = tmp_path / "models--q-future--one-align" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("0123abcd\n")
    model = types.SimpleNamespace(config=types.SimpleNamespace())
    assert qalign.model_revision(model, hub_cache=tmp_path) == "0123abcd"
    assert qalign.model_revision(model, hub_cache=tmp_path / "none") == "unknown"


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("vab-paper:artimuse", "ArtiMuse"),
        ("vab-paper:q-instruct", "Q-Instruct"),
        ("vab-paper:realqa", "RealQA"),
        ("vab-paper:peas-aes", "PEAS-aes"),
        ("vab-paper:peas-ava", "PEAS-ava"),
    ],
)
def test_the_papers_other_reward_models_are_refused_naming_what_is_missing(fake, spec, needle):
    with pytest.raises(UserError) as e:
        load_judge(spec)
    msg = str(e.value)
    assert msg.startswith(f"--judge {spec}: {needle}") and "\n" not in msg and "fix:" in msg
    assert fake.created == []  # never a silent stand-in


def test_an_unknown_paper_model_lists_the_six(fake):
    with pytest.raises(UserError, match=r"^--judge vab-paper:qalgin: .*qalign.*did you mean qalign"):
        load_judge("vab-paper:qalgin")


def test_a_pyiqa_without_q_aligns_logits_is_one_line(monkeypatch, track_file):
    mod = fake_pyiqa_with_qalign()
    mod.create_metric = lambda name, device=None, **_kw: types.SimpleNamespace(net=object(), lower_better=False)
    monkeypatch.setitem(sys.modules, "pyiqa", mod)
    with pytest.raises(UserError, match=r"^--judge vab-paper:qalign: pyiqa 0.0.fake's qalign metric does not expose"):
        load_judge("vab-paper:qalign")

"""Selection runs scored from answer patterns (`pstbench vab score` on the vab-demo track), the answer
patterns themselves, an edit of a run file's key, and the module fixture `selection` (runs good, bad, good2)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.permutations import orders_for


def pattern(seed: int, rates: dict[str, float]):
    """correct(task_id, trial, metric) -> bool, deterministic per seed."""

    def correct(task_id: str, trial: int, metric: str) -> bool:
        return random.Random(f"{seed}/{task_id}/{trial}/{metric}").random() < rates[metric]

    return correct


def write_answers(path: Path, track, params, correct) -> Path:
    """Parsed labels: the consensus label when `correct`, else a wrong one (best <-> worst swapped)."""
    lines = []
    for task in track.tasks:
        for t, order in enumerate(orders_for(task, params)):
            b, w = params.labels[order.index(task.best)], params.labels[order.index(task.worst)]
            for ptype in params.prompt_types_for(task.k):
                base = {"task_id": task.id, "trial": t, "prompt_type": ptype}
                if ptype == "pick_best":
                    lines.append({**base, "best": b if correct(task.id, t, "top1") else w})
                elif ptype == "pick_worst":
                    lines.append({**base, "worst": w if correct(task.id, t, "bot1") else b})
                else:
                    ok = correct(task.id, t, "tb1")
                    lines.append({**base, "best": b if ok else w, "worst": w if ok else b})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def score(root: Path, name: str, track, params, correct, *extra) -> Path:
    answers = write_answers(root / f"{name}.jsonl", track, params, correct)
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                "vab-demo",
                "--answers",
                str(answers),
                "--name",
                name,
                "--results",
                str(root / "results"),
                *extra,
            ]
        )
        == 0
    )
    return root / "results" / "vab-demo" / name


GOOD = {"top1": 0.9, "bot1": 0.85, "tb1": 0.8}
BAD = {"top1": 0.3, "bot1": 0.8, "tb1": 0.75}


def set_key(keys: str, value):
    """An edit of run.json: set the dotted key to value."""
    keys = keys.split(".")

    def edit(run):
        d = run
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value

    return edit


@pytest.fixture(scope="module")
def selection(tmp_path_factory):
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    root = tmp_path_factory.mktemp("table_sel")
    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    return {
        name: score(root, name, demo, params, pattern(seed, rates))
        for name, seed, rates in (("good", 1, GOOD), ("bad", 2, BAD), ("good2", 3, GOOD))
    }


def vab_run_args(track, base: str, out: Path, key_env: str, *extra: str) -> list[str]:
    """`pstbench vab run` against the fake endpoint at `base` (model m1, the key in `key_env`), answers in
    OUT/answers.jsonl and runs in OUT/results, a 5 s timeout; `extra` last (a later option wins)."""
    return [
        "vab",
        "run",
        "--track",
        str(track),
        "--model",
        "m1",
        "--api-base",
        base,
        "--api-key-env",
        key_env,
        "--answers",
        str(Path(out) / "answers.jsonl"),
        "--results",
        str(Path(out) / "results"),
        "--timeout",
        "5",
        *extra,
    ]

"""A judge's scores must be numbers: anything else fails the task, numpy scalars are numbers.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import json

import pytest

from pytest_pstbench.cli import main as cli_main


@pytest.mark.parametrize("value, shown", [('"1.0"', "str"), ("True", "bool"), ("b'1'", "bytes"), ("None", "NoneType")])
def test_a_judge_returning_a_non_number_fails_the_task(tmp_path, value, shown):
    """Issue #11 case 11."""
    from pytest_pstbench.selection.demo import build_vab_demo

    vab = build_vab_demo(tmp_path / "vab-demo", size=(32, 24))
    judge = tmp_path / "j.py"
    judge.write_text(f"def score(img):\n    return {value}\n")
    assert (
        cli_main(["vab", "score", "--track", str(vab), "--judge", f"{judge}:score", "--results", str(tmp_path / "r")])
        == 1
    )
    run = json.loads((tmp_path / "r" / "vab-demo" / "score" / "run.json").read_text())
    assert run["complete"] is False and run["n_scored"] == 0
    msg = run["failures"][0]["message"]
    assert msg.startswith(f"judge {judge}:score returned {shown} for task ")
    assert msg.endswith("candidate 0; fix: return one number (int or float, higher = better), not a string or bool")


def test_a_judge_returning_numpy_scalars_is_accepted(tmp_path):
    """Issue #11 case 11."""
    from pytest_pstbench.selection.demo import build_vab_demo

    vab = build_vab_demo(tmp_path / "vab-demo", size=(32, 24))
    judge = tmp_path / "j.py"
    judge.write_text(
        "import numpy as np\ndef score(img):\n    return np.float32(img.mean())\n"
        "def score0d(img):\n    return np.asarray(img.std())\n"
    )
    for fn in ("score", "score0d"):
        assert (
            cli_main(
                ["vab", "score", "--track", str(vab), "--judge", f"{judge}:{fn}", "--results", str(tmp_path / "r")]
            )
            == 0
        )

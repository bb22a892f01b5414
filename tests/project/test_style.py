"""The style is kept by tools, not by review: `ruff check` and `ruff format --check` pass over the whole checkout
with the configuration in pyproject.toml ([tool.ruff]). ruff is pinned in the `test` extra, so every machine
formats alike."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.is_file():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed; fix: pip install -e '.[test]' (the test extra pins it)")
    return [found]


@pytest.mark.parametrize("args", [["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]])
def test_ruff_is_clean(args):
    done = subprocess.run([*_ruff(), *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"ruff {' '.join(args)} failed; fix: ruff format . && ruff check --fix .\n"
        + (done.stdout + done.stderr)[-4000:]
    )

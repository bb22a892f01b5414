"""The package as users install it: a wheel built from this tree, installed non-editable into a
fresh virtual environment, runs `pstbench demo`, `pstbench score` and the pytest plugin.

The fresh environment gets the wheel only; its dependencies (torch, lpips, ...) come from the
environment running the tests, added to its sys.path by a `.pth` line. A folder named in a `.pth`
file is not a site folder, so the `.pth` files inside it (this tree's editable install) are not
processed: `pytest_pstbench` can only come from the installed wheel, which the test checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from helpers.pins import assert_matches_pin

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden" / "demo"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(bin folder of a fresh venv with the wheel installed, its environment variables)."""
    root = tmp_path_factory.mktemp("wheel-install")
    # Build from a copy of the source files only: a stale build/ folder in the tree would otherwise be
    # packed into the wheel and could hide a missing file.
    src = root / "src"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "results", "__pycache__", ".pytest_cache"
        ),
    )
    wheels = root / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = wheels.glob("pytest_pstbench-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    py = bin_dir / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_pstbench_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], capture_output=True, text=True
    )
    assert inst.returncode == 0, inst.stdout + inst.stderr
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(env_dir)
    return bin_dir, env, Path(purelib)


def _run(cmd, cwd, env):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return r


def test_the_wheel_ships_the_package_and_its_data(installed, tmp_path):
    bin_dir, env, purelib = installed
    r = _run(
        [
            str(bin_dir / "python"),
            "-c",
            "import pytest_pstbench, pytest_pstbench.core.protocol as p, pytest_pstbench.paired.variants as v;"
            "print(pytest_pstbench.__file__); print(p.protocols_dir()); print(len(v.shipped_variant_ids()));"
            "print(p.load_protocol('vab').id);"
            "from pytest_pstbench.report.build import page_css; print(page_css().count('{'))",
        ],
        tmp_path,
        env,
    )
    assert r.returncode == 0, r.stderr
    module_file, protocols, n_variants, vab, css_rules = r.stdout.split("\n")[:5]
    # imported from the fresh environment's site-packages, not from this source tree
    assert Path(module_file).resolve().is_relative_to(purelib.resolve())
    assert Path(protocols) == purelib / "pytest_pstbench" / "protocols"
    shipped = sorted(p.stem for p in (REPO / "protocols" / "variants").glob("*.yaml"))
    assert int(n_variants) == len(shipped) > 0
    assert vab == "vab"
    assert int(css_rules) > 20  # the report's style sheet (package data report/page.css)
    # issue #45 item 10: the license ships with the installed package, and its metadata names it
    (dist_info,) = purelib.glob("pytest_pstbench-*.dist-info")
    assert (dist_info / "licenses" / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()
    assert "License-Expression: MIT" in (dist_info / "METADATA").read_text()
    # issue #45 item 6: an extra is added to this installation from the wheel it came from
    r = _run(
        [
            str(bin_dir / "python"),
            "-c",
            "from pytest_pstbench.core.install_hints import extra_install; print(extra_install('iqa'))",
        ],
        tmp_path,
        env,
    )
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(
        r"pip install '/\S+/dist/pytest_pstbench-0\.1\.0-py3-none-any\.whl\[iqa\]'", r.stdout.strip()
    ), r.stdout


def test_demo_score_and_plugin_run_from_the_installed_wheel(installed, tmp_path):
    bin_dir, env, _ = installed
    demo = _run([str(bin_dir / "pstbench"), "demo", "--results", "res"], tmp_path, env)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "Identity" in demo.stdout and "reinhard" in demo.stdout
    reinhard = tmp_path / "res" / "demo" / "reinhard"
    # the demo's run files are pinned (tests/project/golden/demo; tests/helpers/pins.py says how close off the pinning machine)
    for method in ("identity", "reinhard"):
        for name in ("metrics.csv", "summary.json"):
            assert_matches_pin(tmp_path / "res" / "demo" / method / name, GOLDEN / method / name)

    # `pstbench reproduce` scores the run again (no cache) under what run.json records: byte-identical run files
    again = _run(
        [
            str(bin_dir / "pstbench"),
            "reproduce",
            str(reinhard),
            "--outputs",
            str(reinhard / "outputs"),
            "--report",
            str(tmp_path / "reports" / "reinhard.json"),
        ],
        tmp_path,
        env,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "reproduced" in again.stdout and json.loads((tmp_path / "reports" / "reinhard.json").read_text())

    plug = tmp_path / "plug"
    plug.mkdir()
    r = _run(
        [
            str(bin_dir / "python"),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--pstbench-track",
            "demo",
            f"--pstbench-outputs={reinhard / 'outputs'}",
            "--pstbench-name",
            "viaplugin",  # `=`: the folder is not here
            f"--pstbench-results={tmp_path / 'res'}",
            "--pstbench-no-cache",
        ],
        plug,
        env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "10 passed" in r.stdout
    assert (tmp_path / "res" / "demo" / "viaplugin" / "metrics.csv").read_bytes() == (
        reinhard / "metrics.csv"
    ).read_bytes()
    assert (tmp_path / "res" / "demo" / "viaplugin" / "summary.json").read_text().replace(
        '"viaplugin"', '"reinhard"'
    ) == (reinhard / "summary.json").read_text()

    # the board over the demo's runs: the plugin's run has reinhard's outputs, so the two share a rank
    board = _run(
        [
            str(bin_dir / "pstbench"),
            "board",
            "res",
            "--out",
            "site",
            "--reproduced",
            str(tmp_path / "reports"),
        ],
        tmp_path,
        env,
    )
    assert board.returncode == 0, board.stdout + board.stderr
    (track,) = json.loads((tmp_path / "site" / "board.json").read_text())["tracks"]
    rows = {row["name"]: row for row in track["rows"]}
    assert rows["identity"]["reference"] and rows["reinhard"]["rank"] == rows["viaplugin"]["rank"] == 1
    assert rows["reinhard"]["provenance"]["reproduced"] == "reproduced"
    assert rows["viaplugin"]["provenance"].get("reproduced") is None  # no report about that run

"""Issue #45 items 10 and 11: a LICENSE shipped in the sdist (the wheel's is checked by
test_installed_wheel.py), and a way to cite: CITATION.cff and the README's "How to cite"."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import tomllib
import yaml

REPO = Path(__file__).resolve().parents[2]


def test_license_is_mit_and_matches_the_project_metadata():
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Permission is hereby granted, free of charge" in text
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]


def test_the_sdist_ships_the_license_and_the_citation(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "results", "__pycache__", ".pytest_cache"
        ),
    )
    out = tmp_path / "sdist"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))",
            str(out),
        ],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (sdist,) = out.glob("pytest_pstbench-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {Path(*Path(n).parts[1:]).as_posix(): n for n in tar.getnames()}
        assert "LICENSE" in names and "CITATION.cff" in names
        assert tar.extractfile(names["LICENSE"]).read() == (REPO / "LICENSE").read_bytes()


def test_citation_cff_cites_the_kit_and_both_protocol_sources():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["license"] == "MIT"
    assert cff["authors"] and cff["title"].startswith("pytest-pstbench")
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert cff["version"] == version  # kept true when the package version moves
    titles = {r["title"]: r for r in cff["references"]}
    assert "Protocol Matters: Auditing and Standardizing Photorealistic Style Transfer Evaluation" in titles
    vab = titles["Visual Aesthetic Benchmark: Can Frontier Models Judge Beauty?"]
    assert {"type": "other", "value": "arXiv:2605.12684"} in vab["identifiers"]
    assert all(r["authors"] for r in cff["references"])
    for key in ("protocol.id", "protocol.sha256", "dataset.revision"):  # what to report with the numbers
        assert key in cff["message"]


def test_readme_says_how_to_cite_and_what_to_report():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## How to cite\n", 1)[1].split("\n## ", 1)[0]
    for needed in (
        "CITATION.cff",
        "protocol.id",
        "dataset.revision",
        "arXiv:2605.12684",
        "Protocol Matters",
        "LICENSE",
    ):
        assert needed in section, needed

"""Node ids of a track's items: clean JUnit classname/name, `-k` and `--lf` (issue #24)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def test_demo_junit_names_are_clean_and_k_selects_one_pair(pytester):
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    base = (
        "-p",
        "no:cacheprovider",
        "--pstbench-track=demo",
        "--pstbench-outputs=identity",
        f"--pstbench-protocol={proto}",
    )
    r = pytester.runpytest_subprocess(*base, "--junitxml=report.xml")
    assert r.ret == 0, r.stdout.str()
    cases = list(ET.parse(pytester.path / "report.xml").getroot().iter("testcase"))
    from pytest_pstbench.paired.tracks import resolve_track

    pair_ids = resolve_track("demo").pair_ids
    assert len(pair_ids) >= 3
    assert [(c.get("classname"), c.get("name")) for c in cases] == [("pstbench-demo", pid) for pid in pair_ids]

    r = pytester.runpytest_subprocess(*base, "--pstbench-name=one", "-k", "demo-03", "-v")
    r.assert_outcomes(passed=1, deselected=len(pair_ids) - 1)
    r.stdout.fnmatch_lines(["pstbench-demo::demo-03 PASSED*"])


def test_last_failed_reruns_the_failed_pair(pytester):
    manifest = make_track(pytester.path / "track")
    outputs = make_outputs(manifest, pytester.path / "outputs")
    gray = np.asarray(Image.open(outputs / "p02.png").convert("L"))
    Image.fromarray(gray).save(outputs / "p02.png")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    args = (f"--pstbench-track={manifest}", f"--pstbench-outputs={outputs}", f"--pstbench-protocol={proto}", "-v")
    r = pytester.runpytest_subprocess(*args)
    r.assert_outcomes(passed=3, failed=1)
    r.stdout.fnmatch_lines(["FAILED pstbench-small::p02*"])
    r = pytester.runpytest_subprocess(*args, "--lf")
    r.assert_outcomes(failed=1, deselected=3)
    r.stdout.fnmatch_lines(["pstbench-small::p02 FAILED*"])

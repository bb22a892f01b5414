"""Issue #45 item 8: with the outputs folder outside the current folder the item ids read
`../pstbench-demo::demo-01` (the space form made pytest take the folder for a test path and move its
rootdir). The `=` form keeps the documented ids wherever the folder is; the space form that would move
the rootdir is refused with one line giving the `=` form, never run with other ids."""

from __future__ import annotations

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track


@pytest.fixture
def outside(pytester, tmp_path_factory):
    """A track and its outputs in a folder beside (not under) pytester's folder, which has no ini file."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    manifest = make_track(elsewhere / "track", n=3)
    outputs = make_outputs(manifest, elsewhere / "outputs")
    proto = protocol_without_lpips(elsewhere / "proto.yaml")
    return manifest, outputs, proto


def test_ids_are_the_documented_form_with_the_folder_elsewhere(pytester, outside):
    manifest, outputs, proto = outside
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-outputs={outputs}",
        f"--pstbench-protocol={proto}",
        "-v",
    )
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(
        ["pstbench-small::p01 PASSED*", "pstbench-small::p02 PASSED*", "pstbench-small::p03 PASSED*"]
    )
    assert "../" not in r.stdout.str()


def test_the_space_form_that_would_move_the_rootdir_is_refused(pytester, outside):
    manifest, outputs, proto = outside
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        "--pstbench-outputs",
        str(outputs),
        f"--pstbench-protocol={proto}",
        "-v",
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert f"--pstbench-outputs {outputs}: pytest chose its rootdir before the plugin's options were known" in err
    assert (
        "(item ids would read ../pstbench-<track>::<id>)" in err
        and f"fix: give it as --pstbench-outputs={outputs}" in err
    )
    assert "PASSED" not in r.stdout.str()

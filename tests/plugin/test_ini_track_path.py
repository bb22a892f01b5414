"""Issue #32 item 5: an ini `pstbench_track` path is read against the ini file's folder (as the docs say), for
paired and selection tracks alike, through one function (frame.config.track_value): run from a subfolder
that holds another track.yaml, pytest scores the ini's track, not the other one.
Found by the third audit (#32)."""

from __future__ import annotations

from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track


def test_ini_track_is_relative_to_the_ini_folder_not_the_current_folder(pytester, monkeypatch):
    root = pytester.path
    manifest = make_track(root / "track", n=2, track_id="root-track")
    make_track(root / "sub" / "track", n=2, track_id="sub-track")  # the same relative path from sub/
    make_outputs(manifest, root / "outs")
    make_outputs(manifest, root / "sub" / "outs")
    proto = protocol_without_lpips(root / "proto.yaml")
    pytester.makeini(
        f"[pytest]\npstbench_track = track/track.yaml\npstbench_outputs = outs\npstbench_name = m\n"
        f"pstbench_protocol = {proto}\npstbench_results = results\n"
    )
    monkeypatch.chdir(root / "sub")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == 0, "\n".join(result.outlines + result.errlines)
    assert (root / "results" / "root-track" / "m" / "run.json").is_file()
    assert not (root / "results" / "sub-track").exists()


def test_track_value_keeps_ids_and_resolves_paths(pytester):
    from pytest_pstbench.frame.config import track_value

    pytester.makeini("[pytest]\npstbench_track = demo\n")
    config = pytester.parseconfig()
    assert track_value(config) == "demo"
    pytester.makeini("[pytest]\npstbench_track = vab-demo\n")
    assert track_value(pytester.parseconfig()) == "vab-demo"
    pytester.makeini("[pytest]\npstbench_track = tracks/x.yaml\n")
    assert track_value(pytester.parseconfig()) == str(pytester.path / "tracks" / "x.yaml")
    assert (
        track_value(pytester.parseconfig("--pstbench-track=tracks/x.yaml")) == "tracks/x.yaml"
    )  # the command line: as given

"""A results path, a run name, a track id or a pair id the kit cannot use is one line (exit 2), and
nothing is written.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main


def test_a_results_path_that_is_a_file_is_one_line(tmp_path, capsys):
    """Issue #11 case 16."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    (tmp_path / "results").write_text("a file")
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"pstbench: error: --results {tmp_path / 'results'}: is a file, not a folder (run files go to "
        f"{tmp_path / 'results' / 'small' / 'run'}); fix: give --results a folder (or a path that does not exist yet)"
    ]
    assert (tmp_path / "results").read_text() == "a file"


def test_a_read_only_results_path_is_one_line(tmp_path, capsys, monkeypatch):
    """Issue #11 case 16."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    ro = tmp_path / "ro"
    ro.mkdir()
    real_access = os.access
    # (the tests may run as root, for whom a 0555 folder is writable: a read-only file system is simulated)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == ro else real_access(p, mode, **kw))
    capsys.readouterr()
    assert (
        cli_main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                str(outputs),
                "--name",
                "run",
                "--results",
                str(ro / "results"),
                "--protocol",
                str(proto),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"pstbench: error: --results {ro / 'results'}: cannot create the run folder {ro / 'results' / 'small' / 'run'} "
        f"({ro} is not writable); fix: give --results a writable folder"
    ]
    assert os.listdir(ro) == []


@pytest.mark.parametrize(
    "name, rule",
    [
        ("x" * 300, "is 300 bytes long; a run name may have at most 200"),
        ("a\x00b", "contains a control character (\\x00)"),
        ("a\nb", "contains a control character (\\n)"),
    ],
)
def test_bad_run_names_are_refused(tmp_path, capsys, name, rule):
    """Issue #11 case 16."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto, name=name) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"pstbench: error: --name {name!r}: {rule}; fix: ")
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "track_id, rule",
    [
        ('""', "`id` '' must be a non-empty plain name"),
        ("null", "`id` must be a string (a plain name), not null"),
        ('"a\\0b"', "`id` 'a\\x00b' must be a plain name without control characters"),
    ],
)
def test_bad_track_ids_are_refused(tmp_path, capsys, track_id, rule):
    """Issue #11 case 16."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    manifest.write_text(manifest.read_text().replace("id: small", f"id: {track_id}", 1))
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"pstbench: error: {manifest}:1: invalid track manifest: {rule}")  # `id` is on line 1
    assert not (tmp_path / "results").exists()


def test_a_nul_in_a_pair_id_is_refused(tmp_path, capsys):
    """Issue #11 case 16."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    manifest.write_text(manifest.read_text().replace("id: p01", 'id: "p\\0"', 1))
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "pair id 'p\\x00' must be a plain file name stem" in err

"""The default run name: method.yaml's `method`, else a folder name that is not `outputs` (issue #24)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.paired.request import default_run_name


def _folder(path: Path, method=None) -> Path:
    path.mkdir(parents=True)
    if method is not None:
        (path / "method.yaml").write_text(yaml.safe_dump({"method": method}))
    return path


def test_method_yaml_names_the_run(tmp_path):
    assert (
        default_run_name(_folder(tmp_path / "results" / "demo" / "x" / "outputs"), {"method": "reinhard"}) == "reinhard"
    )


def test_folder_named_outputs_gives_its_parent(tmp_path):
    assert default_run_name(_folder(tmp_path / "reinhard" / "outputs"), {}) == "reinhard"
    assert default_run_name(_folder(tmp_path / "mine"), {}) == "mine"


def test_reserved_or_unusable_method_yaml_names_fall_back_to_the_folder(tmp_path):
    folder = _folder(tmp_path / "mine" / "outputs")
    for method in ("identity", "outputs", "a/b", ".hidden", "", 3, None):
        assert default_run_name(folder, {"method": method}) == "mine"


def test_no_usable_name_is_one_line_error(tmp_path):
    folder = _folder(tmp_path / "identity" / "outputs")
    with pytest.raises(UserError) as exc:
        default_run_name(folder, {"method": "identity"}, option="--pstbench-name")
    assert str(exc.value) == (
        f"{folder}: no run name found (method.yaml names no usable `method`, and the folder names 'outputs' / "
        "'identity' are reserved or not plain names); fix: pass --pstbench-name NAME or write `method: NAME` into method.yaml"
    )


@pytest.fixture
def track_and_proto(tmp_path):
    return make_track(tmp_path / "track", n=3), protocol_without_lpips(tmp_path / "proto.yaml")


def test_cli_score_names_the_run_after_method_yaml(tmp_path, monkeypatch, track_and_proto):
    track, proto = track_and_proto
    monkeypatch.chdir(tmp_path)
    out = make_outputs(track, tmp_path / "results" / "small" / "reinhard" / "outputs")
    (out / "method.yaml").write_text(yaml.safe_dump({"method": "reinhard-v2"}))
    assert main(["score", "--track", str(track), "--outputs", str(out), "--protocol", str(proto)]) == 0
    assert (tmp_path / "results" / "small" / "reinhard-v2" / "run.json").is_file()
    assert not (tmp_path / "results" / "small" / "outputs").exists()


def test_cli_score_method_identity_does_not_replace_the_identity_run(tmp_path, monkeypatch, capsys, track_and_proto):
    track, proto = track_and_proto
    monkeypatch.chdir(tmp_path)
    out = make_outputs(track, tmp_path / "mine" / "outputs")
    (out / "method.yaml").write_text(yaml.safe_dump({"method": "identity"}))
    # outputs that say they are Identity are refused (issue #23: Identity is the content images, scored by the kit)
    assert main(["score", "--track", str(track), "--outputs", str(out), "--protocol", str(proto)]) == 2
    assert capsys.readouterr().err.startswith(
        f"pstbench: error: {out / 'method.yaml'}: method 'identity' is reserved for the kit's Identity run"
    )
    assert not (tmp_path / "results").exists()


def test_pytest_names_the_run_after_the_parent_of_outputs(pytester, track_and_proto):
    track, proto = track_and_proto
    out = make_outputs(track, pytester.path / "results" / "small" / "reinhard" / "outputs")
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={track}",
        f"--pstbench-outputs={out}",
        f"--pstbench-protocol={proto}",
    )
    r.assert_outcomes(passed=3)
    assert sorted(p.name for p in (pytester.path / "results" / "small").iterdir()) == ["reinhard"]  # no lock file left
    assert (pytester.path / "results" / "small" / "reinhard" / "outputs" / "p01.png").is_file()  # the outputs are kept
    assert (pytester.path / "results" / "small" / "reinhard" / "summary.json").is_file()

"""`pstbench report`: a published run's paths are read inside its run folder only, and the run.json fields the
page reads are checked by the one validating reader (issue #44 case 9)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from helpers.hub_server import FakeHub, point_at
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main

TOKEN = "hf_pstbenchSECRETtoken0123456789"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = FakeHub().start()
    h.tokens.add(TOKEN)
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    yield h
    h.stop()


def _score(tmp_path, manifest, proto, name="alpha"):
    out = make_outputs(manifest, tmp_path / "outs" / name, strength=0.3)
    assert (
        main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                str(out),
                "--name",
                name,
                "--results",
                str(tmp_path / "results"),
                "--protocol",
                str(proto),
                "--no-cache",
            ]
        )
        == 0
    )
    return tmp_path / "results" / "small" / name


def test_a_published_run_never_shows_a_file_of_this_machine(hub, tmp_path, capsys):
    """Issue #44 case 9: the run.json of a published run names files outside its folder (here the outputs it was
    scored from, which exist on this machine): the report shows none of them, and never opens the local track
    its record names."""
    manifest = make_track(tmp_path / "track", n=3)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    run = _score(tmp_path, manifest, proto)
    assert main(["runs", "push", str(run), "hf://datasets/me/rep/small/alpha", "--create"]) == 0
    capsys.readouterr()
    rep = tmp_path / "hub-report"
    assert main(["report", "hf://datasets/me/rep@main/small/alpha", "--out", str(rep)]) == 0, capsys.readouterr().err
    raw = (rep / "index.html").read_text(encoding="utf-8")
    thumbs = re.findall(r'src="(thumbs/[^"]+)"', raw)
    assert thumbs == []  # no output (they lie outside the run folder) and no track image (the record's manifest)
    assert "is not in the published run" in raw and "could not be opened" in raw
    # the same run read from its local folder: its outputs and track, as recorded
    local = tmp_path / "local-report"
    assert main(["report", str(run), "--out", str(local)]) == 0
    assert len(set(re.findall(r'src="(thumbs/[^"]+)"', (local / "index.html").read_text(encoding="utf-8")))) == 3 * 4


@pytest.mark.parametrize(
    "edit,field",
    [
        (lambda d: d.update(outputs=5), "outputs is a number, not a list"),
        (lambda d: d["outputs"].__setitem__(0, 7), "outputs[0] has a number"),
        (lambda d: d.update(failures=[{"pair": ["p01"], "message": "x"}]), "failures[0] has pair a list"),
        (lambda d: d.update(deviations=3), "deviations is a number"),
        (lambda d: d.update(outputs_dir=["x"]), "outputs_dir is a list"),
    ],
    ids=["outputs-number", "outputs-entry-number", "failure-pair-list", "deviations-number", "outputs-dir-list"],
)
def test_run_json_fields_the_page_reads_are_checked(tmp_path, capsys, edit, field):
    """Issue #44 case 9 (an earlier round's case): run.json's outputs, failures and deviations of another shape
    end `report` in one line naming the field, before anything is drawn (not in a traceback)."""
    manifest = make_track(tmp_path / "track", n=3)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    run = _score(tmp_path, manifest, proto)
    bad = tmp_path / "bad" / "alpha"
    shutil.copytree(run, bad)
    data = json.loads((bad / "run.json").read_text())
    edit(data)
    (bad / "run.json").write_text(json.dumps(data))
    capsys.readouterr()
    code = main(["report", str(bad), "--out", str(tmp_path / "rep"), "--track", str(manifest)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]
    assert len(lines) == 1 and f"{bad / 'run.json'}: {field}" in lines[0], err
    assert not (tmp_path / "rep").exists()

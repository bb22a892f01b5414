"""Each protocol keeps its own Identity run (issue #53 item 11): scoring under a protocol variant into a results
folder used to rescore the track's `identity` run under the variant, after which `pstbench table` refused the
default protocol's runs in that folder ("protocol.id is 'pstbench' but …/identity has 'pstbench+psnr-luma'").
A non-default protocol's Identity run is now `identity@<protocol id>`, beside the default's `identity`."""

from __future__ import annotations

import contextlib
import csv
import io
import json

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main


def _table(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["table", *args, "--format", "csv"])
    return code, out.getvalue(), err.getvalue()


def _identity_psnr(table_csv: str) -> str:
    return next(
        r["value"] for r in csv.DictReader(io.StringIO(table_csv)) if (r["row"], r["metric"]) == ("Identity", "psnr")
    )


@pytest.mark.parametrize("variant", ["psnr-luma", "clustered"])
def test_scoring_under_a_variant_keeps_the_default_protocols_identity(tmp_path, capsys, variant):
    manifest = make_track(tmp_path / "track", n=4)
    base = protocol_without_lpips(tmp_path / "proto.yaml")  # its id stays pstbench, the default protocol's
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.4)
    runs = tmp_path / "results" / "small"

    assert score_cli(tmp_path, manifest, outputs, base, name="a") == 0
    identity = runs / "identity"
    before = {f: (identity / f).read_bytes() for f in ("summary.json", "metrics.csv")}
    code, first_table, err = _table(str(runs / "a"))
    assert code == 0, err

    spec = f"{base}+{variant}"
    assert score_cli(tmp_path, manifest, outputs, spec, name=f"a-{variant}") == 0
    capsys.readouterr()

    # the default protocol's Identity run is untouched, and its table still reads it
    assert {f: (identity / f).read_bytes() for f in before} == before
    assert json.loads((identity / "run.json").read_text())["protocol"]["id"] == "pstbench"
    code, table, err = _table(str(runs / "a"))
    assert code == 0, err
    assert table == first_table
    mean = json.loads(before["summary.json"])["metrics"]["psnr"]["mean"]
    assert float(_identity_psnr(table)) == pytest.approx(mean, rel=1e-12)

    # the variant's Identity run lives beside it, under its own name, and the variant's table reads it
    own = runs / f"identity@pstbench+{variant}"
    run = json.loads((own / "run.json").read_text())
    assert run["protocol"]["id"] == f"pstbench+{variant}" and run["method"]["method"] == "identity"
    assert run["name"] == own.name
    code, variant_table, err = _table(str(runs / f"a-{variant}"), "--protocol", spec)
    assert code == 0, err
    own_mean = json.loads((own / "summary.json").read_text())["metrics"]["psnr"]["mean"]
    assert float(_identity_psnr(variant_table)) == pytest.approx(own_mean, rel=1e-12)
    if variant == "psnr-luma":  # a variant whose Identity numbers differ: the tables read different runs
        assert abs(own_mean - mean) > 0.01


def test_a_users_run_may_not_take_a_protocols_identity_name(tmp_path, capsys):
    manifest = make_track(tmp_path / "track", n=2)
    base = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    assert score_cli(tmp_path, manifest, outputs, base, name="identity@pstbench+clustered") == 2
    assert "reserved for the Identity run" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()

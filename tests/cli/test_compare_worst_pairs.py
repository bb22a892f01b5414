"""Issue #45 item 9 (compare's part): `pstbench compare A B --worst N` lists, per tested metric, the N
pairs the candidate lost most on: both values, the loss in the metric's worse direction, the pair's
files when the track is here. Checked against a hand computation from the runs' metrics.csv."""

from __future__ import annotations

import csv
import json

from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main


def _runs(tmp_path):
    manifest = make_track(tmp_path / "track", n=5)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    base = make_outputs(manifest, tmp_path / "base", 0.6)
    cand = make_outputs(manifest, tmp_path / "cand", 0.6)
    make_outputs(manifest, tmp_path / "far", 0.1)
    for pid in ("p02", "p04"):  # two pairs made worse, p04 by more
        (cand / f"{pid}.png").write_bytes((tmp_path / "far" / f"{pid}.png").read_bytes())
    assert score_cli(tmp_path, manifest, base, proto, name="base") == 0
    assert score_cli(tmp_path, manifest, cand, proto, name="cand") == 0
    runs = tmp_path / "results" / "small"
    return proto, runs


def _column(path, metric):
    with open(path, newline="") as f:
        return {r["pair_id"]: float(r[metric]) for r in csv.DictReader(f)}


def test_worst_pairs_equal_a_hand_computation(tmp_path, capsys):
    proto, runs = _runs(tmp_path)
    capsys.readouterr()
    assert (
        cli_main(
            [
                "compare",
                str(runs / "base"),
                str(runs / "cand"),
                "--protocol",
                str(proto),
                "--metrics",
                "psnr",
                "delta_e00",
                "--worst",
                "3",
                "--json",
            ]
        )
        == 0
    )
    worst = json.loads(capsys.readouterr().out)["worst"]
    for metric, higher_is_better in (("psnr", True), ("delta_e00", False)):
        a, b = _column(runs / "base" / "metrics.csv", metric), _column(runs / "cand" / "metrics.csv", metric)
        loss = {p: (a[p] - b[p]) if higher_is_better else (b[p] - a[p]) for p in a}
        expected = sorted((p for p in loss if loss[p] > 0), key=lambda p: -loss[p])[:3]
        got = [w for w in worst if w["metric"] == metric]
        assert [w["pair"] for w in got] == expected
        assert expected[0] == "p04" and set(expected) == {"p02", "p04"}  # the other pairs are identical: no loss
        for w in got:
            assert w["value_baseline"] == a[w["pair"]] and w["value_candidate"] == b[w["pair"]]
            assert w["loss"] == loss[w["pair"]] and w["content"] is None  # a local track: files not known by id


def test_worst_text_and_refusals(tmp_path, capsys):
    proto, runs = _runs(tmp_path)
    capsys.readouterr()
    assert cli_main(["compare", str(runs / "base"), str(runs / "cand"), "--protocol", str(proto), "--worst", "1"]) == 0
    out = capsys.readouterr().out
    assert "worst pairs (--worst 1: per metric, the pairs the candidate made worse, largest loss first)" in out
    assert "(content and style files not shown: track small is not available here by its id)" in out
    # the reverse direction: nothing is worse in the candidate
    assert (
        cli_main(
            [
                "compare",
                str(runs / "cand"),
                str(runs / "base"),
                "--protocol",
                str(proto),
                "--metrics",
                "psnr",
                "--worst",
                "2",
            ]
        )
        == 0
    )
    assert "worst pairs (--worst 2): no pair is worse in the candidate on any tested metric" in capsys.readouterr().out
    for bad in ("0", "-1", "x"):
        try:
            cli_main(["compare", str(runs / "base"), str(runs / "cand"), "--worst", bad])
        except SystemExit as e:
            assert e.code == 2
        assert "argument --worst: invalid count" in capsys.readouterr().err

"""Issue #45 item 3: a mistyped option, command or name is named with the closest known one and the
subcommand's own help (`--nmae x` answered `fix: see pstbench --help`; `--trak demo` only that --track
is required; `--track dmeo` listed the tracks without "did you mean demo")."""

from __future__ import annotations

import pytest

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import closest


def _error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    assert e.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_an_unknown_option_is_named_with_the_closest_and_the_subcommand_help(capsys, tmp_path):
    line = _error(capsys, ["score", "--track", "demo", "--outputs", str(tmp_path), "--nmae", "x"])
    assert (
        line == "pstbench score: error: unknown option --nmae (did you mean --name?); fix: see `pstbench score --help`"
    )
    line = _error(capsys, ["vab", "score", "--track", "vab-demo", "--judgee=x"])
    assert (
        line
        == "pstbench vab score: error: unknown option --judgee (did you mean --judge?); fix: see `pstbench vab score --help`"
    )


def test_a_mistyped_required_option_is_named_beside_the_requirement(capsys, tmp_path):
    line = _error(capsys, ["score", "--trak", "demo", "--outputs", str(tmp_path)])
    assert line == (
        "pstbench score: error: the following arguments are required: --track (--trak is not an option of "
        "pstbench score; did you mean --track?); fix: see `pstbench score --help`"
    )


def test_a_mistyped_command_or_choice_gets_the_closest(capsys):
    assert "invalid choice: 'scor'" in (line := _error(capsys, ["scor"])) and line.endswith(
        "; did you mean score?; fix: see `pstbench --help`"
    )
    assert _error(capsys, ["weights", "fetch", "--net", "alx"]).endswith(
        "did you mean alex?; fix: see `pstbench weights fetch --help`"
    )


def test_an_abbreviation_argparse_accepts_is_not_called_unknown(capsys):
    line = _error(capsys, ["compare", "--jsn"])  # --jsn is a typo; the missing RUN_DIRs are the error
    assert "--jsn is not an option of pstbench compare; did you mean --json?" in line


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["score", "--track", "dmeo", "--outputs", "."], "--track dmeo: unknown track (did you mean demo?)"),
        (
            ["vab", "score", "--track", "vab-dmo", "--judge", "x:y"],
            "--track vab-dmo: unknown selection track (did you mean vab-demo?)",
        ),
        (
            ["score", "--track", "demo", "--outputs", ".", "--protocol", "pstbnch"],
            "protocol file not found (did you mean pstbench?)",
        ),
    ],
)
def test_a_mistyped_name_gets_the_closest_known_name(capsys, argv, hint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 1


def test_metric_names_are_suggested_in_every_lookup(capsys, tmp_path):
    from helpers.protocols import protocol_without_lpips
    from helpers.scoring import score_cli
    from helpers.tracks import make_outputs, make_track

    manifest = make_track(tmp_path / "track", n=3)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    for name in ("a", "b"):
        assert score_cli(tmp_path, manifest, make_outputs(manifest, tmp_path / name), proto, name=name) == 0
    runs = [str(tmp_path / "results" / "small" / n) for n in ("a", "b")]
    capsys.readouterr()
    for argv in (
        ["compare", *runs, "--metrics", "psrn"],
        ["compare", *runs, "--margin", "psrn=1"],
        ["table", *runs, "--metrics", "psrn"],
    ):
        assert cli_main([*argv, "--protocol", str(proto)]) == 2, argv
        assert capsys.readouterr().err.rstrip().endswith("did you mean psnr?"), argv


def test_closest_needs_a_real_resemblance():
    assert closest("dmeo", ["demo", "pst50-paired"]) == "demo"
    assert closest("zzzz", ["demo", "pst50-paired"]) is None

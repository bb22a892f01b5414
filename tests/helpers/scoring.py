"""`pstbench score` called in-process on a track, outputs and protocol, with the results under a test's folder."""

from __future__ import annotations

from pytest_pstbench.cli import main as cli_main


def score_cli(tmp_path, manifest, outputs, proto, *extra, name="run", results="results"):
    """The exit status of `pstbench score` with results in tmp_path / results."""
    return cli_main(
        [
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(outputs),
            "--name",
            name,
            "--results",
            str(tmp_path / results),
            "--protocol",
            str(proto),
            *extra,
        ]
    )

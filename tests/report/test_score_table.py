"""Issue #32 item 7: `pstbench score --outputs A B` where B has 2 of 4 pairs: the table's header gives the
track's n and B's row says it is incomplete (paired.tables.run_table, the one renderer of score tables).
Found by the third audit (#32)."""

from __future__ import annotations

import contextlib
import io

from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def test_an_incomplete_row_is_marked_and_the_header_has_the_tracks_n(tmp_path):
    track = make_track(tmp_path / "track", n=4)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    a = make_outputs(track, tmp_path / "A")
    b = make_outputs(track, tmp_path / "B", strength=0.8)
    for pid in ("p03", "p04"):
        (b / f"{pid}.png").unlink()
    for order in ((a, b), (b, a)):
        code, out, err = _cli(
            "score", "--track", track, "--outputs", *order, "--protocol", proto, "--results", tmp_path / "results"
        )
        assert code == 1, err  # B's missing pairs
        lines = out.splitlines()
        assert lines[0].endswith("n=4"), lines[0]
        row_b = next(line for line in lines if line.startswith("B"))
        row_a = next(line for line in lines if line.startswith("A"))
        assert "incomplete: 2 of 4 pairs" in row_b, out
        assert "incomplete" not in row_a and "incomplete" not in next(
            line for line in lines if line.startswith("Identity")
        )

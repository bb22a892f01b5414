"""Issue #32 item 9: reserved run names (Identity, the selection table's Random row) are compared after
Unicode NFKC normalisation and case folding, by one function (core.store.names.is_reserved_name) that the run
name check, the Identity refusal and the paper table's row checks all use. Found by the third audit (#32)."""

from __future__ import annotations

import contextlib
import io

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.store.names import is_reserved_name

FULLWIDTH_IDENTITY = "\uff29\uff24\uff25\uff2e\uff34\uff29\uff34\uff39"  # ＩＤＥＮＴＩＴＹ


@pytest.mark.parametrize(
    "name",
    [
        "identity",
        "Identity",
        "IDENTITY ",
        FULLWIDTH_IDENTITY,
        "\uff49dentity",
        "Ｉｄｅｎｔｉｔｙ",
        "i\u200bdentity",
        "ident\u0130ty".replace("\u0130", "I"),
    ],
)
def test_reads_as_identity(name):
    assert is_reserved_name(name, "identity")


@pytest.mark.parametrize("name", ["identity2", "my-identity", "reinhard", "idem"])
def test_other_names_are_not_reserved(name):
    assert not is_reserved_name(name, "identity")


def test_random_row_name_is_reserved_in_any_spelling():
    assert is_reserved_name("\uff32\uff21\uff2e\uff24\uff2f\uff2d", "Random")  # ＲＡＮＤＯＭ


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_score_refuses_a_fullwidth_identity_name(tmp_path):
    track = make_track(tmp_path / "track", n=2)
    outputs = make_outputs(track, tmp_path / "outs")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    code, out, err = _cli(
        "score",
        "--track",
        str(track),
        "--outputs",
        str(outputs),
        "--protocol",
        str(proto),
        "--results",
        str(tmp_path / "results"),
        "--name",
        FULLWIDTH_IDENTITY,
    )
    assert code != 0
    assert "reserved for the Identity run" in err and "Traceback" not in err
    assert not (tmp_path / "results" / "small" / FULLWIDTH_IDENTITY).exists()

"""Issue #32 item 6: a bound given twice (`--pstbench-min psnr=25 --pstbench-min psnr=10`, or two ini lines)
is refused as a margin given twice is, by the one KEY=VALUE parser of core/gate.py.
Found by the third audit (#32)."""

from __future__ import annotations

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.gate import parse_bounds, parse_margins
from pytest_pstbench.core.protocol import load_protocol

PROTOCOL = load_protocol()


def test_duplicate_min_bound_with_other_value_is_refused():
    with pytest.raises(UserError, match=r"--pstbench-min: two values for psnr \(25 and 10\); fix: give one"):
        parse_bounds(["psnr=25", "psnr=10"], "min", PROTOCOL)


def test_duplicate_bound_with_same_value_is_kept_once_like_margins():
    assert parse_bounds(["psnr=25", "psnr=25"], "max", PROTOCOL) == {"psnr": 25.0}
    assert parse_margins(["psnr=0.1", "psnr=0.1"], PROTOCOL) == {"psnr": 0.1}


def test_duplicate_selection_bound_is_refused():
    from pytest_pstbench.core.protocol import load_protocol as load
    from pytest_pstbench.selection.compare import parse_selection_bounds

    proto = load("vab")
    with pytest.raises(UserError, match="two values for tb1.pass\\^3"):
        parse_selection_bounds(["tb1.pass^3=0.3", "tb1.pass^3=0.1"], "min", proto)


def test_duplicate_ini_bounds_fail_the_session(pytester):
    """Two ini lines for one metric: a usage error before anything is scored, not 'the last wins'."""
    pytester.makeini("[pytest]\npstbench_min =\n    psnr=25\n    psnr=10\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_inprocess("--pstbench-track=demo")
    assert result.ret != 0
    assert "two values for psnr (25 and 10)" in "\n".join(result.outlines + result.errlines)

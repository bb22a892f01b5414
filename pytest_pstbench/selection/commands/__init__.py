"""The selection kind's `pstbench` commands: `pstbench vab ...` (its KindSpec's `commands` hook adds them), and
its `score` hook: `pstbench score` of a selection track, which a judge scores instead (`pstbench vab score`)."""

from __future__ import annotations


def cmd_score(args) -> int:
    """`pstbench score --track T` of a selection track: refused in one line naming the command that scores it."""
    from pytest_pstbench.core.errors import UserError

    raise UserError(
        f"--track {args.track}: a selection track (best/worst judgment), not a paired track; "
        f"fix: pstbench vab score --track {args.track} --judge MODULE:FUNCTION|--answers FILE"
    )

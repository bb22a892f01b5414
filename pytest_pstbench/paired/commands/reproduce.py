"""`pstbench reproduce` of a paired run (the kind's `reproduce` hook): the method's outputs scored again through
the kind's one scoring path (paired.request.open_on, paired.planner.score_run) under the run's recorded protocol
file, track at its dataset revision, device and torch thread count, without the score cache, into a scratch
folder; metrics.csv and summary.json must then be byte-identical to the run's."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from pytest_pstbench.core.errors import UserError

# The most torch threads a recorded run may ask for: run.json is a stranger's text, and torch given 100,000
# threads crashes the process (a segmentation fault in its first matrix product); no machine scores with more.
MAX_THREADS = 1024


@contextmanager
def _torch_threads(threads, where: str = "run.json"):
    """torch's intra-op thread count set to the run's recorded one while it is scored again (LPIPS's last digits
    depend on it: paired.scorecache.compute_threads); unchanged where the run records none, or more than
    MAX_THREADS (said on stderr; the report's environment then names the difference)."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        yield
        return
    if threads > MAX_THREADS:
        print(
            f"pstbench: warning: {where} records torch_threads {threads}, more than {MAX_THREADS}: not applied, "
            "scored with this machine's thread count (LPIPS's last digits may differ)",
            file=sys.stderr,
        )
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def reproduce(request):
    """The paired run `request.run` scored again from `request.outputs` -> core.reproduce.Reproduction."""
    from pytest_pstbench.core.reproduce import (
        Reproduction,
        check_track,
        failure_lines,
        file_differences,
        recorded_protocol,
        track_spec,
    )
    from pytest_pstbench.core.store.reader import run_field
    from pytest_pstbench.paired.identity import is_identity_spec
    from pytest_pstbench.paired.planner import score_run
    from pytest_pstbench.paired.request import ScoreRequest, open_on
    from pytest_pstbench.paired.tracks import resolve_track

    run = request.run
    outputs = str(request.outputs)
    if not is_identity_spec(outputs) and not Path(outputs).is_dir():
        raise UserError(
            f"--outputs {outputs}: not a folder; fix: give the method's outputs folder the run was scored from "
            "(one <pair_id>.png per pair)"
        )
    protocol = recorded_protocol(run, request.protocol_spec)
    track = resolve_track(track_spec(run, request.track_spec), progress=request.progress)
    check_track(run, track)
    then = run_field(run, "environment") if isinstance(run_field(run, "environment"), dict) else {}
    device = request.device or (then.get("device") if isinstance(then.get("device"), str) else "cpu")
    scoring = open_on(
        ScoreRequest(
            track=track.id,
            outputs=outputs,
            name=str(run.record.name),
            results=Path(request.work),
            allow_resize=run_field(run, "allow_resize") is True,
            device=device,
            use_cache=False,
            command="pstbench reproduce",
        ),
        protocol,
        track,
    )
    with _torch_threads(then.get("torch_threads") if device == "cpu" else None, str(Path(run.path) / "run.json")):
        outcome = score_run(scoring.session, scoring.outputs, progress=request.progress)
    return Reproduction(
        kind="paired",
        compared=("metrics.csv", "summary.json"),
        differences=file_differences(run.path, outcome.run_dir, "metrics.csv", "pair_id"),
        then=then,
        now=outcome.run.get("environment") or {},
        failures=failure_lines(outcome.run, "pair"),
    )

"""The worst pairs of a comparison: per tested metric, the pairs on which the candidate lost most against
its baseline (`pstbench compare --worst N`, a failed gate's summaries). The loss of a pair is the
difference in the metric's worse direction (baseline - candidate for a higher-is-better metric, candidate
- baseline for a lower-is-better one, per-pair direction as the tests use it), so a positive loss is a
pair the candidate made worse; ties and gains are never listed. Ordered by loss, largest first, then by
pair id. The pair's content and style files come from the track when it resolves here by its id at the
run's dataset revision (the demo, a fetched remote track); otherwise they are left out, and said so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class WorstPair:
    metric: str
    baseline: str
    candidate: str
    pair: str
    value_baseline: float
    value_candidate: float
    loss: float  # > 0: the candidate is worse on this pair by this much (metrics.csv units)
    content: str | None = None
    style: str | None = None


def worst_pairs(pairs_of_runs, metrics, protocol, n: int, files: dict | None = None) -> list[WorstPair]:
    """Per (baseline, candidate) of `pairs_of_runs` and metric of `metrics`: the `n` pairs of largest
    positive loss. `files`: pair id -> (content, style) paths, or None."""
    from pytest_pstbench.paired.aggregation import per_pair_higher_is_better

    out = []
    for base, cand in pairs_of_runs:
        for m in metrics:
            hib = per_pair_higher_is_better(protocol, m)
            losses = []
            for pid, row in base.scores.items():
                a, b = row.get(m), cand.scores.get(pid, {}).get(m)
                if a is None or b is None:
                    continue
                loss = (a - b) if hib else (b - a)
                if loss > 0:
                    losses.append((loss, pid, a, b))
            losses.sort(key=lambda t: (-t[0], t[1]))
            for loss, pid, a, b in losses[:n]:
                content, style = (files or {}).get(pid, (None, None))
                out.append(WorstPair(m, base.name, cand.name, pid, a, b, loss, content, style))
    return out


def track_files(summary: dict) -> dict | None:
    """pair id -> (content, style) of the runs' track, when it resolves here by its id at their revision."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.data.manifest import remote_track_ids
    from pytest_pstbench.paired.tracks import BUILTIN_TRACKS, resolve_track

    track_id = summary.get("track")
    if track_id not in (*BUILTIN_TRACKS, *remote_track_ids()):
        return None  # a local track's id is not a path: its files are not known here
    try:
        track = resolve_track(track_id)
    except UserError:  # a remote track not fetched here
        return None
    if track.revision != summary.get("dataset_revision"):
        return None
    return {p.id: (str(p.content), str(p.style)) for p in track.pairs}


def worst_text(worst: list[WorstPair], protocol, n: int, files_known: bool, track_id: str) -> str:
    """The table `pstbench compare --worst N` prints under the comparison."""
    from tabulate import tabulate

    if not worst:
        return f"worst pairs (--worst {n}): no pair is worse in the candidate on any tested metric"
    body = []
    for w in worst:
        params = protocol.metrics[w.metric]
        body.append(
            [
                f"{params['label']}{'↑' if params['higher_is_better'] else '↓'}",
                w.baseline,
                w.candidate,
                *worst_cells(w, protocol, files_known),
            ]
        )
    headers = [
        "metric",
        "baseline",
        "candidate",
        "pair",
        "baseline value",
        "candidate value",
        "loss",
        *(["content", "style"] if files_known else []),
    ]
    note = (
        ""
        if files_known
        else f"\n(content and style files not shown: track {track_id} is not available here by its id)"
    )
    return (
        f"worst pairs (--worst {n}: per metric, the pairs the candidate made worse, largest loss first)\n"
        f"{tabulate(body, headers=headers, tablefmt='simple', disable_numparse=True)}{note}"
    )


def worst_cells(w: WorstPair, protocol, files_known: bool) -> list[str]:
    """A worst pair's cells as every table shows them: pair id, both values and the loss (one decimal more
    than the protocol's), then the content and style files when they are known."""
    dec = int(protocol.metrics[w.metric].get("decimals", 4)) + 1
    return [
        w.pair,
        f"{w.value_baseline:.{dec}f}",
        f"{w.value_candidate:.{dec}f}",
        f"{w.loss:.{dec}f}",
        *([w.content or "-", w.style or "-"] if files_known else []),
    ]


def gate_worst(row, base, cand, protocol, n: int, files: dict | None = None):
    """A failed gate's summaries (`RunKind.gate_worst`): for the metric of `row` the candidate is significantly
    worse on against `base`, the `n` pairs it lost most on (`files`: pair id -> (content, style), the track the
    session scored, else the track found by its id as `compare --worst` finds it)."""
    from pytest_pstbench.core.gate import WorstItems

    if files is None:
        files = track_files(cand.summary)
    worst = worst_pairs([(base, cand)], [row.metric], protocol, n, files)
    params = protocol.metrics[row.metric]
    label = f"{params['label']}{'↑' if params['higher_is_better'] else '↓'} ({row.metric})"
    known = files is not None
    return WorstItems(
        title=(
            f"{label} against baseline run {base.name}: the {len(worst)} pair{'' if len(worst) == 1 else 's'} the "
            f"candidate lost most on (loss in metrics.csv units, largest first)"
        ),
        headers=("pair", "baseline value", "candidate value", "loss", *(("content", "style") if known else ())),
        rows=tuple(tuple(worst_cells(w, protocol, known)) for w in worst),
        note="" if worst else "no pair is worse in the candidate on this metric",
    )


def worst_json(worst: list[WorstPair]) -> list[dict]:
    return [asdict(w) for w in worst]

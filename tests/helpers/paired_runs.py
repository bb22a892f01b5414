"""Paired run folders written by hand in the documented formats, independent of the scoring engine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pytest_pstbench.core.protocol import load_protocol

PROTOCOL = load_protocol()
METRICS = PROTOCOL.metric_names


def write_run(
    root: Path,
    name: str,
    scores: dict[str, dict[str, float]],
    *,
    track="t",
    revision="r1",
    protocol_sha=None,
    complete=True,
) -> Path:
    """A run folder written by hand in the documented formats (independent of the scoring engine)."""
    d = root / track / name
    d.mkdir(parents=True)
    lines = ["pair_id," + ",".join(METRICS)]
    for pid, vals in scores.items():
        lines.append(pid + "," + ",".join(repr(float(vals[m])) for m in METRICS))
    (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    from pytest_pstbench.paired.aggregation import summary_entry  # the kit's entry: compare recomputes and checks it

    means = {m: summary_entry([vals[m] for vals in scores.values()], PROTOCOL, m) for m in METRICS}
    (d / "summary.json").write_text(
        json.dumps(
            {
                "track": track,
                "protocol": "pstbench",
                "dataset_revision": revision,
                "name": name,
                "n": len(scores),
                "complete": complete,
                "metrics": means,
            }
        )
    )
    (d / "run.json").write_text(
        json.dumps(
            {
                "protocol": {"id": "pstbench", "sha256": protocol_sha or PROTOCOL.sha256},
                "name": name,
                "track": track,
                "dataset": {"id": track, "revision": revision},
                "complete": complete,
                "n_pairs": len(scores),
                "n_scored": len(scores) if complete else len(scores) - 1,
            }
        )
    )
    return d


def scores_from(columns: dict[str, np.ndarray], n: int) -> dict[str, dict[str, float]]:
    base = {m: np.full(n, 0.5) for m in METRICS}
    base.update(columns)
    return {f"p{i:02d}": {m: float(base[m][i]) for m in METRICS} for i in range(n)}

"""`pstbench runs eval-results RUN --dataset-id OWNER/NAME`: a run's numbers as the Hub's evaluation results, the
`.eval_results/*.yaml` file a model repository holds (https://huggingface.co/docs/hub/eval-results), built with
huggingface_hub's own types (`EvalResultEntry`, `eval_result_entries_to_yaml`).

The run is read as the board reads it (collect.py: the run store, the kind's validating reader) and its numbers are
the board's row values (the kind's `history_values`: each ranked metric's value and interval as the run's
summary gives it; a selection run's METRIC.OUTCOME accuracies, ap@1 and pass^3, as `pstbench table` shows them).
One entry per number:

- dataset: `--dataset-id` (the benchmark's Hub dataset), task_id the metric (`--task-id T`: `T.METRIC`), revision
  the dataset revision the run records;
- value: the run's number; date: run.json's `created` (when it is ISO-8601; else none: the Hub takes the commit's);
- source: for a published run (hf://...), the web address of its pinned folder on the Hub; a local run folder has
  none (the notes say so: push it with `pstbench runs push` and give its pinned URI to name the source);
- notes: the run's name, method, interval, protocol (id and sha256), n and pinned URI, verbatim (the YAML is
  written ASCII-only: every other character escaped, so a run's text stays data on a page and a terminal).

The file is `.eval_results/<dataset NAME>-<T or track>.yaml` (characters other than letters, digits, '.', '_', '-'
replaced by '_'): a newer run of the same track replaces the model's file for it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.text import one_line

EVAL_RESULTS_FOLDER = ".eval_results"  # huggingface_hub.constants.EVAL_RESULTS_FOLDER
TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
FIX_RUN = "fix: give one run folder (results/<track>/<name>) or the URI of one published run"


@dataclass
class EvalResults:
    """The `.eval_results` file of one run: its path in the repo, its YAML and what it was made from."""

    path: str  # .eval_results/NAME.yaml
    text: str
    entries: list  # huggingface_hub.EvalResultEntry
    run: object  # the board's BoardRun
    published: bool


def one_run(address: str, protocol_spec=None):
    """The run at `address` (a run folder or a published run URI) as the board reads it, complete; UserError else."""
    from pytest_pstbench.board.collect import collect
    from pytest_pstbench.core.store.backends import is_published

    if not is_published(address) and not os.path.isdir(address):
        raise UserError(f"RUN {one_line(address)}: not a folder nor a published run URI; {FIX_RUN}")
    tracks, left = collect([address], protocol_spec=protocol_spec)
    runs = [r for t in tracks for r in t.runs]
    if left and not runs:
        reason = left[0].reason
        raise UserError(f"RUN {one_line(left[0].what)}: {reason}" + ("" if "fix:" in reason else f"; {FIX_RUN}"))
    if len(runs) + len(left) != 1:
        raise UserError(f"RUN {one_line(address)}: holds {len(runs) + len(left)} runs, not one; {FIX_RUN}")
    br = runs[0]
    if not br.run.record.complete:
        raise UserError(
            f"RUN {one_line(address)}: run.json says complete: false; only a complete run has results to publish; "
            "fix: score every item, then try again"
        )
    return br


def check_task_id(task_id: str | None) -> str | None:
    if task_id is not None and not TASK_ID.fullmatch(task_id):
        raise UserError(
            f"--task-id {one_line(task_id[:80])}: not a task id (letters, digits, '.', '_', '-', at most 64, "
            "starting with a letter or digit); fix: give the task's id as the benchmark's eval.yaml declares it"
        )
    return task_id


def _date(created) -> str | None:
    from datetime import datetime

    if not isinstance(created, str):
        return None
    try:
        datetime.fromisoformat(created)
    except ValueError:
        return None
    return created


def _notes(br, key: str, v: dict, prov: dict) -> str:
    rec = br.run.record
    parts = [
        f"pstbench run {rec.name}",
        f"method {prov.get('method') or prov.get('judge_model') or '-'}",
        f"{key} {v['mean']!r} with interval [{v.get('low')!r}, {v.get('high')!r}] as the run's summary gives it",
        f"protocol {rec.protocol_id} (sha256 {rec.protocol_sha256})",
        f"n {rec.n_scored}",
        prov.get("uri") or "a local run, not published (no source)",
    ]
    return "; ".join(parts)


def entries_of(br, dataset_id: str, task_id: str | None) -> list:
    """One EvalResultEntry per number of the run's board row (`history_values`), in the protocol's order."""
    from huggingface_hub import EvalResultEntry

    from pytest_pstbench.board.page import provenance
    from pytest_pstbench.core.hub.endpoint import where

    prov = provenance(br)
    values = br.kind.history_values(br.run, br.protocol, None)
    src = br.source
    url = (
        f"{where()}/datasets/{src.repo_id}/tree/{src.commit}/{src.path_in_repo or ''}".rstrip("/") if src.uri else None
    )
    out = []
    for key, v in values.items():
        if v.get("mean") is None:
            continue
        out.append(
            EvalResultEntry(
                dataset_id=dataset_id,
                task_id=f"{task_id}.{key}" if task_id else key,
                value=float(v["mean"]),
                dataset_revision=br.run.record.dataset_revision,
                date=_date(prov.get("created")),
                source_url=url,
                source_name="pstbench run files" if url else None,
                notes=_notes(br, key, v, prov),
            )
        )
    if not out:
        raise UserError(f"RUN {br.source}: no ranked metric has a value; fix: give a run that scored its items")
    return out


def to_yaml(entries: list) -> str:
    """The `.eval_results` YAML of `entries` (huggingface_hub's layout), ASCII only: any other character escaped."""
    import yaml
    from huggingface_hub import eval_result_entries_to_yaml

    return yaml.safe_dump(
        eval_result_entries_to_yaml(entries), sort_keys=False, allow_unicode=False, width=4096, default_flow_style=False
    )


def file_name(dataset_id: str, task_id: str | None, track: str) -> str:
    stem = f"{dataset_id.partition('/')[2]}-{task_id or track}"
    return f"{EVAL_RESULTS_FOLDER}/{re.sub(r'[^A-Za-z0-9._-]', '_', stem)[:120]}.yaml"


def eval_results(
    address: str, dataset_id: str, task_id: str | None = None, protocol_spec=None, push_to: str | None = None
) -> EvalResults:
    """The `.eval_results` file of the run at `address` for the benchmark dataset `dataset_id` (`push_to`: the
    model repo it will be pushed to, checked first)."""
    from pytest_pstbench.core.hub.uri import check_repo_id

    check_repo_id(dataset_id, "--dataset-id")
    check_task_id(task_id)
    if push_to is not None:
        check_repo_id(push_to, "--push", "model")
    br = one_run(str(address), protocol_spec)
    entries = entries_of(br, dataset_id, task_id)
    path = file_name(dataset_id, task_id, br.run.record.track)
    return EvalResults(path, to_yaml(entries), entries, br, br.source.uri is not None)


def write(results: EvalResults, out) -> Path:
    """`results` written under the folder `out` (`out/.eval_results/NAME.yaml`, replaced atomically)."""
    from pytest_pstbench.core.files.write import write_atomic

    target = Path(out) / results.path
    if Path(out).exists() and not Path(out).is_dir():
        raise UserError(
            f"--out {out}: is a file, not a folder; fix: give a folder (its {EVAL_RESULTS_FOLDER}/ is written)"
        )
    write_atomic(target, results.text, what="the eval results", fix="give --out a folder in a writable place")
    return target


def push(results: EvalResults, repo_id: str) -> str:
    """Open a pull request adding the file to the model (or judge) repository `repo_id`; its URL is returned."""
    from pytest_pstbench.core.hub.pull_request import open_pull_request

    rec = results.run.run.record
    return open_pull_request(
        repo_id,
        {results.path: results.text.encode("ascii")},
        title=f"Add evaluation results on {results.entries[0].dataset_id} (pstbench, {len(results.entries)} entries)",
        description=(
            f"Evaluation results of pstbench run {one_line(rec.name)[:200]} on track {one_line(rec.track)[:200]} "
            f"(protocol {one_line(rec.protocol_id)[:100]}), written by `pstbench runs eval-results`."
        ),
        option="--push",
    )

"""`pstbench vab export`: what a model must answer, written as a folder.

`export_track` writes, for every task and trial, the candidate images in presentation order
(`A.jpg`, `B.jpg`, ...; under the vab protocol re-encoded as the official toolkit does: RGB, JPEG
quality 85, no resizing), the header text for each prompt type, `export.json` (labels -> original
candidates) and `requests.jsonl` (one request per line, with the official message layout); with the
re-ask list of `answers.retry_requests`, only those requests.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import staging_dir
from pytest_pstbench.selection.ask.message import encode_image, message_content, prompt_text
from pytest_pstbench.selection.permutations import orders_for

EXPORT_MANIFEST = "export.json"
REQUESTS = "requests.jsonl"


@dataclass(frozen=True)
class ExportSummary:
    out: Path
    n_tasks: int
    n_requests: int
    n_images: int


def export_track(track, protocol, out: Path, progress=None, only: dict | None = None) -> ExportSummary:
    """Write the export folder `out` atomically (temporary folder beside it, then rename).

    `only`: {(task_id, trial, prompt_type): attempt} -- write just these requests (the re-ask list of
    `retry_requests`), each line carrying the attempt number to answer with."""
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import check_track

    params = SelectionParams.of(protocol)
    check_track(track, params)
    out = Path(out).absolute()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out}: export folder exists and is not empty; fix: give a new folder (or remove this one)")
    say = progress or (lambda _m: None)
    n_images = n_requests = 0
    with staging_dir(out, what="write the export", fix="choose a writable folder", tag="export") as tmp:
        tasks_json = []
        with open(tmp / REQUESTS, "w", encoding="utf-8", newline="\n") as req:
            for task in track.tasks:
                orders = orders_for(task, params)
                trials, images, requests = _export_task(tmp, req, task, orders, params, only)
                n_images += images
                n_requests += requests
                if trials:
                    tasks_json.append(
                        {"task_id": task.id, "k": task.k, "domain": task.domain, "topic": task.topic, "trials": trials}
                    )
                say(f"export: {task.id} ({task.k} candidates, {len(orders)} trials)")
        manifest = {
            "track": track.id,
            "retry": only is not None,
            "dataset": {"id": track.dataset_id, "revision": track.revision},
            "protocol": {"id": protocol.id, "sha256": protocol.sha256},
            "trials": params.trials,
            "answer_format": "JSON Lines: {task_id, trial, prompt_type, response[, attempt]} or {task_id, trial, prompt_type, error[, attempt]} or {task_id, trial, prompt_type, best, worst}; labels as presented",
            "image": (params.message or {}).get("image") or "original bytes",
            "tasks": tasks_json,
        }
        (tmp / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (tmp / "README.txt").write_text(_EXPORT_README.format(track=track.id), encoding="utf-8")
        try:  # never replaces a folder with content: only an empty `out` (checked above) is removed
            if out.is_dir():
                out.rmdir()
            os.rename(tmp, out)
        except OSError as exc:
            raise UserError(f"{out}: could not move the export into place ({exc}); fix: give a new folder") from None
    return ExportSummary(out, len(track.tasks), n_requests, n_images)


def _export_task(tmp: Path, req, task, orders, params, only) -> tuple[list, int, int]:
    """One task's trials written under `tmp` (its images in presentation order, its prompt texts) and its requests
    to `req`; its trials as export.json records them, and the images and requests written."""
    image_spec = (params.message or {}).get("image")
    n_images = n_requests = 0
    trials = []
    for t, order in enumerate(orders):
        ptypes = [p for p in params.prompt_types_for(task.k) if only is None or (task.id, t, p) in only]
        if not ptypes:
            continue
        folder = Path("tasks") / task.id / f"trial-{t}"
        (tmp / folder).mkdir(parents=True)
        labels = params.labels[: task.k]
        images, mapping = [], {}
        for pos, idx in enumerate(order):
            src = task.candidates[idx]
            data, suffix = encode_image(src, image_spec)
            rel = (folder / f"{labels[pos]}{suffix}").as_posix()
            (tmp / rel).write_bytes(data)
            n_images += 1
            images.append(rel)
            mapping[labels[pos]] = {"index": idx, "file": src.name}
        prompts = {}
        for ptype in ptypes:
            text = prompt_text(params, ptype, task.k)
            prel = (folder / f"{ptype}.txt").as_posix()
            (tmp / prel).write_text(text, encoding="utf-8", newline="\n")
            prompts[ptype] = prel
            line = {
                "task_id": task.id,
                "trial": t,
                "prompt_type": ptype,
                "labels": labels,
                "images": images,
                "prompt": text,
                "content": message_content(params, ptype, labels, images),
            }
            if only is not None:
                line["attempt"] = only[(task.id, t, ptype)]
            req.write(json.dumps(line, ensure_ascii=False) + "\n")
            n_requests += 1
        trials.append({"trial": t, "order": list(order), "labels": mapping, "images": images, "prompts": prompts})
    return trials, n_images, n_requests


_EXPORT_README = """pstbench export of selection track {track}

requests.jsonl   one request per line: task_id, trial, prompt_type, labels, images (paths in
                 presentation order, labelled A, B, C, ...), prompt (the header text) and content
                 (the user message as the official toolkit lays it out: the header, then per image
                 a text part "\\nImage X:" and the image; send the image as a data URL of its bytes);
                 in a re-ask list (--retry) also attempt: the attempt number to record
export.json      for each task and trial: the order and the label -> original candidate mapping
tasks/<task>/trial-<t>/   the images (A.jpg, B.jpg, ...; under vab: convert("RGB"), JPEG quality 85, as the
                 official toolkit sends them) and one <prompt_type>.txt (the header text) per prompt type

Answer each request and write one JSON object per line to an answers file:
  {{"task_id": ..., "trial": ..., "prompt_type": ..., "response": "<the model's full text>", "attempt": 1}}
an API call that failed for good:
  {{"task_id": ..., "trial": ..., "prompt_type": ..., "error": "<what failed>", "attempt": 3}}
or, when you parsed the labels yourself:
  {{"task_id": ..., "trial": ..., "prompt_type": ..., "best": "B", "worst": "D"}}
then score it:  pstbench vab score --track {track} --answers answers.jsonl
and re-ask what did not parse:  pstbench vab export --track {track} --retry answers.jsonl --out retry-1
(append the new answers, with their attempt numbers, to the same answers file: the highest attempt counts)
"""

"""`pstbench vab run --batch`: the requests not yet answered, asked through an OpenAI-compatible Batch API.

A round writes the requests as a batch input file (`batch_file.input_lines`: the bodies `vab run` posts), uploads
it (POST /files, purpose=batch), creates the batch (POST /batches, endpoint /v1/chat/completions, window 24h),
polls GET /batches/{id} every --poll-interval seconds (progress from its request_counts) for at most --batch-wait
seconds, then downloads the output and error files (GET /files/{id}/content) and records each answer as the
interactive path does (`attempts.answer_line`: the same line fields, `usage`, parser and attempt numbering)
through the answers file's one writer. A request the official pipeline would ask again (unparseable, or an API
error it retries) goes into the next round, up to `answers.attempts.max` attempts. A request the batch did not
answer (expired, cancelled, or its output line damaged) is written as an API-error line naming the batch: a later
`vab run`, batch or not, asks it again.

A budget (`--budget-tokens`, `--budget-cost`: `budget.TokenBudget` at the batch price) decides before each batch is
submitted which requests go in it: each reserved at its bound as an interactive run bounds it, in order, up to the first
the budget does not cover. Those after it are not submitted; once the batch is answered (each reservation settled with
the usage its output line gives, an API error released) the run stops as a budget stop (`counts["stopped"]`), a request
that would be asked again keeping its last answer, marked `cut`, as `model_run` does. Every answers line a batch writes
names it (`batch`: its id), so that `pricing` prices it at the batch price.

The batch's state (its id, the input file's id, each request's attempt and what its earlier rounds cost) is kept in
`<answers>.batch.json` from the moment something is uploaded: a run stopped while polling (--batch-wait, Ctrl-C, a
lost connection) resumes the same batch when run again, never submitting (and paying for) it twice. All HTTP goes
through `batch_http` (bounded; the key only to --api-base's origin, redacted from whatever comes back).
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.answerfile import answers_folder, answers_writer
from pytest_pstbench.selection.answers import OK, REASONING, AnswerSet, parse_response, read_answers
from pytest_pstbench.selection.ask import attempts, batch_file, batch_http, chat_api
from pytest_pstbench.selection.ask.chat_api import ApiError, secrets_of
from pytest_pstbench.selection.ask.requests import ImageURLs, request_body, requests_of
from pytest_pstbench.selection.protocol import SelectionParams

TERMINAL = ("completed", "expired", "failed", "cancelled")
RUNNING = ("validating", "in_progress", "finalizing", "cancelling")
MAX_POLL_FAILURES = 5  # polls in a row that fail before the run stops (resumable)
MAX_POLL_S, MAX_WAIT_S = 3600.0, 7 * 86_400.0
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


@dataclass(frozen=True)
class BatchOptions:
    poll_s: float = 30.0  # --poll-interval
    wait_s: float = 90_000.0  # --batch-wait: polling stops after this long (the run resumes the batch later)
    max_input_bytes: int = batch_file.MAX_INPUT_BYTES


@dataclass
class BatchRun:
    counts: dict
    answer_set: AnswerSet | None = None
    batches: list = field(default_factory=list)  # the ids of the batches this run submitted or resumed
    unanswered: list = field(default_factory=list)  # (custom_id, why) of requests a batch did not answer
    problems: list = field(default_factory=list)  # one-line notes on damaged output lines and counts


def state_path(answers_path: Path) -> Path:
    return Path(answers_path).with_name(Path(answers_path).name + ".batch.json")


MAX_BATCH_MB = 10_000.0  # --batch-max-mb


def check_options(poll_s, wait_s, max_mb: float = 200.0) -> None:
    """--poll-interval, --batch-wait and --batch-max-mb, checked before anything is asked (with or without --batch)."""
    from pytest_pstbench.core.protocol import number_problem

    if number_problem(poll_s, "t", low=0, high=MAX_POLL_S, low_open=True):
        raise UserError(
            f"--poll-interval {poll_s}: must be a positive number of seconds of at most {MAX_POLL_S:g}; "
            "fix: e.g. --poll-interval 30"
        )
    if number_problem(wait_s, "t", low=0, high=MAX_WAIT_S):
        raise UserError(
            f"--batch-wait {wait_s}: must be a number of seconds from 0 to {MAX_WAIT_S:g}; fix: e.g. --batch-wait 90000"
        )
    if number_problem(max_mb, "m", low=0, high=MAX_BATCH_MB, low_open=True):
        raise UserError(
            f"--batch-max-mb {max_mb}: must be a positive number of MiB of at most {MAX_BATCH_MB:g}; "
            "fix: e.g. --batch-max-mb 200 (OpenAI's limit of a batch input file)"
        )


def run_batch(track, protocol, settings, answers_path: Path, options: BatchOptions, say=None) -> BatchRun:
    """Ask what `answers_path` does not answer yet through the Batch API (see the module's docstring)."""
    answers_path = Path(answers_path)
    answers_folder(answers_path)
    params = SelectionParams.of(protocol)
    try:
        with answers_writer(answers_path) as writer:
            run = _Rounds(track, params, settings, answers_path, writer, options, say or (lambda _m: None)).go()
    except OSError as exc:  # a full disk: an append (or the writer's last flush as the file closes) fails
        raise UserError(
            f"{answers_path}: cannot write the answers file ({exc.strerror or exc}); the batch state is in "
            f"{state_path(answers_path)}; fix: free some space, then run the same command again"
        ) from None
    except UserError as exc:  # a message may quote what the endpoint sent (a status, an id): never the key
        from pytest_pstbench.core.text import redact

        secrets = secrets_of(
            {
                **(
                    {"Authorization": f"Bearer {os.environ[settings.key_env]}"}
                    if os.environ.get(settings.key_env)
                    else {}
                ),
                **dict(settings.headers),
            }
        )
        raise UserError(redact(str(exc), secrets)) from None
    run.answer_set = read_answers(answers_path, track, params)
    return run


class _Rounds:
    def __init__(self, track, params, settings, answers_path, writer, options, say):
        self.track, self.params, self.settings, self.writer, self.options, self.say = (
            track,
            params,
            settings,
            writer,
            options,
            say,
        )
        self.answers_path, self.spath = answers_path, state_path(answers_path)
        key = os.environ.get(settings.key_env) or None
        self.headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **dict(settings.headers)}
        self.secrets = secrets_of(self.headers)
        self.base = settings.api_base.rstrip("/")
        self.urls = ImageURLs(params)
        self.budget = None

    def go(self) -> BatchRun:
        params = self.params
        existing = read_answers(self.answers_path, self.track, params) if self.answers_path.stat().st_size else None
        done, failed = attempts.done_keys(existing)
        self.reqs = {}
        carry = {}
        for task, t, order, ptype in requests_of(self.track, params):
            cid = batch_file.custom_id(task.id, t, order, ptype)
            self.reqs[cid] = (task, t, order, ptype)
            if (task.id, t, ptype) not in done:
                carry[cid] = {"attempt": failed.get((task.id, t, ptype), 0) + 1, "tries": 0, "spent": attempts.Spent()}
        self.budget = self._budget(existing)
        state = self._read_state(carry)
        run = BatchRun({"asked": len(carry), "skipped": len(done), "ok": 0, "unparseable": 0, "error": 0, "calls": 0})
        stopped, halted = [], None
        while carry and not stopped and halted is None:
            if state is None:
                chosen, halted = self._within_budget(carry)
                if not chosen:
                    break
                state = self._submit(chosen)
                halted = self._unsent(chosen, state["requests"], halted)
            else:
                self._hold(state["requests"], carry)
            self._round(state, carry, run, stopped)
            state = None
            self._write_state(None, None, carry, [])  # what the next round asks, and what its requests cost so far
        if halted is not None:
            self._cut(carry, run, halted, nothing=existing is None and not run.batches)
        if self.budget is not None:
            run.counts["budget"] = self.budget.provenance()
        if not carry:
            self._remove_state()
        if stopped:
            raise UserError(
                f"{self.base}: {stopped[0]}; the run was stopped (answers so far are in {self.answers_path}); "
                f"fix: check --api-base, --model and the key in ${self.settings.key_env}, then run the same command again"
            )
        return run

    def _round(self, state, carry, run, stopped) -> None:
        """One batch polled to its end and its answers recorded; what the official rules ask again stays in `carry`."""
        params = self.params
        cids = [c for c in state["requests"] if c in carry]
        run.batches.append(state["batch_id"])
        batch = self._poll(state["batch_id"])
        output = self._download(batch, set(state["requests"]), run)
        for cid in cids:
            task, t, _order, ptype = self.reqs[cid]
            entry = carry[cid]
            outcome = output.outcomes.get(cid)
            if outcome is None:
                why = f"batch {state['batch_id']} ({batch['status']}) gave no usable answer for this request"
                outcome = ApiError(why, kind="batch")
                run.unanswered.append((cid, batch["status"]))
            self._settle(cid, outcome)
            entry["tries"] += 1
            run.counts["calls"] += 1
            line = {"task_id": task.id, "trial": t, "prompt_type": ptype, "model": self.settings.model}
            line["batch"] = state["batch_id"]  # asked through the Batch API: priced at the batch price (`pricing`)
            last = entry["tries"] >= params.attempts["max"] or outcome.__class__ is ApiError and outcome.kind == "batch"
            result, again, stop = attempts.answer_line(
                line, entry["attempt"], outcome, entry["spent"], params, task, ptype, last
            )
            if stop:
                stopped.append(str(outcome))
            if again and not stop:
                entry["attempt"] += 1
                entry["last"] = result  # kept (paid for) if the budget stops the run before it is asked again
                continue
            self.writer.append(result)
            self._count(run.counts, result, task)
            del carry[cid]

    # ---- the budget (--budget-tokens, --budget-cost at the batch price) -----------------------------------
    def _budget(self, existing):
        from pytest_pstbench.selection.ask.budget import budget_from_answers

        s = self.settings
        if not (s.budget_tokens or s.budget_cost):
            return None
        self.held = {}  # custom_id -> its reservation, until its batch is answered
        return budget_from_answers(
            s.budget_tokens,
            s.max_tokens,
            existing,
            self.track,
            cost_limit=s.budget_cost,
            price=s.budget_price,
            batch=True,
        )

    def _within_budget(self, carry) -> tuple[dict, str | None]:
        """The requests of `carry` the budget covers, in order up to the first it does not (each reserved at its
        bound); and why the run stops there (None: all are covered)."""
        if self.budget is None:
            return carry, None
        chosen = {}
        for cid, entry in carry.items():
            task, _t, order, ptype = self.reqs[cid]
            body = request_body(self.settings, self.params, task, order, ptype, self.urls)
            res = self.budget.reserve((task.id, ptype), (ptype, task.k), len(body))
            if res is None:
                return chosen, self.budget.reason()
            self.held[cid] = res
            chosen[cid] = entry
        return chosen, None

    def _unsent(self, chosen, sent, halted):
        """Release what the input file's limits left for the next batch; the budget stops the run only once every
        request it covered was submitted."""
        if self.budget is None or len(sent) == len(chosen):
            return halted
        for cid in set(chosen) - set(sent):
            self.budget.release(self.held.pop(cid))
        return None

    def _hold(self, cids, carry) -> None:
        """A batch an earlier run submitted (resumed): its requests held against the budget whatever it says."""
        if self.budget is None:
            return
        for cid in cids:
            if cid in carry and cid not in self.held:
                task, _t, order, ptype = self.reqs[cid]
                body = request_body(self.settings, self.params, task, order, ptype, self.urls)
                self.held[cid] = self.budget.reserve((task.id, ptype), (ptype, task.k), len(body), force=True)

    def _settle(self, cid, outcome) -> None:
        res = self.held.pop(cid, None) if self.budget is not None else None
        if res is None:
            return
        if isinstance(outcome, ApiError):
            self.budget.release(res)  # an API error: nothing billed (as `model_run` counts it)
        else:
            self.budget.settle(res, outcome.usage)

    def _cut(self, carry, run, halted: str, nothing: bool) -> None:
        """The budget stopped the run: a request its rounds asked and would ask again keeps its last answer (paid
        for), marked `cut` as `model_run` marks it, and is asked again by the next run; the rest is not submitted."""
        if nothing:
            raise UserError(
                f"{self.answers_path}: nothing was asked: {halted}; fix: give a larger --budget-tokens / "
                "--budget-cost (at least one request's bound)"
            )
        for cid, entry in list(carry.items()):
            if "last" in entry:
                self.writer.append({**entry["last"], "cut": "budget"})
                self._count(run.counts, entry["last"], self.reqs[cid][0])
                del carry[cid]
        if carry:
            self._write_state(None, None, carry, [])
        run.counts["stopped"] = halted

    def _count(self, counts, result, task) -> None:
        if "error" in result:
            counts["error"] += 1
        else:
            st = parse_response(result["response"], result["prompt_type"], task.k, self.params, REASONING in result)[1]
            counts["ok" if st == OK else "unparseable"] += 1

    # ---- the state file ----------------------------------------------------------------------------------
    def _write_state(self, batch_id, file_id, carry, cids) -> None:
        from pytest_pstbench.core.files.write import dumps_json, write_atomic

        state = {
            "api_base": self.settings.api_base,
            "model": self.settings.model,
            "batch_id": batch_id,
            "input_file_id": file_id,
            "requests": list(cids),
            "carry": {
                c: {"attempt": e["attempt"], "tries": e["tries"], **e["spent"].state()} for c, e in carry.items()
            },
        }
        write_atomic(self.spath, dumps_json(state), what="the batch state", fix="give --answers a writable folder")

    def _remove_state(self) -> None:
        try:
            self.spath.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise UserError(f"{self.spath}: cannot remove the batch state ({exc}); fix: remove it by hand") from None

    def _read_state(self, carry) -> dict | None:
        """The batch a stopped run left (or None); its requests' attempts and costs merged into `carry`."""
        from pytest_pstbench.core.files.jsonfile import read_json
        from pytest_pstbench.selection.ask.usage import line_problem

        if not self.spath.exists():
            return None
        fix = (
            "fix: remove it to submit anew (a batch it names may still run at the provider: check there, "
            "or you may pay twice)"
        )
        try:
            st = read_json(self.spath, max_bytes=64 * 1024 * 1024)
            assert isinstance(st, dict) and isinstance(st.get("carry"), dict) and isinstance(st.get("requests"), list)
            for e in st["carry"].values():
                assert isinstance(e, dict) and all(
                    isinstance(e.get(n), int) and not isinstance(e.get(n), bool) and e[n] >= 0
                    for n in ("attempt", "tries", "calls")
                )
                assert line_problem(e.get("usage")) is None and isinstance(e.get("unknown"), list)
            for v in (st.get("batch_id"), st.get("input_file_id")):
                assert v is None or (isinstance(v, str) and _ID.match(v))
        except (OSError, ValueError, AssertionError, AttributeError) as exc:
            raise UserError(
                f"{self.spath}: not a batch state this kit wrote ({str(exc)[:80] or 'bad fields'}); {fix}"
            ) from None
        if (st.get("api_base"), st.get("model")) != (self.settings.api_base, self.settings.model):
            raise UserError(
                f"{self.spath}: a batch of model {str(st.get('model'))[:80]!r} at {str(st.get('api_base'))[:120]} is under "
                f"way for this answers file; fix: run with that --model and --api-base to finish it, or {fix[5:]}"
            )
        for cid, e in st["carry"].items():
            if cid in carry:
                carry[cid] = {
                    "attempt": e["attempt"],
                    "tries": e["tries"],
                    "spent": attempts.Spent(e["usage"], e["calls"], [str(u)[:200] for u in e["unknown"]]),
                }
        if st.get("batch_id") is None and st.get("input_file_id") is None:
            return None  # between rounds: the next round is submitted anew
        self.say(f"batch: resuming {st.get('batch_id') or 'the upload ' + st['input_file_id']} from {self.spath}")
        if st.get("batch_id") is None:
            return self._create(st["input_file_id"], carry, [c for c in st["requests"] if isinstance(c, str)])
        return st

    # ---- the API -------------------------------------------------------------------------------------------
    def _api(self, what: str, fn, *args):
        try:
            return fn(*args)
        except ApiError as exc:
            raise UserError(
                f"{self.base}: {what}: {exc}; the batch state is in {self.spath}; fix: check --api-base (it must "
                "serve /files and /batches) and the key, then run the same command again (nothing is submitted twice)"
            ) from None

    def _submit(self, carry) -> dict:
        urls = self.urls
        try:
            data, ids = batch_file.input_lines(
                self.settings,
                self.params,
                [self.reqs[c] for c in carry],
                urls,
                self.options.max_input_bytes,
                split=True,
            )
        except ValueError as exc:
            raise UserError(
                f"--batch: {exc}; fix: run without --batch (interactive), or export the requests with "
                "`pstbench vab export --batch-file` and run them offline"
            ) from None
        cids = list(ids)
        if len(cids) < len(carry):  # over the input file's limits: this batch takes what fits, the next ones the rest
            self.say(
                f"batch: {len(cids)} of the {len(carry)} requests left fit in one input file "
                f"({len(data):,} bytes; limits {self.options.max_input_bytes:,} bytes, "
                f"{batch_file.MAX_INPUT_REQUESTS:,} requests): the rest go in the next batch"
            )
        up = self._api(
            "uploading the batch input file",
            batch_http.upload,
            f"{self.base}/files",
            {"purpose": "batch"},
            "pstbench-batch.jsonl",
            data,
            self.headers,
            self.settings.timeout_s,
        )
        fid = self._id(up, "the uploaded file")
        self._write_state(None, fid, carry, cids)
        return self._create(fid, carry, cids)

    def _create(self, fid, carry, cids) -> dict:
        made = self._api(
            "creating the batch",
            batch_http.post_json,
            f"{self.base}/batches",
            {"input_file_id": fid, "endpoint": batch_file.ENDPOINT, "completion_window": "24h"},
            self.headers,
            self.settings.timeout_s,
        )
        bid = self._id(made, "the created batch")
        self._write_state(bid, fid, carry, cids)
        self.say(f"batch: submitted {bid} ({len(cids)} requests)")
        return {"batch_id": bid, "input_file_id": fid, "requests": cids}

    def _id(self, obj, what) -> str:
        v = obj.get("id")
        if not isinstance(v, str) or not _ID.match(v):
            raise UserError(
                f"{self.base}: {what} has no usable id ({str(v)[:60]!r}); fix: check that --api-base serves the "
                "OpenAI files and batches endpoints"
            )
        return v

    def _poll(self, bid: str) -> dict:
        deadline = time.monotonic() + self.options.wait_s
        fails, shown, status = 0, None, "unknown"
        while True:
            try:
                batch = batch_http.get_json(f"{self.base}/batches/{bid}", self.headers, self.settings.timeout_s)
                fails = 0
            except ApiError as exc:
                fails += 1
                if exc.status in (400, 401, 403, 404) or exc.kind == "redirect" or fails >= MAX_POLL_FAILURES:
                    raise UserError(
                        f"{self.base}: polling batch {bid}: {exc}; its id is kept in {self.spath}; fix: run the "
                        "same command again to go on polling it (nothing is submitted twice)"
                    ) from None
                batch = None
            if batch is not None:
                status = batch.get("status")
                if status not in TERMINAL + RUNNING:
                    raise UserError(
                        f"{self.base}: batch {bid} has status {str(status)[:40]!r}, not one of {', '.join(TERMINAL + RUNNING)}; "
                        f"its id is kept in {self.spath}; fix: check the batch at the provider, run again"
                    )
                line = f"batch {bid}: {status} {_progress(batch.get('request_counts'))}"
                if line != shown:
                    self.say(line)
                    shown = line
                if status in TERMINAL:
                    return batch
            if time.monotonic() + self.options.poll_s > deadline:
                raise UserError(
                    f"batch {bid} is still {status} after {self.options.wait_s:g} s (--batch-wait); its id is kept in "
                    f"{self.spath}; fix: run the same command again later to go on polling it (nothing is submitted twice)"
                )
            chat_api.pause(self.options.poll_s)

    def _download(self, batch: dict, asked: set, run: BatchRun) -> batch_file.Output:
        bid, status = batch.get("id", "?"), batch["status"]
        files = [(n, batch.get(n)) for n in ("output_file_id", "error_file_id") if batch.get(n) is not None]
        if status == "failed" and not files:
            self._remove_state()
            errors = (
                batch_file.json_snippet(batch.get("errors"), self.secrets)
                if batch.get("errors") is not None
                else "no reason given"
            )
            raise UserError(
                f"{self.base}: batch {bid} failed ({errors}); nothing was answered; fix: correct what it names, "
                "then run the same command again (a new batch is submitted)"
            )
        if status == "completed" and not files:
            raise UserError(
                f"{self.base}: batch {bid} says completed but gives no output or error file; its id is kept in "
                f"{self.spath}; fix: check the batch at the provider, or remove that file to submit anew"
            )
        output = batch_file.Output()
        asked_ids = {c: None for c in asked}
        for name, fid in files:
            if not isinstance(fid, str) or not _ID.match(fid):
                raise UserError(
                    f"{self.base}: batch {bid}'s {name} {str(fid)[:60]!r} is not a file id; its id is kept in {self.spath}; "
                    "fix: check the batch at the provider"
                )
            raw = self._api(
                f"downloading batch {bid}'s {name}",
                batch_http.get_bytes,
                f"{self.base}/files/{fid}/content",
                self.headers,
                self.settings.timeout_s,
                batch_file.MAX_OUTPUT_BYTES,
            )
            batch_file.read_output(raw, asked_ids, f"{name} {fid}", self.secrets, into=output)
        run.problems += output.problems
        counts = batch.get("request_counts")
        if isinstance(counts, dict):
            told = (counts.get("total"), counts.get("completed"), counts.get("failed"))
            found = (
                len(asked),
                sum(1 for o in output.outcomes.values() if not isinstance(o, ApiError)),
                sum(1 for o in output.outcomes.values() if isinstance(o, ApiError)),
            )
            if told != found and status == "completed":
                run.problems.append(
                    f"batch {bid}: request_counts total/completed/failed {told} disagree with its files {found}; "
                    "the files are used"
                )
        return output


def _progress(counts) -> str:
    if not isinstance(counts, dict):
        return ""
    vals = [counts.get(n) for n in ("completed", "failed", "total")]
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9 for v in vals):
        return "(request_counts unreadable)"
    return f"({vals[0]} of {vals[2]} done, {vals[1]} failed)"


def stderr_say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)

"""Issue #32, items 11, 12, 13 and 18: `pstbench vab run|score|consensus` keep every answer, pay for each
request once, store any text safely, and refuse a task size the protocol does not cover.

The model endpoint is the scripted local server of tests/selection/ask/test_model_client.py (127.0.0.1 only); the
number of requests it answers is what a run paid for.
Found by the third audit (#32).
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from test_model_client import KEY, answer, make_track, run_args, servers  # noqa: F401  (servers: a fixture)

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.ask import chat_api

N_REQUESTS = 3 * 3  # make_track(ks=(3,)): one task, 3 trials x 3 prompt types


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setattr(chat_api, "pause", lambda _s: None)
    monkeypatch.setenv("T22_KEY", KEY)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))


def _ok(n, body, h):
    return answer({"role": "assistant", "content": "BEST: A\nWORST: B"})


def _lines(path) -> list[dict]:
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # strict: the file is UTF-8 text
    assert text.endswith("\n")
    return [json.loads(x) for x in text.split("\n") if x]


# ---- 11: a last line without its newline is an answer, not a cut line ------------------------------------


def test_a_last_valid_line_without_newline_is_kept_and_not_asked_again(servers, tmp_path, capsys):
    api = servers(_ok)
    track = make_track(tmp_path, ks=(3,))
    answers = tmp_path / "answers.jsonl"
    first = {"task_id": "task0", "trial": 0, "prompt_type": "pick_best", "response": "BEST: B", "attempt": 1}
    answers.write_text(json.dumps(first), encoding="utf-8")  # no trailing newline (an editor, `echo -n`, ...)
    assert cli_main(run_args(track, api.base, tmp_path)) == 0
    assert sum(api.calls.values()) == N_REQUESTS - 1  # the answered request is not paid for again
    lines = _lines(answers)
    assert lines[0] == first and len(lines) == N_REQUESTS
    assert f"asked {N_REQUESTS - 1} requests (1 already answered)" in capsys.readouterr().out


def test_a_line_cut_short_is_still_dropped_and_asked_again(servers, tmp_path, capsys):
    api = servers(_ok)
    track = make_track(tmp_path, ks=(3,))
    answers = tmp_path / "answers.jsonl"
    answers.write_bytes(
        b'{"task_id": "task0", "trial": 0, "prompt_type": "pick_best", "response": "BEST: B"}\n{"task_id": "ta'
    )
    assert cli_main(run_args(track, api.base, tmp_path)) == 0
    assert sum(api.calls.values()) == N_REQUESTS - 1
    assert len(_lines(answers)) == N_REQUESTS


# ---- 12: one writer at a time ------------------------------------------------------------------------


def _slow_ok(n, body, h):
    time.sleep(0.05)
    return _ok(n, body, h)


def test_two_concurrent_runs_pay_for_each_request_once(servers, tmp_path, capsys):
    api = servers(_slow_ok)
    track = make_track(tmp_path, ks=(3, 3))  # 2 x 9 requests, each with its own body (k = 3: three distinct orders)
    codes = []
    start = threading.Barrier(2)

    def run():
        start.wait()
        codes.append(cli_main(run_args(track, api.base, tmp_path, "--concurrency", "1")))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [0, 0]
    n = 2 * 9
    assert sum(api.calls.values()) == n and set(api.calls.values()) == {1}  # each request paid for once
    lines = _lines(tmp_path / "answers.jsonl")
    assert len(lines) == n and len({(x["task_id"], x["trial"], x["prompt_type"]) for x in lines}) == n
    out = capsys.readouterr().out
    assert f"asked {n} requests (0 already answered)" in out and f"asked 0 requests ({n} already answered)" in out
    # the kit reads the file it wrote
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track),
                "--answers",
                str(tmp_path / "answers.jsonl"),
                "--results",
                str(tmp_path / "scored"),
            ]
        )
        == 0
    )


def test_a_second_writer_that_cannot_wait_fails_with_one_line(servers, tmp_path, monkeypatch, capsys):
    from pytest_pstbench.selection.answerfile import answers_writer

    api = servers(_ok)
    track = make_track(tmp_path, ks=(3,))
    monkeypatch.setenv("PSTBENCH_LOCK_TIMEOUT", "0.2")
    answers = tmp_path / "answers.jsonl"
    held = threading.Event()
    release = threading.Event()

    def holder():
        with answers_writer(answers):
            held.set()
            release.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert held.wait(30)
        assert cli_main(run_args(track, api.base, tmp_path)) == 2
    finally:
        release.set()
        t.join()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"pstbench: error: {answers}: another pstbench process is writing this answers file (lock ")
    assert "still held after 0.2 s); fix: wait for it to finish, or give --answers another file" in err
    assert sum(api.calls.values()) == 0 and answers.read_bytes() == b""


# ---- 13: a lone surrogate in a model's reply or an answers file --------------------------------------------


def test_a_reply_with_a_lone_surrogate_is_stored_and_read_back(servers, tmp_path, capsys):
    api = servers(lambda n, body, h: answer({"role": "assistant", "content": "\ud83d nice\nBEST: A\nWORST: B"}))
    track = make_track(tmp_path, ks=(3,))
    args = run_args(track, api.base, tmp_path)
    assert cli_main(args) == 0, capsys.readouterr().err
    lines = _lines(tmp_path / "answers.jsonl")  # valid UTF-8, one JSON object per line
    assert len(lines) == N_REQUESTS and all(
        x["response"] == "\ud83d nice\nBEST: A\nWORST: B" for x in lines
    )  # kept as sent
    assert cli_main(args) == 0  # the rerun reads the file: nothing asked again
    assert sum(api.calls.values()) == N_REQUESTS
    for f in (tmp_path / "results").rglob("*"):
        if f.is_file():
            f.read_bytes().decode("utf-8")


def test_an_error_field_with_a_lone_surrogate_is_scored(tmp_path, capsys):
    track = make_track(tmp_path, ks=(3,))
    answers = tmp_path / "answers.jsonl"
    rows = [
        {"task_id": "task0", "trial": t, "prompt_type": p, "response": "BEST: A\nWORST: C"}
        for t in range(3)
        for p in ("pick_best", "pick_worst", "pick_best_and_worst")
    ]
    rows[0] = {
        "task_id": "task0",
        "trial": 0,
        "prompt_type": "pick_best",
        "error": "boom \ud83d\udc4d \udc4d end",
        "attempt": 3,
    }
    answers.write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )  # escaped: valid JSON, valid UTF-8
    code = cli_main(
        ["vab", "score", "--track", str(track), "--answers", str(answers), "--results", str(tmp_path / "r"), "-v"]
    )
    out, err = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in err
    per_task = next((tmp_path / "r").rglob("per_task.csv")).read_bytes().decode("utf-8")
    run = json.loads(next((tmp_path / "r").rglob("run.json")).read_bytes().decode("utf-8"))
    assert run["answers"]["error"] == 1
    assert "\ud83d" not in per_task and "\udc4d" not in per_task


# ---- 18: k has the bound the protocol covers ---------------------------------------------------------


def _votes(path, k: int, n: int = 10):
    rows = ["task_id,k,judge,best,worst"]
    for j in range(n):
        rows.append(f"t1,{k},j{j},c0,c1")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("k", [7, 5000])
def test_consensus_refuses_a_k_beyond_the_protocol_at_input(tmp_path, capsys, k):
    votes = _votes(tmp_path / "votes.csv", k)
    assert cli_main(["vab", "consensus", str(votes), "--alpha", "0.05"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"pstbench: error: {votes}:2: task t1 has k = {k} but protocol vab covers k = 2-6 "
        "(candidates.min/max); fix: give the task's number of candidates, or a protocol that covers it\n"
    )


def test_consensus_still_takes_the_largest_k_the_protocol_covers(tmp_path, capsys):
    votes = _votes(tmp_path / "votes.csv", 6)
    assert cli_main(["vab", "consensus", str(votes), "--alpha", "0.05"]) == 0
    assert "accepted: 1" in capsys.readouterr().out


def test_read_votes_checks_k_against_the_given_range(tmp_path):
    from pytest_pstbench.selection.consensus import read_votes

    votes = _votes(tmp_path / "votes.csv", 3)
    with pytest.raises(UserError, match=r"votes.csv:2: task t1 has k = 3 but protocol p covers k = 2-2"):
        read_votes(votes, k_range=(2, 2), protocol_id="p")

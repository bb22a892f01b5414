"""#40: `vab run --concurrency auto` reaches >= 90% of a server's rate limit with few 429s, writes the answers a fixed
run writes (same responses, same attempt numbers: a 429 waited out spends no official attempt), and records the limit
over time in run.json; a long Retry-After cuts the limit once and does not hold it low; bad values are one-line errors."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers.openai_server import OpenAIServer, make_selection_track, throughput

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask.pacing import AdaptiveLimiter


def _answer(body: dict) -> str:
    """An answer that depends on the request, so that equal answers files mean each request got its own answer."""
    d = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    best = "ABC"[d[0] % 3]
    return f"BEST: {best}\nWORST: {'ABC'[('ABC'.index(best) + 1 + d[1] % 2) % 3]}"


def _run(track, base, tmp_path, name, *extra):
    return cli_main(
        [
            "vab",
            "run",
            "--track",
            str(track),
            "--model",
            "m",
            "--api-base",
            base,
            "--answers",
            str(tmp_path / f"{name}.jsonl"),
            "--results",
            str(tmp_path / f"results-{name}"),
            "--name",
            name,
            "-q",
            "--timeout",
            "10",
            *extra,
        ]
    )


def _answers(path):
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return {
        (x["task_id"], x["trial"], x["prompt_type"]): (x.get("response"), x["attempt"], "error" in x) for x in lines
    }


def test_auto_reaches_the_rate_limit_with_few_429s_and_the_answers_of_a_fixed_run(tmp_path):
    track = make_selection_track(tmp_path / "track", ks=(3,) * 23)  # 23 x 9 = 207 requests
    plain = OpenAIServer(answer_text=_answer)  # no limit: the fixed run's answers
    try:
        assert _run(track, plain.base, tmp_path, "fixed", "--concurrency", "4") == 0
    finally:
        plain.close()
    rate = 40.0
    server = OpenAIServer(answer_text=_answer, rate_per_s=rate, burst=4, retry_after=1.0, latency_s=(0.05, 0.2))
    try:
        assert _run(track, server.base, tmp_path, "auto", "--concurrency", "auto", "--max-concurrency", "16") == 0
    finally:
        server.close()
    fixed, auto = _answers(tmp_path / "fixed.jsonl"), _answers(tmp_path / "auto.jsonl")
    assert len(fixed) == 207 and auto == fixed  # same responses, all at attempt 1, no error line
    n429 = sum(1 for _t, s in server.log if s == 429)
    assert sum(1 for _t, s in server.log if s == 200) == 207
    # answered per second, from the server's own log: sustained (the middle 80% of the answers) and over the whole run
    # (its start, slow start from 4, and its tail, fewer requests left than the limit needs, included)
    assert throughput(server.log, middle=0.8) >= 0.9 * rate
    assert throughput(server.log) >= 0.8 * rate
    assert n429 <= 10 * 207 / 100  # at most 10 per 100 requests
    [run] = (tmp_path / "results-auto").rglob("run.json")
    api = json.loads(run.read_text())["judge"]["model_api"]
    assert api["concurrency"] == "auto" and api["max_concurrency"] == 16
    pacing = api["pacing"]
    assert pacing["throttled"]["429"] == n429 and pacing["waited_out"] == n429
    assert pacing["trace"][0] == [0.0, 4]
    times = [t for t, _n in pacing["trace"]]
    assert times == sorted(times) and all(1 <= n <= 16 for _t, n in pacing["trace"])
    assert pacing["peak_in_flight"] <= 16


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_long_retry_after_cuts_once_and_the_limit_grows_back():
    clock = _Clock()
    lim = AdaptiveLimiter(32, clock=clock, sleep=lambda s: None)

    def start():
        clock.now = max(clock.now, lim.next_send)  # the calls are paced: the fake clock moves to the next start
        return lim.acquire()

    def round_trip(answered=True, status=None, retry_after=None, took=0.1):
        starts = [start() for _ in range(lim.allowed())]
        clock.now += took
        for s in starts:
            lim.release(s, status, retry_after, answered=answered)

    for _ in range(3):
        round_trip()  # slow start: 4 -> 8 -> 16 -> 32 (capped)
    before = lim.allowed()
    assert before > 4
    s = [start() for _ in range(before)]
    clock.now += 0.01
    for x in s:  # a whole round throttled, each with a 10-minute hint
        lim.release(x, 429, 600.0)
    after = lim.allowed()
    assert 0.5 * before <= after < before  # cut once, not once per 429, and not to the floor
    assert lim.hold_until < clock.now  # the hint holds no new call while the limit is above 1
    for _ in range(100):  # 10 s of answered rounds
        round_trip()
    assert lim.allowed() >= before  # grown back: the hint did not freeze it low
    assert lim.record()["throttled"]["429"] == before


def test_at_limit_one_a_hint_holds_new_calls():
    clock = _Clock()
    lim = AdaptiveLimiter(1, clock=clock, sleep=lambda s: None)
    s = lim.acquire()
    clock.now += 0.01
    lim.release(s, 429, 5.0)
    assert lim.hold_until == pytest.approx(clock.now + 5.0)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--concurrency", "lots"], "--concurrency lots: give a whole number of requests in flight or `auto`"),
        (
            ["--concurrency", "auto", "--max-concurrency", "0"],
            "--max-concurrency 0: must be a whole number from 1 to 1000",
        ),
        (["--concurrency", "4", "--max-concurrency", "8"], "--max-concurrency 8: only with --concurrency auto"),
    ],
)
def test_bad_concurrency_values_are_one_line_errors(tmp_path, capsys, extra, message):
    track = make_selection_track(tmp_path / "track")
    assert _run(track, "http://127.0.0.1:9/v1", tmp_path, "bad", *extra) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "results-bad").exists()


def test_the_plugin_takes_concurrency_auto_and_records_the_pacing(tmp_path, pytester):
    track = make_selection_track(tmp_path / "track", ks=(3, 4))
    server = OpenAIServer(answer_text=_answer)
    try:
        r = pytester.runpytest_subprocess(
            "-p",
            "no:cacheprovider",
            f"--pstbench-track={track}",
            "--pstbench-model=m",
            f"--pstbench-api-base={server.base}",
            "--pstbench-concurrency=auto",
            "--pstbench-max-concurrency=3",
        )
        r.assert_outcomes(passed=2)
        bad = pytester.runpytest_subprocess(
            "-p",
            "no:cacheprovider",
            f"--pstbench-track={track}",
            "--pstbench-model=m",
            f"--pstbench-api-base={server.base}",
            "--pstbench-concurrency=many",
        )
        assert bad.ret != 0
        bad.stderr.fnmatch_lines(["*--pstbench-concurrency many: give a whole number of requests in flight or `auto`*"])
    finally:
        server.close()
    [run] = (pytester.path / "results").rglob("run.json")
    api = json.loads(run.read_text())["judge"]["model_api"]
    assert api["concurrency"] == "auto" and api["max_concurrency"] == 3 and api["pacing"]["peak_in_flight"] <= 3

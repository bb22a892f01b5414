"""Issue #53 items 5 and 6: money that adds up. An API error that is never billed (429, 5xx without a body, a refused
connection) costs zero with the reason recorded, so a budget-stopped run with 429s, resumed to complete, has a known
total cost equal to the server's bill (computed here from what the local server sent); the stop message counts the
calls in flight (spent + in flight + the next request's bound is over the budget, spent + in flight is not); the
progress bar of a stopped run ends at what was asked, not at the number of requests."""

from __future__ import annotations

import json
import re

import pytest
from helpers.openai_server import OpenAIServer, make_selection_track
from helpers.selection_runs import vab_run_args

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api
from pytest_pstbench.selection.ask.chat_api import ApiError, unbilled_reason

PRICES = ("--price-in", "2.0", "--price-out", "8.0", "--price-cached-in", "1.0")


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(chat_api, "pause", lambda _s: None)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))


def run(track, base, out, *extra):
    return cli_main(
        vab_run_args(track, base, out, "MONEY_KEY", "--concurrency", "3", "--max-tokens", "40", *PRICES, *extra)
    )


def lines(out):
    return [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]


def judge_cost(out) -> dict:
    [run_json] = list((out / "results").rglob("run.json"))
    return json.loads(run_json.read_text())["judge"]["cost"]


def bill(sent) -> float:
    """What the server charged: every answered call's usage as it sent it, at PRICES (written here)."""
    total = 0.0
    for _body, u in sent:
        cached = u["prompt_tokens_details"]["cached_tokens"]
        total += ((u["prompt_tokens"] - cached) * 2.0 + cached * 1.0 + u["completion_tokens"] * 8.0) / 1e6
    return total


def everything(track, tmp_path) -> float:
    """What a whole run costs (an unbudgeted run on a server without limits): budgets below are parts of it."""
    full = OpenAIServer()
    try:
        assert run(track, full.base, tmp_path / "full", "-q") == 0
    finally:
        full.close()
    return bill(full.sent)


def test_unbilled_reasons():
    assert unbilled_reason(429, True) and unbilled_reason(503, False) and unbilled_reason(None, False, refused=True)
    assert (
        unbilled_reason(500, True) is None
        and unbilled_reason(400, False) is None
        and unbilled_reason(None, False) is None
    )


def test_a_refused_connection_is_not_billed():
    with pytest.raises(ApiError) as err:
        chat_api.post("http://127.0.0.1:9/v1/chat/completions", b"{}", {}, 5)
    assert err.value.kind == "connection" and err.value.unbilled == "not billed: the connection was refused"


def test_a_budget_stopped_run_with_429s_resumed_has_the_servers_bill(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3))
    budget = everything(track, tmp_path) * 0.9  # stops near the end, after the rate limit has answered 429s
    server = OpenAIServer(rate_per_s=1.0, burst=1, retry_after=0.0)  # a few calls a second: 429s at any load
    try:
        assert run(track, server.base, tmp_path / "o", "-q", "--budget-cost", repr(budget)) == 1
        assert "cost budget of" in capsys.readouterr().err
        limited = [r for r in lines(tmp_path / "o") if "HTTP 429" in str(r.get("error"))]
        assert limited, "the rate limit answered no request 429: nothing tested"
        for r in limited:
            assert r["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}
            assert r["usage_note"] == "not billed: HTTP 429 (rate limited)"
        server.rate_per_s = None
        for _ in range(5):  # resumed until every request is answered
            if run(track, server.base, tmp_path / "o", "-q", "--budget-cost", "100") == 0 and not any(
                "error" in r for r in _counted(lines(tmp_path / "o"))
            ):
                break
    finally:
        server.close()
    cost = judge_cost(tmp_path / "o")
    assert cost["lines_unknown"] == 0 and cost["total"] == pytest.approx(bill(server.sent), rel=1e-12)


def _counted(rows) -> list[dict]:
    best: dict = {}
    for r in rows:
        key = (r["task_id"], r["trial"], r["prompt_type"])
        if key not in best or r["attempt"] > best[key]["attempt"]:
            best[key] = r
    return list(best.values())


def test_the_stop_message_counts_the_calls_in_flight_and_the_bar_ends_at_what_was_asked(tmp_path, capsys, monkeypatch):
    from pytest_pstbench.core import progress

    shown = []
    monkeypatch.setattr(progress, "terminal_progress", lambda done, total: shown.append((done, total)))
    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3, 4))
    budget = round(everything(track, tmp_path) / 2, 4)
    shown.clear()
    server = OpenAIServer(latency_s=0.2)
    try:
        assert run(track, server.base, tmp_path / "o", "--budget-cost", repr(budget)) == 1
    finally:
        server.close()
    err = capsys.readouterr().err
    m = re.search(
        r"cost budget of ([\d.]+) USD reached: ([\d.]+) USD spent, (\d+) calls? in flight may cost up to ([\d.]+) USD, "
        r"and the next request \(task [^,]+, \w+\) may cost up to ([\d.]+) USD",
        err,
    )
    assert m, err
    limit, spent, calls, in_flight, nxt = float(m[1]), float(m[2]), int(m[3]), float(m[4]), float(m[5])
    assert limit == budget and calls >= 1 and in_flight > 0
    assert spent + in_flight <= limit + 1e-4 < spent + in_flight + nxt + 2e-4  # 4-decimal rounding
    written = len(lines(tmp_path / "o"))
    n = shown[-1][1]
    assert shown[-1] == (written, n) and written < n
    assert [d for d, _ in shown] == list(range(1, written + 1))

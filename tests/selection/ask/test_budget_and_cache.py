"""#40: a token budget is never exceeded, names its reason, leaves a run that says complete: false, and a later run
with a larger budget resumes to the same answers as an unbudgeted run; nothing paid for is lost; the response cache
re-asks nothing for the same request and settings, misses on any change, and is off at temperature > 0 unless asked."""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers.openai_server import OpenAIServer, make_selection_track
from helpers.selection_runs import vab_run_args

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api

LABELS = "ABCDEF"


def by_body(body: dict) -> str:
    """A deterministic answer per request body (varied picks, so the scores are not trivial)."""
    content = body["messages"][0]["content"]
    k = sum(1 for p in content if p.get("type") == "image_url")
    h = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    best, worst = h[0] % k, (h[0] % k + 1 + h[1] % (k - 1)) % k
    return f"BEST: {LABELS[best]}\nWORST: {LABELS[worst]}"


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(chat_api, "pause", lambda _s: None)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))


def run(track, base, out, *extra):
    return cli_main(
        vab_run_args(track, base, out, "BUDGET_KEY", "-q", "--concurrency", "3", "--max-tokens", "40", *extra)
    )


def lines(out):
    return [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]


def tokens(rows) -> int:
    return sum(r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"] for r in rows if r.get("usage"))


def counted(rows) -> dict:
    """request -> what its highest attempt said (the answer that counts)."""
    best: dict = {}
    for r in rows:
        key = (r["task_id"], r["trial"], r["prompt_type"])
        if key not in best or r["attempt"] > best[key]["attempt"]:
            best[key] = r
    return {k: (v.get("response"), v.get("error")) for k, v in best.items()}


def run_files(out):
    [folder] = [p.parent for p in (out / "results").rglob("run.json")]
    return (
        json.loads((folder / "run.json").read_text()),
        json.loads((folder / "summary.json").read_text()),
        (folder / "per_task.csv").read_text(),
    )


def test_a_budget_is_never_exceeded_and_resumes_to_the_unbudgeted_answers(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3, 4, 3))
    full = OpenAIServer(answer_text=by_body, usage_mode="plain")
    try:
        assert run(track, full.base, tmp_path / "full") == 0
    finally:
        full.close()
    everything = tokens(lines(tmp_path / "full"))
    budget = everything // 2
    server = OpenAIServer(answer_text=by_body, usage_mode="plain")
    try:
        capsys.readouterr()
        assert run(track, server.base, tmp_path / "cut", "--budget-tokens", str(budget)) == 1
        err = capsys.readouterr().err
        first_half = lines(tmp_path / "cut")
        assert 0 < tokens(first_half) <= budget  # never over, and it did spend
        assert len(first_half) < len(lines(tmp_path / "full"))
        assert f"token budget of {budget:,} reached" in err and "--budget-tokens" in err
        run_json, summary, _ = run_files(tmp_path / "cut")
        assert run_json["complete"] is False and summary["complete"] is False
        assert any(d["kind"] == "run_stopped" and "token budget" in d["reason"] for d in run_json["deviations"])
        assert run_json["judge"]["model_api"]["budget"]["tokens"] == budget
        calls_first = len(server.sent)
        assert run(track, server.base, tmp_path / "cut", "--budget-tokens", str(10 * everything)) == 0
    finally:
        server.close()
    assert len(server.sent) == len(lines(tmp_path / "full"))  # nothing answered was asked again
    assert calls_first < len(server.sent)
    assert counted(lines(tmp_path / "cut")) == counted(lines(tmp_path / "full"))
    a, b = run_files(tmp_path / "full"), run_files(tmp_path / "cut")
    assert a[1]["cells"] == b[1]["cells"] and a[2] == b[2] and b[0]["complete"] is True


def test_a_budget_too_small_for_any_request_asks_nothing(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "o", "--budget-tokens", "10") == 2
    finally:
        server.close()
    assert server.sent == [] and server.log == []
    err = capsys.readouterr().err.strip()
    assert "nothing was asked: token budget of 10 reached" in err and "fix: give a larger --budget-tokens" in err
    assert "\n" not in err and not (tmp_path / "o" / "results").exists()


def asks_twice():
    """A server whose first answer to each request body is unparseable (the official pipeline asks again)."""
    seen: dict = {}

    def answer(body):
        key = json.dumps(body, sort_keys=True)
        seen[key] = seen.get(key, 0) + 1
        return "hmm" if seen[key] == 1 else by_body(body)

    return OpenAIServer(answer_text=answer, usage_mode="plain")


def test_a_stop_between_attempts_keeps_the_paid_answer_and_resume_asks_on(tmp_path):
    """Budgets that stop the run at different points (some between a request's two attempts): what was paid for is
    in the answers file (cut short: asked again on resume), and the resumed run makes exactly the calls and gives
    exactly the answers of an unbudgeted run."""
    track = make_selection_track(tmp_path / "track", ks=(3, 3))
    full = asks_twice()
    try:
        assert run(track, full.base, tmp_path / "full", "--concurrency", "1") == 0
    finally:
        full.close()
    total, calls = tokens(lines(tmp_path / "full")), len(full.sent)
    cut = 0
    for i, frac in enumerate((0.15, 0.3, 0.45, 0.6, 0.75, 0.9)):
        out, budget = tmp_path / f"r{i}", int(total * frac)
        server = asks_twice()
        try:
            assert run(track, server.base, out, "--concurrency", "1", "--budget-tokens", str(budget)) in (1, 2)
            if (out / "answers.jsonl").exists():
                rows = lines(out)
                assert tokens(rows) <= budget
                assert tokens(rows) == sum(
                    u["prompt_tokens"] + u["completion_tokens"] for _b, u in server.sent
                )  # none lost
                cut += sum(1 for r in rows if r.get("cut") == "budget")
            assert run(track, server.base, out, "--concurrency", "1") == 0
        finally:
            server.close()
        assert len(server.sent) == calls
        assert counted(lines(out)) == counted(lines(tmp_path / "full"))
    assert cut > 0  # some budget stopped a request between its attempts


@pytest.mark.parametrize(
    "bad, rule", [("0", "must be a whole number of tokens from 1"), ("-5", "must be a whole number")]
)
def test_a_bad_budget_is_one_line(tmp_path, capsys, bad, rule):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    assert run(track, "http://127.0.0.1:9/v1", tmp_path / "o", "--budget-tokens", bad) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and rule in err and "fix:" in err


def test_the_response_cache_at_temperature_0_reasks_nothing_and_misses_on_any_change(tmp_path):
    track = make_selection_track(tmp_path / "track", ks=(3, 2))
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "a", "--temperature", "0", "--concurrency", "1") == 0
        n = len(server.sent)  # k = 2: trials in the same order are the same request (the second one a hit)
        assert run(track, server.base, tmp_path / "b", "--temperature", "0") == 0
        assert len(server.sent) == n  # every answer from the cache
        assert counted(lines(tmp_path / "a")) == counted(lines(tmp_path / "b"))
        assert all(r["cached"] == 1 and "usage" not in r for r in lines(tmp_path / "b"))
        run_json = run_files(tmp_path / "b")[0]
        assert run_json["judge"]["model_api"]["cache"]["hits"] == len(lines(tmp_path / "b"))
        assert run_json["judge"]["usage"]["lines_from_cache"] == len(lines(tmp_path / "b"))
        assert run_json["judge"]["usage"]["tokens"] == {}
        assert run_files(tmp_path / "a")[1]["cells"] == run_files(tmp_path / "b")[1]["cells"]
        assert (
            run(track, server.base, tmp_path / "c", "--temperature", "0", "--max-tokens", "41", "--concurrency", "1")
            == 0
        )
        assert len(server.sent) == 2 * n  # another max_tokens: another request
        assert run(track, server.base, tmp_path / "d", "--temperature", "0", "--no-cache") == 0
        assert len(server.sent) == 2 * n + len(lines(tmp_path / "d"))  # every request asked
    finally:
        server.close()


def test_the_response_cache_keys_on_every_header_and_keeps_no_header_value(tmp_path):
    """#54 item 2: a gateway that routes on a header is another backend: a run with another --header value asks
    again (it used to make 0 calls and reuse the other route's answers); the same headers hit; no value is written."""
    track = make_selection_track(tmp_path / "track", ks=(3,))
    server = OpenAIServer(answer_text=by_body)
    route = ("--temperature", "0", "--concurrency", "1", "--header")
    try:
        assert run(track, server.base, tmp_path / "a", *route, "X-Route=backend-secret-one") == 0
        n = len(server.sent)
        assert n > 0
        assert run(track, server.base, tmp_path / "b", *route, "X-Route=backend-secret-two") == 0
        assert len(server.sent) == 2 * n  # another route: every request asked again
        assert run(track, server.base, tmp_path / "c", *route, "x-route=backend-secret-two") == 0
        assert len(server.sent) == 2 * n  # the same headers (names are case-blind): every answer from the cache
        assert run(track, server.base, tmp_path / "d", "--temperature", "0") == 0
        assert len(server.sent) == 3 * n  # no header at all: yet another key
    finally:
        server.close()
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert b"backend-secret" not in path.read_bytes()


def test_the_cache_is_off_at_temperature_1_unless_reuse_answers(tmp_path):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "a") == 0
        n = len(server.sent)
        assert run(track, server.base, tmp_path / "b") == 0
        assert len(server.sent) == 2 * n  # a new sample each time
        assert "cache" not in run_files(tmp_path / "b")[0]["judge"]["model_api"]
        assert run(track, server.base, tmp_path / "c", "--reuse-answers") == 0
        assert run(track, server.base, tmp_path / "d", "--reuse-answers") == 0
        assert len(server.sent) == 3 * n  # c filled the cache, d replayed it
    finally:
        server.close()


def test_a_damaged_cache_entry_is_a_miss(tmp_path):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "a", "--temperature", "0") == 0
        n = len(server.sent)
        entries = sorted((tmp_path / "cache" / "responses").glob("??/*.json"))
        assert len(entries) == n
        entries[0].write_text("{not json")
        entries[1].write_text(json.dumps({"key": "other", "message": {"content": "BEST: A"}}))
        assert run(track, server.base, tmp_path / "b", "--temperature", "0") == 0
        assert len(server.sent) == n + 2
    finally:
        server.close()


def test_cache_prune_responses(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "a", "--temperature", "0") == 0
    finally:
        server.close()
    entries = sorted((tmp_path / "cache" / "responses").glob("??/*.json"))
    assert entries
    capsys.readouterr()
    assert cli_main(["cache", "prune", "--responses"]) == 2
    assert "fix: add --older-than DAYS or --all" in capsys.readouterr().err
    assert cli_main(["cache", "prune", "--responses", "--older-than", "1"]) == 0  # all are new: none removed
    assert sorted((tmp_path / "cache" / "responses").glob("??/*.json")) == entries
    assert cli_main(["cache", "prune", "--responses", "--all", "--dry-run"]) == 0
    assert f"would remove {len(entries)} answers" in capsys.readouterr().out
    assert cli_main(["cache", "prune", "--responses", "--all"]) == 0
    assert not list((tmp_path / "cache" / "responses").glob("??/*.json"))


def test_ctrl_c_keeps_every_answer_that_arrived(tmp_path):
    """An interrupt (raised where the run reports progress, as Ctrl-C is in the main thread) starts nothing new and
    writes every answer of the calls in flight: each answer the server sent is in the file."""
    import time

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.ask.model_run import run_model
    from pytest_pstbench.selection.ask.settings import RunSettings
    from pytest_pstbench.selection.tracks import load_selection_manifest

    def slow(body):
        time.sleep(0.2)
        return by_body(body)

    track = load_selection_manifest(make_selection_track(tmp_path / "track", ks=(3, 4, 3)))
    server = OpenAIServer(answer_text=slow)
    settings = RunSettings("m1", server.base, 1.0, 40, 4, 5.0, "BUDGET_KEY")

    def interrupt(done, total):
        raise KeyboardInterrupt

    answers = tmp_path / "answers.jsonl"
    try:
        with pytest.raises(KeyboardInterrupt):
            run_model(track, load_protocol("vab"), settings, answers, progress=interrupt)
    finally:
        server.close()
    rows = lines(tmp_path)
    assert 1 < len(server.sent) < 3 * 3 + 3 * 3 + 3 * 3  # several were in flight; not everything was asked
    assert len(rows) == len(server.sent)  # every answer that arrived was written


def test_a_cost_budget_is_never_exceeded_at_the_given_prices(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3))
    prices = ("--price-in", "2.0", "--price-out", "8.0", "--price-cached-in", "1.0")
    full = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, full.base, tmp_path / "full", *prices) == 0
    finally:
        full.close()

    def money(rows):  # written here from the prices: (prompt - cached) x in + cached x cached_in + completion x out
        return sum(
            (
                (r["usage"]["prompt_tokens"] - r["usage"].get("cached_tokens", 0)) * 2.0
                + r["usage"].get("cached_tokens", 0) * 1.0
                + r["usage"]["completion_tokens"] * 8.0
            )
            / 1e6
            for r in rows
            if r.get("usage")
        )

    everything = money(lines(tmp_path / "full"))
    budget = everything / 2
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "cut", *prices, "--budget-cost", repr(budget)) == 1
        assert "cost budget of" in capsys.readouterr().err
        assert 0 < money(lines(tmp_path / "cut")) <= budget
        run_json = run_files(tmp_path / "cut")[0]
        assert run_json["judge"]["cost"]["total"] == pytest.approx(money(lines(tmp_path / "cut")), rel=1e-12)
        assert run_json["judge"]["model_api"]["budget"]["cost"] == budget
        assert run(track, server.base, tmp_path / "cut", *prices, "--budget-cost", repr(10 * everything)) == 0
    finally:
        server.close()
    assert counted(lines(tmp_path / "cut")) == counted(lines(tmp_path / "full"))
    assert len(server.sent) == len(full.sent)


def test_a_cost_budget_without_prices_is_one_line(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    assert run(track, "http://127.0.0.1:9/v1", tmp_path / "o", "--budget-cost", "5") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--budget-cost 5: a money budget needs the model's prices" in err and "--price-in" in err


def test_answers_from_the_cache_cost_nothing(tmp_path):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    prices = ("--price-in", "2.0", "--price-out", "8.0")
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "a", "--temperature", "0", *prices) == 0
        assert run(track, server.base, tmp_path / "b", "--temperature", "0", *prices) == 0
    finally:
        server.close()
    a, b = run_files(tmp_path / "a")[0]["judge"]["cost"], run_files(tmp_path / "b")[0]["judge"]["cost"]
    assert a["total"] > 0 and b["total"] is None and b["lines_priced"] == 0 and b["lines_unknown"] == 0
    assert all(c == 0.0 for costs in b["per_task"].values() for c in costs)


def test_an_unwritable_cache_loses_no_paid_answer(tmp_path, monkeypatch):
    """$PSTBENCH_CACHE is a file (nothing can be kept there): every answer still reaches the answers file, the run
    completes, and run.json says why nothing was cached."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("PSTBENCH_CACHE", str(blocker))
    track = make_selection_track(tmp_path / "track", ks=(3,))
    server = OpenAIServer(answer_text=by_body)
    try:
        assert run(track, server.base, tmp_path / "a", "--temperature", "0") == 0
    finally:
        server.close()
    assert len(lines(tmp_path / "a")) == len(server.sent) == 9
    cache = run_files(tmp_path / "a")[0]["judge"]["model_api"]["cache"]
    assert cache["stored"] == 0 and cache["not_stored"]


def billed(prompt: int, completion):
    """A server's usage callable: every call billed `prompt` prompt tokens and `completion(body)` completion tokens."""
    return lambda body: {"prompt_tokens": prompt, "completion_tokens": completion(body)}


def test_a_token_budget_holds_when_the_server_answers_past_max_tokens(tmp_path):
    """#54 item 1 (and a bound of the prompt alone, without its completion, fails here too): a reasoning model billing 50 x max_tokens per call. Each call used to be bounded by prompt +
    max_tokens whatever the first answers showed (--budget-tokens 100000 --max-tokens 100 ended at 116,600); the
    bound now learns the longest completion billed, and the first call is a lone probe."""
    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3, 4))
    server = OpenAIServer(answer_text=by_body, usage_mode=billed(300, lambda _b: 5000))
    try:
        code = run(track, server.base, tmp_path / "o", "--max-tokens", "100", "--budget-tokens", "20000")
    finally:
        server.close()
    sent = sum(u["prompt_tokens"] + u["completion_tokens"] for _b, u in server.sent)  # what the server billed
    assert code == 1 and 0 < sent <= 20000
    assert tokens(lines(tmp_path / "o")) == sent


def test_a_cost_budget_prices_the_completion_bound_at_the_output_price(tmp_path):
    """Input 0.10 / output 100 per million: pricing a call's max_tokens at the input price makes every call look
    almost free, and the run spends its whole track; priced at the output price, it stops under the budget."""
    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3))
    server = OpenAIServer(answer_text=by_body, usage_mode=billed(300, lambda _b: 400))
    prices = ("--price-in", "0.1", "--price-out", "100", "--max-tokens", "400")
    try:
        code = run(track, server.base, tmp_path / "o", *prices, "--budget-cost", "0.2")
    finally:
        server.close()
    money = sum((u["prompt_tokens"] * 0.1 + u["completion_tokens"] * 100) / 1e6 for _b, u in server.sent)
    assert code == 1 and 0 < money <= 0.2


def test_a_resumed_budget_counts_a_line_without_usage_at_a_whole_bound(tmp_path):
    """A resume over `usage: null` lines: each counts at a call's bound (the largest prompt the file records plus
    the completion bound), not at max_tokens alone."""
    track = make_selection_track(tmp_path / "track", ks=(3, 4))
    half = billed(900, lambda _b: 7)

    def sometimes(body):
        return None if hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()[0] % 2 else half(body)

    server = OpenAIServer(answer_text=by_body, usage_mode=sometimes)
    try:
        assert run(track, server.base, tmp_path / "o") == 0
        assert run(track, server.base, tmp_path / "o", "--budget-tokens", "10000000") == 0  # nothing left to ask
    finally:
        server.close()
    rows = lines(tmp_path / "o")
    nulls = sum(1 for r in rows if r.get("usage") is None)
    assert 0 < nulls < len(rows)
    expected = tokens(rows) + nulls * (900 + 40)  # --max-tokens 40 (run's), longer than every completion (7)
    assert run_files(tmp_path / "o")[0]["judge"]["model_api"]["budget"]["spent_tokens"] == expected


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_keep_every_answer_that_arrived(tmp_path, signame):
    """#54 item 3: a CI runner cancels a job with SIGTERM (a closed terminal sends SIGHUP): with calls in flight, every
    answer the server sent is in the answers file, as with Ctrl-C (it used to keep none)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    def slow(body):
        time.sleep(0.6)
        return by_body(body)

    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3))
    server = OpenAIServer(answer_text=slow)
    out = tmp_path / "o"
    args = ["vab", "run", "--track", str(track), "--model", "m1", "--api-base", server.base, "--api-key-env", "K"]
    args += ["--answers", str(out / "answers.jsonl"), "--results", str(out / "results"), "-q", "--concurrency", "4"]
    code = "import sys; from pytest_pstbench.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PSTBENCH_CACHE": str(tmp_path / "cache")}
    try:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while len(server.log) < 6 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(getattr(signal, signame))
        _out, err = proc.communicate(timeout=60)
    finally:
        server.close()
    assert proc.returncode == 130 and "interrupted" in err
    rows = lines(out)
    assert 0 < len(server.sent) < 27  # calls were in flight; not everything was asked
    assert len(rows) == len(server.sent)  # every answer that arrived was written

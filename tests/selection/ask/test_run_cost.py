"""#40: a model run's cost (selection/ask/pricing.py): usage x a price table (--price-in/--price-out or --prices FILE), per
run, prompt type, task and trial, in run.json and summary.json, checked by the run validator; lines without usage make
the cost unknown (never zero); `pstbench table` and the report show it; `vab run --estimate [--calibrate N]`."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections import defaultdict

import pytest
from helpers.openai_server import OpenAIServer, make_selection_track, usage_for
from helpers.selection_runs import vab_run_args

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api

P_IN, P_OUT, P_CACHED = 2.5, 10.0, 1.25


def _args(track, base, tmp_path, *extra, answers="answers.jsonl", results="results"):
    where = ["--answers", str(tmp_path / answers), "--results", str(tmp_path / results)]
    return vab_run_args(track, base, tmp_path, "COST_KEY", "-q", "--concurrency", "3", *where, *extra)


PRICES = ("--price-in", str(P_IN), "--price-out", str(P_OUT), "--price-cached-in", str(P_CACHED))


@pytest.fixture
def no_sleep(monkeypatch):
    monkeypatch.setattr(chat_api, "pause", lambda _s: None)


def _by_hand(u: dict, p_in=P_IN, p_out=P_OUT, p_cached=P_CACHED) -> float:
    """What a call costs, written out here from the OpenAI usage object the server sent."""
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return ((u["prompt_tokens"] - cached) * p_in + cached * p_cached + u["completion_tokens"] * p_out) / 1e6


def _run_files(tmp_path, results="results"):
    [run] = list((tmp_path / results).rglob("run.json"))
    return run.parent, json.loads(run.read_text()), json.loads((run.parent / "summary.json").read_text())


def _line_cost(line: dict) -> float:
    u = line["usage"]
    c = u.get("cached_tokens", 0)
    return ((u["prompt_tokens"] - c) * P_IN + c * P_CACHED + u["completion_tokens"] * P_OUT) / 1e6


def test_cost_is_usage_times_price_per_run_type_task_and_trial(tmp_path, no_sleep, capsys):
    track = make_selection_track(tmp_path)
    server = OpenAIServer()
    try:
        assert cli_main(_args(track, server.base, tmp_path, *PRICES)) == 0
    finally:
        server.close()
    run_dir, run, summary = _run_files(tmp_path)
    cost = run["judge"]["cost"]
    assert cost["total"] == pytest.approx(sum(_by_hand(u) for _b, u in server.sent), rel=1e-12)
    assert cost["lines_priced"] == len(server.sent) and cost["lines_unknown"] == 0
    assert cost["prices"] == {"*": {"in": P_IN, "out": P_OUT, "cached_in": P_CACHED, "currency": "USD"}}
    assert cost["source"] == "command line"
    lines = [json.loads(x) for x in (tmp_path / "answers.jsonl").read_text().splitlines()]
    per_type, per_trial = defaultdict(float), defaultdict(float)
    for line in lines:
        per_type[line["prompt_type"]] += _line_cost(line)
        per_trial[(line["task_id"], line["trial"])] += _line_cost(line)
    assert cost["by_prompt_type"] == pytest.approx(dict(per_type), rel=1e-12)
    assert {(t, i): c for t, v in cost["per_task"].items() for i, c in enumerate(v)} == pytest.approx(
        dict(per_trial), rel=1e-12
    )
    # summary.json: the usage totals beside run.json's, and the cost's totals
    assert summary["usage"] == run["judge"]["usage"]
    assert summary["cost"] == {
        k: cost[k] for k in ("currency", "total", "lines_priced", "lines_unknown", "by_prompt_type")
    }
    assert "cost: " in capsys.readouterr().out
    # pstbench table: the cost and the cost per correct TB-1 pass^3 task (correct tasks counted here from per_task.csv)
    rows = list(csv.DictReader((run_dir / "per_task.csv").open()))
    correct = sum(1 for r in rows if all(r[f"tb1_t{t}"] == "1" for t in range(3)))
    assert cli_main(["table", str(run_dir), "--format", "csv"]) == 0
    table = {(r["metric"], r["row"]): r for r in csv.DictReader(capsys.readouterr().out.splitlines())}
    assert float(table[("cost", "m1")]["value"]) == pytest.approx(cost["total"], rel=1e-12)
    assert correct and float(table[("cost_per_correct", "m1")]["value"]) == pytest.approx(
        cost["total"] / correct, rel=1e-12
    )
    assert cli_main(["table", str(run_dir)]) == 0
    assert "Cost per correct TB-1 pass^3 task (USD)" in capsys.readouterr().out
    # the report's summary shows it too
    assert cli_main(["report", str(run_dir), "--out", str(tmp_path / "report"), "--track", str(track)]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Cost (USD)" in page and f"{cost['total']:.4g}" in page and "m1: cost: " in page


def test_lines_without_usage_make_the_cost_unknown_never_zero(tmp_path, no_sleep, capsys):
    track = make_selection_track(tmp_path)
    server = OpenAIServer(
        usage_mode=lambda body: (
            None
            if sum(p.get("type") == "image_url" for p in body["messages"][0]["content"]) == 2
            else usage_for(body, "BEST: A\nWORST: B", "full")
        )
    )
    try:
        assert cli_main(_args(track, server.base, tmp_path, *PRICES)) == 0
    finally:
        server.close()
    run_dir, run, summary = _run_files(tmp_path)
    cost = run["judge"]["cost"]
    unknown = [u for _b, u in server.sent if u is None]
    assert len(unknown) == 6  # the k = 2 task: pick_best and pick_worst x 3 trials
    assert cost["lines_unknown"] == 6 and cost["lines_priced"] == len(server.sent) - 6
    assert cost["total"] == pytest.approx(sum(_by_hand(u) for _b, u in server.sent if u is not None), rel=1e-12)
    k2 = [t for t, v in cost["per_task"].items() if all(c is None for c in v)]
    assert len(k2) == 1
    assert "unknown for 6 lines" in capsys.readouterr().out
    assert cli_main(["table", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "unknown for 6 lines" in out  # the table does not show the known part as the run's cost
    # no usage at all: no total
    server = OpenAIServer(usage_mode="none")
    try:
        assert cli_main(_args(track, server.base, tmp_path, *PRICES, answers="none.jsonl", results="res2")) == 0
    finally:
        server.close()
    _d, run, summary = _run_files(tmp_path, "res2")
    assert run["judge"]["cost"]["total"] is None and summary["cost"]["lines_unknown"] == len(server.sent)
    assert "cost: unknown" in capsys.readouterr().out


def test_vab_score_prices_an_answers_file_with_a_price_file(tmp_path, no_sleep, capsys):
    track = make_selection_track(tmp_path)
    server = OpenAIServer()
    try:
        assert cli_main(_args(track, server.base, tmp_path)) == 0
    finally:
        server.close()
    _d, run, summary = _run_files(tmp_path)
    assert "cost" not in run["judge"] and "cost" not in summary and "usage" in summary  # no prices: no cost
    prices = tmp_path / "prices.yaml"
    prices.write_text("other: {in: 9, out: 9}\nm1:\n  in: 0.4\n  out: 1.6\n  currency: EUR\n")
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track),
                "--answers",
                str(tmp_path / "answers.jsonl"),
                "--name",
                "scored",
                "--results",
                str(tmp_path / "scored"),
                "--prices",
                str(prices),
            ]
        )
        == 0
    )
    _d, run, summary = _run_files(tmp_path, "scored")
    cost = run["judge"]["cost"]
    assert cost["total"] == pytest.approx(sum(_by_hand(u, 0.4, 1.6, 0.4) for _b, u in server.sent), rel=1e-12)
    assert cost["currency"] == "EUR" and set(cost["prices"]) == {"m1"} and cost["source"] == str(prices)
    assert cost["sha256"] == hashlib.sha256(prices.read_bytes()).hexdigest()
    assert summary["cost"]["total"] == cost["total"]
    prices.write_text("other: {in: 9, out: 9}\n")  # no row for the answers' model
    capsys.readouterr()
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track),
                "--answers",
                str(tmp_path / "answers.jsonl"),
                "--name",
                "s2",
                "--results",
                str(tmp_path / "scored"),
                "--prices",
                str(prices),
            ]
        )
        != 0
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no price row for model 'm1'" in err and "fix:" in err


@pytest.mark.parametrize(
    "text, said",
    [
        ("m1: {in: 1, out: 2}\nm2: {in: -1, out: 2}\n", ":2: row m2: in is -1"),
        ("m1:\n  in: 1\n  out: two\n", ":3: row m1: out is 'two'"),
        ("m1:\n  in: 1\n  ot: 2\n", ":3: row m1: field 'ot'"),
        ("m1: {in: 1}\n", ":1: row m1: lacks 'out'"),
        ("m1: {in: .inf, out: 1}\n", "row m1: in is inf"),
        ("- m1\n- 2\n", "a mapping of model name"),
        ("m1: [1, 2]\n", "row m1: is list"),
        ("m1: {in: 1, out: 1, currency: 3}\n", "currency is 3"),
        ("m1: {in: 1, out: 1\n", "not a valid YAML price file"),
    ],
)
def test_a_damaged_price_file_is_one_line(tmp_path, capsys, text, said):
    track = make_selection_track(tmp_path, ks=(3,))
    prices = tmp_path / "prices.yaml"
    prices.write_text(text)
    code = cli_main(_args(track, "http://127.0.0.1:9/v1", tmp_path, "--prices", str(prices)))
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(prices) in err and said in err and "fix" in err
    assert not (tmp_path / "answers.jsonl").exists() and not (tmp_path / "results").exists()  # refused before asking


@pytest.mark.parametrize(
    "extra, said",
    [
        (("--price-in", "1"), "--price-in without --price-out"),
        (("--price-in", "-1", "--price-out", "1"), "--price-in is -1.0"),
        (("--price-in", "nan", "--price-out", "1"), "--price-in is nan"),
        (("--price-in", "1", "--price-out", "1", "--prices", "p.yaml"), "--prices and --price-in"),
        (("--calibrate", "5"), "--calibrate N: only with --estimate"),
    ],
)
def test_bad_price_options_are_one_line(tmp_path, capsys, extra, said):
    track = make_selection_track(tmp_path, ks=(3,))
    code = cli_main(_args(track, "http://127.0.0.1:9/v1", tmp_path, *extra))
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and said in err and "fix:" in err


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


@pytest.mark.parametrize(
    "target, change, said",
    [
        (
            "summary.json",
            lambda d: d["cost"].update(total=d["cost"]["total"] * 0.5),
            "cost is not run.json's judge.cost",
        ),
        ("summary.json", lambda d: d["usage"]["tokens"].update(prompt_tokens=1), "usage is not run.json's judge.usage"),
        ("summary.json", lambda d: d.pop("cost"), "cost is not run.json's judge.cost"),
        ("both", lambda d: d.update(total=d["total"] * 0.5), "judge.cost"),
        ("both", lambda d: d.update(lines_unknown=3), "judge.cost prices"),
    ],
)
def test_the_validator_recomputes_usage_and_cost(tmp_path, no_sleep, capsys, target, change, said):
    track = make_selection_track(tmp_path)
    server = OpenAIServer()
    try:
        assert cli_main(_args(track, server.base, tmp_path, *PRICES)) == 0
    finally:
        server.close()
    run_dir, _run, _summary = _run_files(tmp_path)
    assert cli_main(["table", str(run_dir)]) == 0  # accepted as written
    if target == "both":  # run.json and summary.json changed alike: still checked against the usage
        _edit(run_dir / "run.json", lambda d: change(d["judge"]["cost"]))
        _edit(run_dir / "summary.json", lambda d: change(d["cost"]))
    else:
        _edit(run_dir / target, change)
    capsys.readouterr()
    assert cli_main(["table", str(run_dir)]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err and "Traceback" not in err


def test_estimate_without_calibration_sends_nothing_and_bounds_the_completions(tmp_path, no_sleep, capsys):
    track = make_selection_track(tmp_path)
    server = OpenAIServer()
    try:
        assert cli_main(_args(track, server.base, tmp_path, "--estimate", *PRICES, "--max-tokens", "100")) == 0
    finally:
        server.close()
    out = capsys.readouterr().out
    assert server.sent == [] and server.log == []
    assert not (tmp_path / "answers.jsonl").exists() and not (tmp_path / "results").exists()
    n = 3 * 3 + 3 * 3 + 2 * 3
    assert f"requests: {n} in the run: 0 already answered, 0 asked now" in out
    assert f"at most {n * 100:,} (max_tokens 100 x {n} requests: an upper bound only" in out
    assert f"at most {n * 100 * P_OUT / 1e6:.4g} USD for the completions" in out


def _numbers(out: str, what: str) -> tuple[float, float, float]:
    m = re.search(rf"^{what}: ([\d,.]+)(?: USD)? \(95% interval ([\d,.]+) to ([\d,.]+)\)", out, re.M)
    assert m, out
    return tuple(float(g.replace(",", "")) for g in m.groups())


def test_estimate_with_calibration_holds_the_full_runs_totals(tmp_path, no_sleep, capsys):
    """A calibration sample of 10 of 48 requests: the whole run's estimate (the sample's usage plus the fit for the
    rest) holds the totals a full run on the same server records; the sample counts towards the run."""
    track = make_selection_track(tmp_path, ks=(3, 4, 2, 5, 3, 2))

    def answer(body):  # answers of varying length: completion tokens vary from request to request
        h = hashlib.sha256(json.dumps(body["messages"]).encode()).digest()
        return "Let me think. " * (h[0] % 12) + "BEST: A\nWORST: B"

    server = OpenAIServer(answer_text=answer)
    try:
        assert cli_main(_args(track, server.base, tmp_path, "--estimate", "--calibrate", "10", *PRICES)) == 0
        out = capsys.readouterr().out
        calibration = len(server.sent)
        assert calibration == 10 and len((tmp_path / "answers.jsonl").read_text().splitlines()) == 10
        assert not (tmp_path / "results").exists()
        prompt, completion, cost = (
            _numbers(out, f"whole run {w}") for w in ("prompt tokens", "completion tokens", "cost")
        )
        # the rest of the same run: the calibration requests are not asked again
        assert cli_main(_args(track, server.base, tmp_path, *PRICES)) == 0
        assert len(server.sent) == 48
        # a full run from nothing on the same server
        assert cli_main(_args(track, server.base, tmp_path, *PRICES, answers="full.jsonl", results="full")) == 0
    finally:
        server.close()
    sent_full = server.sent[48:]
    actual_prompt = sum(u["prompt_tokens"] for _b, u in sent_full)
    actual_completion = sum(u["completion_tokens"] for _b, u in sent_full)
    assert len({u["completion_tokens"] for _b, u in sent_full}) > 3  # the completions do vary
    assert prompt[1] <= actual_prompt <= prompt[2]
    assert completion[1] <= actual_completion <= completion[2]
    uncached = (actual_prompt * P_IN + actual_completion * P_OUT) / 1e6  # the estimate prices cached tokens as uncached
    assert cost[1] * (1 - 5e-4) <= uncached <= cost[2] * (1 + 5e-4)  # printed to 4 digits
    assert sum(_by_hand(u) for _b, u in sent_full) <= cost[2] * (1 + 5e-4)


def test_an_answers_file_without_usage_is_priced_as_unknown_and_still_valid(tmp_path, capsys):
    track = make_selection_track(tmp_path, ks=(3, 2))
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    params = SelectionParams.of(load_protocol("vab"))
    lines = []
    for task in resolve_selection_track(str(track)).tasks:
        for t in range(params.trials):
            for ptype in params.prompt_types_for(task.k):
                lines.append(
                    json.dumps({"task_id": task.id, "trial": t, "prompt_type": ptype, "best": "A", "worst": "B"})
                )
    (tmp_path / "hand.jsonl").write_text("\n".join(lines) + "\n")
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track),
                "--answers",
                str(tmp_path / "hand.jsonl"),
                "--results",
                str(tmp_path / "results"),
                *PRICES,
            ]
        )
        == 0
    )
    run_dir, run, summary = _run_files(tmp_path)
    assert (
        "usage" not in summary and summary["cost"]["total"] is None and summary["cost"]["lines_unknown"] == len(lines)
    )
    capsys.readouterr()
    assert cli_main(["table", str(run_dir)]) == 0
    assert f"unknown for {len(lines)} lines" in capsys.readouterr().out

"""Issue #53 item 7: `vab run --batch` takes `--estimate` and a cost budget, priced at the batch price.

A price file's row holds the batch price (`batch_in`, `batch_out`, optional `batch_cached_in`); where it has none, a
`--batch` run that needs a price is one line naming the file, the rule and the fix (the interactive price is never
used for a batch). `--batch --estimate` prices the estimate at the batch price and says so. `--batch --budget-cost`
bounds each request as an interactive run does (its prompt bound, the body's bytes before anything is counted, plus
max_tokens) at the batch price, and decides before submitting which requests go in the batch: the ones after the first
that would take the run over the budget are not submitted, the run stops as a budget stop, and a rerun with a larger
budget completes it, with a total cost equal to the server's bill at the batch price. A request of the batch answered
by an error that is never billed (a 429 without a body) costs zero with the reason recorded."""

from __future__ import annotations

import json
import math
import re

import pytest
from helpers.openai_server import BatchService, OpenAIServer, make_selection_track
from helpers.selection_runs import vab_run_args

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api

IN, OUT, CACHED_IN = 2.0, 8.0, 1.0  # the interactive price: never used for a batch here
B_IN, B_OUT, B_CACHED_IN = 1.0, 4.0, 0.5  # the batch price
MAX_TOKENS = 40


@pytest.fixture(autouse=True)
def quiet(monkeypatch, tmp_path):
    monkeypatch.setattr(chat_api, "pause", lambda _s: None)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))


def prices_file(tmp_path, batch=True):
    row = f"in: {IN}, out: {OUT}, cached_in: {CACHED_IN}"
    if batch:
        row += f", batch_in: {B_IN}, batch_out: {B_OUT}, batch_cached_in: {B_CACHED_IN}"
    path = tmp_path / ("prices.yaml" if batch else "prices-nobatch.yaml")
    path.write_text(f"m1: {{{row}}}\n")
    return path


def run(track, base, out, *extra):
    return cli_main(vab_run_args(track, base, out, "BATCH_BUDGET_KEY", "--max-tokens", str(MAX_TOKENS), "-q", *extra))


def exported(tmp_path, track) -> list[tuple[str, bytes]]:
    """(custom_id, the body's bytes as sent) of every request, in the order a batch takes them."""
    path = tmp_path / "export.jsonl"
    assert (
        cli_main(
            [
                "vab",
                "export",
                "--track",
                str(track),
                "--batch-file",
                str(path),
                "--model",
                "m1",
                "--max-tokens",
                str(MAX_TOKENS),
            ]
        )
        == 0
    )
    out = []
    for line in path.read_bytes().splitlines():
        start = line.index(b'"body": ') + len(b'"body": ')
        out.append((json.loads(line)["custom_id"], line[start:-1]))
    return out


def batch_bill(sent) -> float:
    """What the server charged for the batch: every answered call's usage as it sent it, at the batch price."""
    total = 0.0
    for _body, u in sent:
        cached = u["prompt_tokens_details"]["cached_tokens"]
        total += ((u["prompt_tokens"] - cached) * B_IN + cached * B_CACHED_IN + u["completion_tokens"] * B_OUT) / 1e6
    return total


def test_a_batch_estimate_is_priced_at_the_batch_price(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track")
    bodies = exported(tmp_path, track)
    capsys.readouterr()
    assert (
        run(
            track,
            "http://127.0.0.1:9/v1",
            tmp_path / "o",
            "--batch",
            "--estimate",
            "--prices",
            str(prices_file(tmp_path)),
        )
        == 0
    )
    out = capsys.readouterr().out
    # by hand: the completions' bound is max_tokens per request, the prompts' text about 4 characters a token
    chars = sum(
        len(p["text"]) for _c, b in bodies for p in json.loads(b)["messages"][0]["content"] if p["type"] == "text"
    )
    completions = len(bodies) * MAX_TOKENS * B_OUT / 1e6
    text = math.ceil(chars / 4) * B_IN / 1e6
    m = re.search(
        r"cost to ask \(at the batch price\): at most ([\d.e-]+) USD for the completions, plus ([\d.e-]+) USD", out
    )
    assert m, out
    assert float(m[1]) == pytest.approx(completions, rel=1e-3) and float(m[2]) == pytest.approx(text, rel=1e-3)
    assert "batch price" in out.splitlines()[0]
    assert not (tmp_path / "o" / "results").exists()


@pytest.mark.parametrize(
    "extra",
    [
        ("--estimate", "--prices", "NOBATCH"),
        ("--budget-cost", "1", "--prices", "NOBATCH"),
        ("--budget-cost", "1", "--price-in", "1", "--price-out", "2"),
        ("--price-in", "1", "--price-out", "2"),  # no budget: the run's cost would be priced only after it was paid
    ],
)
def test_a_price_without_a_batch_price_is_one_line(tmp_path, capsys, extra):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    nobatch = prices_file(tmp_path, batch=False)
    extra = [str(nobatch) if x == "NOBATCH" else x for x in extra]
    service = BatchService()
    server = OpenAIServer(routes=service.routes)
    try:
        rc = run(track, server.base, tmp_path / "o", "--batch", *extra)
    finally:
        server.close()
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Traceback" not in err, err
    assert "batch price" in err and "batch_in" in err and "fix:" in err
    assert (str(nobatch) if "--prices" in extra else "--price-in") in err
    assert service.uploads == [] and server.sent == []


def test_a_batch_budget_submits_what_it_covers_and_a_rerun_completes_at_the_servers_bill(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3, 4, 3))
    bodies = exported(tmp_path, track)
    # each request's bound before the server has counted anything: the body's bytes at the prompt price plus
    # max_tokens at the output price (the batch price), as an interactive run bounds it
    bounds = [(len(b) * B_IN + MAX_TOKENS * B_OUT) / 1e6 for _c, b in bodies]
    covered = 3
    budget = sum(bounds[:covered]) + bounds[covered] / 2
    limited = bodies[1][0]  # answered 429 without a body, once: never billed
    service = BatchService(error_ids={limited}, error_reply=(429, None), errors_once=True)
    server = OpenAIServer(routes=service.routes)
    prices = str(prices_file(tmp_path))
    try:
        assert (
            run(track, server.base, tmp_path / "o", "--batch", "--prices", prices, "--budget-cost", repr(budget)) == 1
        )
        err = capsys.readouterr().err
        assert "cost budget of" in err and "Traceback" not in err
        assert len(service.uploads) == 1
        sent = [json.loads(x)["custom_id"] for x in service.uploads[0].splitlines()]
        assert sent == [c for c, _b in bodies[:covered]]  # the requests the budget covers, no more
        lines = [json.loads(x) for x in (tmp_path / "o" / "answers.jsonl").read_text().splitlines()]
        assert len(lines) == covered
        [cut] = [x for x in lines if "error" in x]
        assert cut["usage"] == {"prompt_tokens": 0, "completion_tokens": 0} and "429" in cut["usage_note"]
        [run_json] = list((tmp_path / "o" / "results").rglob("run.json"))
        stopped = json.loads(run_json.read_text())
        assert stopped["complete"] is False and stopped["judge"]["model_api"]["budget"]["stopped"] is True
        assert stopped["judge"]["cost"]["total"] <= budget
        assert run(track, server.base, tmp_path / "o", "--batch", "--prices", prices, "--budget-cost", "100") == 0
    finally:
        server.close()
    done = json.loads(run_json.read_text())
    cost = done["judge"]["cost"]
    assert done["complete"] is True and cost["lines_unknown"] == 0
    assert cost["total"] == pytest.approx(batch_bill(server.sent), rel=1e-12)
    asked = {c for f in service.uploads for c in (json.loads(x)["custom_id"] for x in f.splitlines())}
    assert asked == {c for c, _b in bodies}
    assert cli_main(["table", "--format", "json", str(run_json.parent)]) == 0  # the run validator accepts its cost


def test_a_batch_price_needs_both_prices(tmp_path, capsys):
    track = make_selection_track(tmp_path / "track", ks=(3,))
    half = tmp_path / "half.yaml"
    half.write_text("m1: {in: 1.0, out: 2.0, batch_in: 0.5}\n")
    assert run(track, "http://127.0.0.1:9/v1", tmp_path / "o", "--batch", "--estimate", "--prices", str(half)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(half) in err and "lacks 'batch_out'" in err and "fix:" in err


def test_a_budgeted_batch_stopped_while_polling_resumes_the_same_batch_within_the_budget(tmp_path, capsys):
    """The batch an earlier run submitted is held against the budget when resumed (never submitted twice); what the
    run then adds stays within the budget, and the recorded spend is the server's bill at the batch price."""
    track = make_selection_track(tmp_path / "track", ks=(3, 4))
    bodies = exported(tmp_path, track)
    bounds = [(len(b) * B_IN + MAX_TOKENS * B_OUT) / 1e6 for _c, b in bodies]
    budget = sum(bounds[:2]) + bounds[2] / 2
    service = BatchService(polls_in_progress=3)
    server = OpenAIServer(routes=service.routes)
    prices = str(prices_file(tmp_path))
    args = ("--batch", "--prices", prices, "--budget-cost", repr(budget))
    try:
        assert run(track, server.base, tmp_path / "o", *args, "--batch-wait", "0") == 2
        assert "still in_progress" in capsys.readouterr().err
        rc = run(track, server.base, tmp_path / "o", *args)
    finally:
        server.close()
    err = capsys.readouterr().err
    assert rc in (0, 1) and "Traceback" not in err
    first = [json.loads(x)["custom_id"] for x in service.uploads[0].splitlines()]
    assert first == [c for c, _b in bodies[:2]] and len(service.created) == len(service.uploads)
    later = [json.loads(x)["custom_id"] for f in service.uploads[1:] for x in f.splitlines()]
    assert not set(first) & set(later)
    [run_json] = list((tmp_path / "o" / "results").rglob("run.json"))
    cost = json.loads(run_json.read_text())["judge"]["cost"]
    assert cost["total"] == pytest.approx(batch_bill(server.sent), rel=1e-12) and cost["total"] <= budget

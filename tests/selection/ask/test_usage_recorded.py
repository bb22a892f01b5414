"""#40: every answered request's token usage is kept with its answer, summed over its attempts; run.json carries the
totals per run and per prompt type; a server that sends no usage (or damaged counts) is recorded as such, never as zero."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from helpers.openai_server import OpenAIServer, make_selection_track, usage_for
from helpers.selection_runs import vab_run_args

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api


def _args(track, base, tmp_path, *extra):
    return vab_run_args(track, base, tmp_path, "USAGE_KEY", "-q", "--concurrency", "3", *extra)


def _lines(tmp_path):
    return [json.loads(x) for x in (tmp_path / "answers.jsonl").read_text().splitlines()]


def _expected(usage: dict) -> dict:
    """The kit's counts of a usage object as the server sent it (written here from the OpenAI shape)."""
    out = {"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]}
    if "completion_tokens_details" in usage:
        out["reasoning_tokens"] = usage["completion_tokens_details"]["reasoning_tokens"]
    if "prompt_tokens_details" in usage:
        out["cached_tokens"] = usage["prompt_tokens_details"]["cached_tokens"]
    return out


@pytest.fixture
def no_sleep(monkeypatch):
    monkeypatch.setattr(chat_api, "pause", lambda _s: None)


def _run_json(tmp_path):
    [run] = list((tmp_path / "results").rglob("run.json"))
    return json.loads(run.read_text())


def test_usage_on_every_line_equals_what_the_server_sent_and_run_json_sums_it(tmp_path, no_sleep):
    track = make_selection_track(tmp_path)
    server = OpenAIServer()
    try:
        assert cli_main(_args(track, server.base, tmp_path)) == 0
    finally:
        server.close()
    lines = _lines(tmp_path)
    assert len(lines) == len(server.sent) == 3 * 3 + 3 * 3 + 2 * 3  # k = 3, 4: three prompt types; k = 2: two
    assert all(
        set(line["usage"]) == {"prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens"}
        for line in lines
    )
    total = defaultdict(int)
    per_type = defaultdict(lambda: defaultdict(int))
    for _body, usage in server.sent:
        for name, v in _expected(usage).items():
            total[name] += v
    for line in lines:
        for name, v in line["usage"].items():
            per_type[line["prompt_type"]][name] += v
    assert sorted(tuple(sorted(_expected(u).items())) for _b, u in server.sent) == sorted(
        tuple(sorted(line["usage"].items())) for line in lines
    )
    recorded = _run_json(tmp_path)["judge"]["usage"]
    assert recorded["tokens"] == dict(total)
    assert recorded["by_prompt_type"] == {k: dict(v) for k, v in sorted(per_type.items())}
    assert recorded["lines_with_usage"] == len(lines) and recorded["lines_without_usage"] == 0


def test_a_retried_unparseable_answer_adds_both_calls_usage(tmp_path, no_sleep):
    track = make_selection_track(tmp_path, ks=(2,))
    seen = defaultdict(int)

    def answer(body):  # the first call of every request is unparseable (the official pipeline asks again)
        key = json.dumps(body["messages"])
        seen[key] += 1
        return "no idea" if seen[key] % 2 == 1 else "BEST: A\nWORST: B"

    server = OpenAIServer(answer_text=answer, usage_mode="plain")
    try:
        assert cli_main(_args(track, server.base, tmp_path, "--concurrency", "1")) == 0
    finally:
        server.close()
    lines = _lines(tmp_path)
    assert len(server.sent) == 2 * len(lines)
    sent_total = sum(u["prompt_tokens"] + u["completion_tokens"] for _b, u in server.sent)
    assert sum(x["usage"]["prompt_tokens"] + x["usage"]["completion_tokens"] for x in lines) == sent_total
    one_call = usage_for(server.sent[0][0], "BEST: A\nWORST: B", "plain")
    prompts = {2 * u["prompt_tokens"] for _b, u in server.sent}
    assert all(x["usage"]["prompt_tokens"] in prompts for x in lines)  # both calls of a request sent the same body
    assert all(
        x["attempt"] == 2
        and x["usage"]["completion_tokens"]
        == one_call["completion_tokens"] + usage_for(server.sent[0][0], "no idea", "plain")["completion_tokens"]
        for x in lines
    )


@pytest.mark.parametrize(
    "mode, note",
    [
        ("none", "the server sent no usage"),
        (lambda body: {"prompt_tokens": -3, "completion_tokens": 4}, "usage prompt_tokens -3 is negative"),
        (
            lambda body: {"prompt_tokens": 5, "completion_tokens": "7"},
            "usage completion_tokens '7' is not a whole number",
        ),
        (lambda body: {"prompt_tokens": 5}, "usage lacks completion_tokens"),
        (lambda body: [1, 2], "usage is list, not an object"),
    ],
)
def test_no_usage_or_damaged_usage_is_recorded_as_unknown_never_zero(tmp_path, no_sleep, mode, note):
    track = make_selection_track(tmp_path, ks=(2,))
    server = OpenAIServer(usage_mode=mode)
    try:
        assert cli_main(_args(track, server.base, tmp_path)) == 0
    finally:
        server.close()
    lines = _lines(tmp_path)
    assert all(x["usage"] is None and x["usage_note"] == note for x in lines)
    recorded = _run_json(tmp_path)["judge"]["usage"]
    assert (
        recorded["tokens"] == {} and recorded["lines_without_usage"] == len(lines) and recorded["lines_with_usage"] == 0
    )


def test_an_answers_file_without_usage_fields_records_no_usage(tmp_path):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.answers import read_answers
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import load_selection_manifest

    track = load_selection_manifest(make_selection_track(tmp_path, ks=(2,)))
    params = SelectionParams.of(load_protocol("vab"))
    f = tmp_path / "a.jsonl"
    f.write_text(json.dumps({"task_id": "t0", "trial": 0, "prompt_type": "pick_best", "response": "BEST: A"}) + "\n")
    answers = read_answers(f, track, params)
    assert answers.usage() is None and "usage" not in answers.provenance()


@pytest.mark.parametrize(
    "usage, rule",
    [
        ({"prompt_tokens": 1, "completion_tokens": -1}, "usage completion_tokens -1 is negative"),
        ({"prompt_tokens": 1}, "usage lacks completion_tokens"),
        ({"prompt_tokens": 1, "completion_tokens": 2, "dollars": 3}, "usage field 'dollars' is not one of"),
        ("lots", "usage is str, not an object"),
        ({"prompt_tokens": 1.5, "completion_tokens": 2}, "usage prompt_tokens 1.5 is not a whole number"),
        # #54 item 5: the checks of usage from a server (a part over its whole), not only the counts' types
        (
            {"prompt_tokens": 100, "completion_tokens": 5, "cached_tokens": 900},
            "usage counts more reasoning (cached) tokens than completion (prompt) tokens",
        ),
        (
            {"prompt_tokens": 100, "completion_tokens": 5, "reasoning_tokens": 6},
            "usage counts more reasoning (cached) tokens than completion (prompt) tokens",
        ),
    ],
)
def test_a_damaged_usage_field_in_an_answers_file_is_a_one_line_error(tmp_path, usage, rule):
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.answers import read_answers
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import load_selection_manifest

    track = load_selection_manifest(make_selection_track(tmp_path, ks=(2,)))
    f = tmp_path / "a.jsonl"
    f.write_text(
        json.dumps({"task_id": "t0", "trial": 0, "prompt_type": "pick_best", "response": "BEST: A", "usage": usage})
        + "\n"
    )
    with pytest.raises(UserError) as exc:
        read_answers(f, track, SelectionParams.of(load_protocol("vab")))
    message = str(exc.value)
    assert message.startswith(f"{f}:1: {rule}") and "fix:" in message and "\n" not in message

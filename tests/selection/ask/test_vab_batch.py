"""#40 batch submission: `vab run --batch` against a local OpenAI-compatible server with /v1/files and /v1/batches
gives the interactive run's answers, labels and every metric; usage recorded equal to what the server sent; a poll
stopped early resumes the same batch (no second upload or batch); an expired or partly failed batch leaves a
resumable run with the failed requests named; `vab export --batch-file` + `vab score --batch-output` round trip."""

from __future__ import annotations

import json

import pytest
from helpers.openai_server import BatchService, OpenAIServer, make_selection_track, usage_for
from helpers.selection_runs import vab_run_args

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api


@pytest.fixture
def no_sleep(monkeypatch):
    monkeypatch.setattr(chat_api, "pause", lambda _s: None)


def _answer(body):
    """A deterministic answer per request (mixed labels, some unparseable): the metrics differ between tasks."""
    text = json.dumps(body["messages"][0]["content"][0])
    n = sum(map(ord, text)) + len(body["messages"][0]["content"])
    return ["BEST: A\nWORST: B", "BEST: B\nWORST: A", "I cannot tell", "BEST: C\nWORST: A"][n % 4]


def _run(track, base, out, *extra):
    return cli_main(vab_run_args(track, base, out, "BATCH_KEY", "--name", "r", "-q", "--concurrency", "2", *extra))


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _key(line):
    return (line["task_id"], line["trial"], line["prompt_type"])


def _scored(out):
    [summary] = list((out / "results").rglob("summary.json"))
    per_task = summary.with_name("per_task.csv")
    return json.loads(summary.read_text()), per_task.read_bytes()


def _interactive(tmp_path, track):
    server = OpenAIServer(answer_text=_answer)
    try:
        assert _run(track, server.base, tmp_path / "i") in (0, 1)
    finally:
        server.close()
    return server


def _strip(line):
    return {k: v for k, v in line.items() if k not in ("attempt", "batch")}


def _unbatched(line):
    return {k: v for k, v in line.items() if k != "batch"}


def test_a_batch_run_gives_the_interactive_answers_usage_and_metrics(tmp_path, no_sleep, monkeypatch):
    monkeypatch.setenv("BATCH_KEY", "sk-secret-batch-key-123")
    track = make_selection_track(tmp_path)
    inter = _interactive(tmp_path, track)
    service = BatchService(polls_in_progress=2)
    server = OpenAIServer(answer_text=_answer, routes=service.routes)
    try:
        rc = _run(track, server.base, tmp_path / "b", "--batch", "--poll-interval", "1")
    finally:
        server.close()
    assert rc == 0
    assert (
        len(service.created) > 1
    )  # the unparseable answers were asked again in a second round, as the official rules do
    assert service.created[0]["completion_window"] == "24h"
    a = sorted(_lines(tmp_path / "i" / "answers.jsonl"), key=_key)
    b = sorted(_lines(tmp_path / "b" / "answers.jsonl"), key=_key)
    assert all(x["batch"] in service.batches for x in b)  # each line names its batch (#53: priced at the batch price)
    assert a == [
        _unbatched(x) for x in b
    ]  # every other field: response, attempt, usage (summed over the rounds), model
    assert _scored(tmp_path / "i") == _scored(tmp_path / "b")
    # the usage recorded equals what the server sent, recomputed here from the bodies it answered
    sent = {}
    for body, usage in server.sent:
        sent.setdefault(json.dumps(body["messages"]), []).append(usage_for(body, _answer(body), "full") == usage)
    assert all(all(v) for v in sent.values()) and sum(map(len, sent.values())) == len(inter.sent)
    # the input file's bodies are exactly what the interactive run posted
    uploaded = [json.loads(x)["body"] for f in service.uploads for x in f.splitlines()]
    assert sorted(map(json.dumps, uploaded)) == sorted(json.dumps(b) for b, _u in inter.sent)
    assert not (tmp_path / "b" / "answers.jsonl.batch.json").exists()
    run = json.loads(next((tmp_path / "b" / "results").rglob("run.json")).read_text())
    assert "sk-secret-batch-key-123" not in json.dumps(run)


def test_a_stopped_poll_resumes_the_same_batch(tmp_path, no_sleep, capsys):
    track = make_selection_track(tmp_path, ks=(3, 2))
    _interactive(tmp_path, track)
    service = BatchService(polls_in_progress=3)
    server = OpenAIServer(answer_text=lambda b: "BEST: A\nWORST: B", routes=service.routes)
    try:
        assert _run(track, server.base, tmp_path / "b", "--batch", "--batch-wait", "0") == 2
        err = capsys.readouterr().err
        assert "still in_progress" in err and "batch_1" in err and "Traceback" not in err
        assert (tmp_path / "b" / "answers.jsonl.batch.json").exists()
        assert not (tmp_path / "b" / "results").exists()
        assert _run(track, server.base, tmp_path / "b", "--batch") == 0
    finally:
        server.close()
    assert len(service.uploads) == 1 and len(service.created) == 1
    assert len(_lines(tmp_path / "b" / "answers.jsonl")) == len(_lines(tmp_path / "i" / "answers.jsonl"))
    assert {_key(x) for x in _lines(tmp_path / "b" / "answers.jsonl")} == {
        _key(x) for x in _lines(tmp_path / "i" / "answers.jsonl")
    }


@pytest.mark.parametrize("end", ["expired", "errors"])
def test_an_expired_or_partly_failed_batch_names_the_failed_requests_and_resumes(tmp_path, no_sleep, capsys, end):
    track = make_selection_track(tmp_path)
    _interactive(tmp_path, track)
    n = len(_lines(tmp_path / "i" / "answers.jsonl"))
    if end == "expired":
        service = BatchService(end="expired", answered=5)
    else:  # a per-request error the official rules ask again: the next round asks it; 'stop' on a 401 is not retried
        service = BatchService(error_ids={"t0|trial-0|order-0-1-2|top1"})
    server = OpenAIServer(answer_text=_answer, routes=service.routes)
    try:
        rc = _run(track, server.base, tmp_path / "b", "--batch")
        err = capsys.readouterr().err
        lines = _lines(tmp_path / "b" / "answers.jsonl")
        if end == "expired":
            assert rc == 1 and f"{n - 5} requests were not answered" in err and "... and" in err
            assert sum(1 for x in lines if "error" in x) == n - 5
            assert _run(track, server.base, tmp_path / "b") == 0  # interactive: asks only what is left
            assert f"asked {n - 5} requests ({5} already answered)" in capsys.readouterr().out
        else:
            assert rc == 0 and len(service.created) >= 2
    finally:
        server.close()
    a = {_key(x): _strip(x) for x in _lines(tmp_path / "i" / "answers.jsonl")}
    b = {}
    for x in _lines(tmp_path / "b" / "answers.jsonl"):
        b[_key(x)] = _strip(x)  # the latest line of a request counts
    assert a == b
    assert _scored(tmp_path / "i")[0]["cells"] == _scored(tmp_path / "b")[0]["cells"]


def test_export_batch_file_and_score_batch_output_round_trip(tmp_path, no_sleep):
    track = make_selection_track(tmp_path)
    inter = _interactive(tmp_path, track)
    batch_in = tmp_path / "in.jsonl"
    assert cli_main(["vab", "export", "--track", str(track), "--batch-file", str(batch_in), "--model", "m1"]) == 0
    lines = _lines(batch_in)
    first = {json.dumps(b) for b, _u in inter.sent}  # the interactive run's bodies (unparseable ones asked twice)
    assert {json.dumps(x["body"]) for x in lines} == first and len(lines) == len(
        _lines(tmp_path / "i" / "answers.jsonl")
    )
    assert all(x["method"] == "POST" and x["url"] == "/v1/chat/completions" for x in lines)
    server = OpenAIServer(answer_text=lambda b: "BEST: B\nWORST: A")  # an offline engine: one answer per line
    try:
        out = []
        for x in lines:
            status, body, _h = server.chat(json.dumps(x["body"]).encode())
            out.append(
                {
                    "id": "x",
                    "custom_id": x["custom_id"],
                    "response": {"status_code": status, "body": json.loads(body)},
                    "error": None,
                }
            )
    finally:
        server.close()
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(o) + "\n" for o in out))
    ref = OpenAIServer(answer_text=lambda b: "BEST: B\nWORST: A")
    try:
        assert _run(track, ref.base, tmp_path / "ref") == 0
    finally:
        ref.close()
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track),
                "--batch-output",
                str(tmp_path / "out.jsonl"),
                "--answers",
                str(tmp_path / "o" / "answers.jsonl"),
                "--results",
                str(tmp_path / "o" / "results"),
                "--name",
                "r",
            ]
        )
        == 0
    )
    assert _scored(tmp_path / "o") == _scored(tmp_path / "ref")
    strip = lambda x: {k: v for k, v in x.items() if k != "model"}  # noqa: E731 (the engine's reply names no model here)
    assert sorted(map(json.dumps, map(strip, _lines(tmp_path / "o" / "answers.jsonl")))) == sorted(
        map(json.dumps, map(strip, _lines(tmp_path / "ref" / "answers.jsonl")))
    )


def _damaged_output(kind):
    def end(lines, out, err):
        rows = out.decode().splitlines()
        if kind == "truncated":
            rows[-1] = rows[-1][: len(rows[-1]) // 2]
        elif kind == "unknown":
            rows.append(rows[0].replace('"custom_id": "t0|', '"custom_id": "zz|'))
        elif kind == "duplicate":
            rows.append(rows[0])
        elif kind == "negative-usage":
            rows = [r.replace('"prompt_tokens": ', '"prompt_tokens": -') for r in rows]
        return "completed", ("\n".join(rows) + "\n").encode(), err

    return end


@pytest.mark.parametrize(
    "kind", ["truncated", "unknown", "duplicate", "negative-usage", "lies", "failed", "bad-counts"]
)
def test_damaged_batch_replies_are_named_never_a_traceback_never_complete(tmp_path, no_sleep, capsys, kind):
    track = make_selection_track(tmp_path, ks=(3, 2))
    end = {"lies": "lies", "failed": "failed", "bad-counts": "completed"}.get(kind) or _damaged_output(kind)
    counts = (lambda b: {"total": -3, "completed": "x", "failed": None}) if kind == "bad-counts" else None
    service = BatchService(end=end, counts=counts)
    server = OpenAIServer(routes=service.routes)
    try:
        rc = _run(track, server.base, tmp_path / "b", "--batch")
    finally:
        server.close()
    err = capsys.readouterr().err
    assert "Traceback" not in err
    runs = list((tmp_path / "b" / "results").rglob("run.json"))
    if kind in ("lies", "failed"):
        assert rc == 2 and len(err.strip().splitlines()) == 1 and ("no output" in err or "failed" in err) and not runs
        return
    if kind in ("negative-usage", "bad-counts"):
        assert rc == 0
        lines = _lines(tmp_path / "b" / "answers.jsonl")
        if kind == "negative-usage":
            assert all(x["usage"] is None and "negative" in x["usage_note"] for x in lines)
        return
    assert {"truncated": "not JSON", "unknown": "was not asked", "duplicate": "answered twice"}[kind] in err
    if kind == "unknown":  # every request asked has its answer: the stray line is named, nothing else changes
        assert rc == 0
        return
    # the request without a usable line is an API-error line (asked again by the next run), as the interactive path
    # records a request that failed at the API; run.json counts it (a deviation), the exit status is 1
    run = json.loads(runs[0].read_text())
    assert rc == 1 and "requests were not answered" in err and run["answers"]["error"] == 1
    assert any(d["kind"] == "answers_not_ok" for d in run.get("deviations", []))


def test_a_damaged_batch_output_file_is_refused_whole(tmp_path, capsys):
    track = make_selection_track(tmp_path, ks=(2,))
    (tmp_path / "out.jsonl").write_text(
        '{"custom_id": "t0|trial-0|order-0-1|top1", "response": {"status_code": 200, "body": {"choi\n'
    )
    rc = cli_main(
        [
            "vab",
            "score",
            "--track",
            str(track),
            "--batch-output",
            str(tmp_path / "out.jsonl"),
            "--answers",
            str(tmp_path / "a.jsonl"),
            "--results",
            str(tmp_path / "r"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "not JSON" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "a.jsonl").exists()


def test_batch_options_are_checked_before_anything_is_asked(tmp_path, capsys):
    track = make_selection_track(tmp_path, ks=(2,))
    for opt, value in (
        ("--poll-interval", "0"),
        ("--poll-interval", "nan"),
        ("--batch-wait", "-1"),
        ("--batch-wait", "inf"),
    ):
        assert _run(track, "http://127.0.0.1:9/v1", tmp_path, opt, value) == 2
        assert opt in capsys.readouterr().err


def test_a_run_over_the_input_file_limit_is_submitted_as_several_batches(tmp_path, no_sleep):
    """--batch-max-mb (OpenAI's 200 MiB by default): a run whose input file would be larger goes as several batches, one
    after another, each input file within the limit; the answers and every metric are still the interactive run's."""
    track = make_selection_track(tmp_path)
    _interactive(tmp_path, track)
    limit_mb = 0.01  # 10,485 bytes: a few requests of this track per batch
    service = BatchService()
    server = OpenAIServer(answer_text=_answer, routes=service.routes)
    try:
        rc = _run(
            track, server.base, tmp_path / "b", "--batch", "--poll-interval", "1", "--batch-max-mb", str(limit_mb)
        )
    finally:
        server.close()
    assert rc == 0
    first_round = len(_lines(tmp_path / "i" / "answers.jsonl"))
    assert len(service.uploads) >= 3 and all(len(f) <= limit_mb * 1024 * 1024 for f in service.uploads)
    sent = [json.loads(x)["custom_id"] for f in service.uploads for x in f.splitlines()]
    assert len(set(sent)) == first_round  # every request once in its first round (some again: the unparseable ones)
    a = sorted(_lines(tmp_path / "i" / "answers.jsonl"), key=_key)
    b = sorted(_lines(tmp_path / "b" / "answers.jsonl"), key=_key)
    assert a == [_unbatched(x) for x in b] and _scored(tmp_path / "i") == _scored(tmp_path / "b")


def test_one_request_over_the_input_file_limit_is_one_line(tmp_path, no_sleep, capsys):
    track = make_selection_track(tmp_path)
    service = BatchService()
    server = OpenAIServer(answer_text=_answer, routes=service.routes)
    try:
        rc = _run(track, server.base, tmp_path / "b", "--batch", "--batch-max-mb", "0.0001")
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and service.uploads == [] and len(err) == 1 and "over 104 bytes" in err[0] and "fix:" in err[0]


def test_another_models_batch_output_is_not_this_models_run(tmp_path, capsys):
    """#54 item 4: a batch output whose replies name another model used to be appended without a word, and
    `vab run --model m1` then scored it as m1. Replies naming two models are refused whole; another model's output
    is refused on an answers file of m1; an answers file of another model is refused by `vab run --model m1`."""
    track = make_selection_track(tmp_path)
    batch_in = tmp_path / "in.jsonl"
    assert cli_main(["vab", "export", "--track", str(track), "--batch-file", str(batch_in), "--model", "m1"]) == 0
    asked = _lines(batch_in)

    def output(name, models):
        rows = []
        for i, x in enumerate(asked):
            body = {"model": models[i % len(models)], "choices": [{"message": {"content": "BEST: B\nWORST: A"}}]}
            body["usage"] = {"prompt_tokens": 10, "completion_tokens": 2}
            rows.append({"custom_id": x["custom_id"], "response": {"status_code": 200, "body": body}, "error": None})
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    def score(out, answers):
        return cli_main(["vab", "score", "--track", str(track), "--batch-output", str(out), "--answers", str(answers)])

    mixed = tmp_path / "mixed" / "answers.jsonl"
    assert score(output("mixed.jsonl", ["m1", "m2"]), mixed) == 2
    err = capsys.readouterr().err.strip()
    assert "name 2 models ('m1', 'm2')" in err and "nothing was recorded" in err and "\n" not in err
    assert not mixed.exists() or not mixed.read_text()
    _interactive(tmp_path, track)  # tmp_path/i/answers.jsonl: m1's answers
    theirs = tmp_path / "i" / "answers.jsonl"
    before = theirs.read_bytes()
    assert score(output("other.jsonl", ["m2"]), theirs) == 2
    err = capsys.readouterr().err.strip()
    assert "answers of model 'm2'" in err and "holds answers of model 'm1'" in err and "\n" not in err
    assert theirs.read_bytes() == before
    fresh = tmp_path / "f" / "answers.jsonl"
    score(output("other2.jsonl", ["m2-2024-08-06"]), fresh)
    capsys.readouterr()
    server = OpenAIServer()
    try:
        assert _run(track, server.base, tmp_path / "f") == 2
    finally:
        server.close()
    err = capsys.readouterr().err.strip()
    assert "holds answers of model 'm2-2024-08-06', not 'm1'" in err and "\n" not in err and server.sent == []

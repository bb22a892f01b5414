"""Issue #54 "Find the class, not the case": property-based tests (Hypothesis, the profile of tests/conftest.py) of
the readers of text a stranger writes on the asking side: answers lines and their usage (`answers.read_answers`,
`usage.line_problem`), batch output lines (`batch_file.read_output`) and price files (`pricing.read_price_file`).
Lines are generated with arbitrary unicode and control characters, extreme and inconsistent numbers (negative,
nan, inf, huge integers, cached over prompt, reasoning over completion), missing and duplicated keys and wrong
types. The contract: a one-line UserError naming the file (a named problem for batch lines), or a value that keeps
every rule of the format, checked here against what was written (not against the reader): never any other
exception, never a negative count or cost, never an answer for a request that was not asked or was answered twice."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from helpers.openai_server import make_selection_track
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.answers import read_answers
from pytest_pstbench.selection.ask.batch_file import read_output
from pytest_pstbench.selection.ask.chat_api import ApiError, Reply
from pytest_pstbench.selection.ask.pricing import MAX_PRICE, Price, PriceTable, call_cost, cost_record, read_price_file
from pytest_pstbench.selection.ask.usage import CACHED, COUNTS, MAX_TOKENS_PER_CALL, REQUIRED
from pytest_pstbench.selection.protocol import PROMPT_TYPES, SelectionParams
from pytest_pstbench.selection.tracks import load_selection_manifest

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
HOSTILE = st.sampled_from(["\x00", "\x1f", "\x1e", "\u2028", "\u0085", "\r", "\x0b", "\x0c", "é", "\ufeff", " "])
ANY_TEXT = st.one_of(TEXT, HOSTILE, st.lists(HOSTILE, max_size=4).map("".join))
NUMBER = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([0, 1, -1, MAX_TOKENS_PER_CALL, MAX_TOKENS_PER_CALL + 1, 10**30, -(10**30)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)
JUNK = st.one_of(
    st.none(), ANY_TEXT, NUMBER, st.lists(st.integers(), max_size=2), st.dictionaries(TEXT, TEXT, max_size=2)
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A track of one k = 2 and one k = 3 task, and vab's parameters."""
    root = tmp_path_factory.mktemp("track")
    track = load_selection_manifest(make_selection_track(root, ks=(2, 3)))
    return track, SelectionParams.of(load_protocol("vab"))


# ---- usage: an independent statement of the rule ------------------------------------------------------------


def _count_ok(v) -> bool:
    return type(v) is int and 0 <= v <= MAX_TOKENS_PER_CALL


def usage_is_valid(u) -> bool:
    """What an answers line's `usage` may be: null, or the token counts a server could have sent."""
    if u is None:
        return True
    if not isinstance(u, dict) or set(u) - set(COUNTS) or any(n not in u for n in REQUIRED):
        return False
    if not all(_count_ok(v) for v in u.values()):
        return False
    return u.get("cached_tokens", 0) <= u["prompt_tokens"] and u.get("reasoning_tokens", 0) <= u["completion_tokens"]


EDGE = st.sampled_from([-1, -(10**30), MAX_TOKENS_PER_CALL + 1, 10**30, 1.5, math.nan, math.inf, True, "7", None])


@st.composite
def usage_one_edge(draw) -> dict:
    """Counts a server could send, then one of them (required or a part) set to an edge value."""
    usage = {"prompt_tokens": draw(st.integers(0, 50)), "completion_tokens": draw(st.integers(0, 50))}
    usage["cached_tokens"] = draw(st.integers(0, usage["prompt_tokens"]))
    usage["reasoning_tokens"] = draw(st.integers(0, usage["completion_tokens"]))
    usage[draw(st.sampled_from(COUNTS))] = draw(EDGE)
    return usage


USAGE = st.one_of(
    st.none(),
    usage_one_edge(),
    JUNK,
    st.dictionaries(st.one_of(st.sampled_from(COUNTS), TEXT), NUMBER, max_size=5),
    st.fixed_dictionaries(
        {"prompt_tokens": NUMBER, "completion_tokens": NUMBER},
        optional={"cached_tokens": NUMBER, "reasoning_tokens": NUMBER},
    ),
    # well-formed counts, often with a part over its whole
    st.fixed_dictionaries(
        {"prompt_tokens": st.integers(0, 50), "completion_tokens": st.integers(0, 50)},
        optional={"cached_tokens": st.integers(0, 60), "reasoning_tokens": st.integers(0, 60)},
    ),
)


@st.composite
def answer_line(draw) -> dict:
    """An answers line: mostly well-keyed, with values from the good to the hostile, keys sometimes dropped."""
    obj = {
        "task_id": draw(st.one_of(st.sampled_from(["t0", "t1"]), JUNK)),
        "trial": draw(st.one_of(st.integers(-1, 6), JUNK)),
        "prompt_type": draw(st.one_of(st.sampled_from(PROMPT_TYPES), JUNK)),
    }
    kind = draw(st.sampled_from(["response", "error", "labels", "none"]))
    if kind == "response":
        obj["response"] = draw(st.one_of(ANY_TEXT.map(lambda s: s + "\nBEST: A"), ANY_TEXT, JUNK))
    elif kind == "error":
        obj["error"] = draw(JUNK)
    elif kind == "labels":
        obj["best"], obj["worst"] = draw(st.sampled_from(["A", "b", "Z", "\x1f"])), draw(JUNK)
    for key, values in (
        ("attempt", st.one_of(st.integers(0, 3), JUNK)),
        ("usage", USAGE),
        ("cached", st.booleans()),
        ("cut", st.booleans()),
        ("model", st.one_of(TEXT, JUNK)),
    ):
        if draw(st.booleans()):
            obj[key] = draw(values)
    for key in draw(st.lists(st.sampled_from(sorted(obj)), max_size=2)):
        obj.pop(key, None)  # a key missing
    return obj


def _dump(obj) -> str:
    """One JSON line as a stranger might write it (non-ASCII written raw, sometimes; lone surrogates escaped)."""
    return (
        json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    )


def _read_answers(world, data: bytes):
    track, params = world
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "answers.jsonl"
        path.write_bytes(data)
        try:
            return read_answers(path, track, params, keep_texts={"t0", "t1"})
        except UserError as exc:
            msg = str(exc)
            assert "\n" not in msg and str(path) in msg, msg
            return exc


def _check_answer_set(out, world, lines: list[dict]) -> None:
    """What an accepted file must satisfy, checked against the lines written."""
    track, params = world
    ks = {t.id: t.k for t in track.tasks}
    assert out.n_lines == len(lines)
    for (tid, trial, ptype), entry in out.entries.items():
        assert tid in ks and 0 <= trial < params.trials and ptype in params.prompt_types_for(ks[tid])
        assert type(entry[4]) is int and entry[4] >= 1
    for _ptype, usage in out.usage_lines:
        assert usage is ... or usage is None or usage == CACHED or usage_is_valid(usage), usage
    totals = out.usage() or {"tokens": {}, "by_prompt_type": {}}
    for counts in [totals["tokens"], *totals["by_prompt_type"].values()]:
        assert all(type(v) is int and v >= 0 for v in counts.values()), counts
    cost = cost_record(out, PriceTable({"*": Price(1.0, 3.0, 0.5, "USD")}, "cli"))
    assert cost["total"] is None or cost["total"] >= 0, cost
    assert all(c >= 0 for c in cost["by_prompt_type"].values())


@given(lines=st.lists(answer_line(), min_size=1, max_size=6), crlf=st.booleans())
def test_an_answers_file_of_generated_lines_is_read_or_refused_in_one_line(world, lines, crlf):
    data = ("\r\n" if crlf else "\n").join(_dump(o) for o in lines).encode("utf-8")
    out = _read_answers(world, data)
    if isinstance(out, UserError):
        return
    _check_answer_set(out, world, lines)
    # a usage the rule refuses is never accepted (the whole file is refused)
    assert all(usage_is_valid(o["usage"]) for o in lines if "usage" in o)


@given(usage=USAGE)
def test_a_usage_is_accepted_exactly_when_a_server_could_have_sent_it(world, usage):
    line = {"task_id": "t0", "trial": 0, "prompt_type": "pick_best", "response": "BEST: A", "usage": usage}
    out = _read_answers(world, (_dump(line) + "\n").encode("utf-8"))
    if usage_is_valid(usage):
        assert not isinstance(out, UserError), out
        _check_answer_set(out, world, [line])
    else:
        assert isinstance(out, UserError) and "usage" in str(out), (usage, out)


@given(texts=st.lists(st.lists(HOSTILE, min_size=1, max_size=5).map("".join), min_size=1, max_size=3))
def test_control_characters_inside_a_response_never_split_a_line(world, texts):
    """Each line's response holds control characters and Unicode line breaks written raw: one line each still."""
    lines = [
        {"task_id": "t1", "trial": i, "prompt_type": "pick_best", "response": t + "\nBEST: B\n" + t}
        for i, t in enumerate(texts)
    ]
    out = _read_answers(world, "\n".join(_dump(o) for o in lines).encode("utf-8"))
    assert not isinstance(out, UserError), out
    assert out.n_lines == len(lines) and len(out.entries) == len(lines)
    assert {k: v[0] for k, v in out.entries.items()} == {
        ("t1", i, "pick_best"): {"best": "B"} for i in range(len(texts))
    }


@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_as_an_answers_file_are_read_or_refused_in_one_line(world, data):
    out = _read_answers(world, data)
    if not isinstance(out, UserError):
        _check_answer_set(
            out, world, [ln for ln in data.decode("utf-8-sig").replace("\r\n", "\n").split("\n") if ln.strip()]
        )


# ---- batch output lines ------------------------------------------------------------------------------------

ASKED = {f"t0|trial-{i}|order-0-1|pick_best": i for i in range(3)}
CIDS = st.one_of(st.sampled_from(sorted(ASKED)), st.sampled_from(["t9|trial-0|order-0-1|pick_best", ""]), JUNK)
BODY = st.one_of(
    JUNK,
    st.fixed_dictionaries(
        {"choices": st.one_of(JUNK, st.just([{"message": {"content": "BEST: A"}}]))},
        optional={
            "usage": st.one_of(
                USAGE,
                st.builds(
                    lambda u: {**u, "prompt_tokens_details": {"cached_tokens": 10**9}},
                    st.fixed_dictionaries({"prompt_tokens": st.integers(0, 9), "completion_tokens": st.integers(0, 9)}),
                ),
            ),
            "model": st.one_of(TEXT, JUNK),
        },
    ),
)


@st.composite
def output_line(draw) -> dict:
    obj = {"custom_id": draw(CIDS)}
    if draw(st.booleans()):
        obj["response"] = draw(
            st.one_of(
                JUNK,
                st.fixed_dictionaries(
                    {"status_code": st.one_of(st.sampled_from([200, 429, 500, 99, 600]), JUNK), "body": BODY}
                ),
            )
        )
    if draw(st.booleans()):
        obj["error"] = draw(JUNK)
    return obj


@given(lines=st.lists(output_line(), max_size=8), garbage=st.lists(st.binary(max_size=20), max_size=2))
def test_a_batch_output_of_generated_lines_answers_only_what_was_asked_once(lines, garbage):
    raw = b"\n".join([json.dumps(o, allow_nan=True).encode("utf-8") for o in lines] + garbage)
    out = read_output(raw, ASKED, "output.jsonl")
    # independent: a custom_id on two lines that are JSON objects is answered by neither
    dict_cids = [o["custom_id"] for o in lines if isinstance(o.get("custom_id"), str)]
    for cid, outcome in out.outcomes.items():
        assert cid in ASKED, cid
        assert dict_cids.count(cid) == 1, cid
        assert isinstance(outcome, (Reply, ApiError))
        if isinstance(outcome, Reply) and outcome.usage is not None:
            assert usage_is_valid(outcome.usage), outcome.usage
    assert set(out.models) <= set(ASKED)
    assert all("\n" not in p for p in out.problems)
    # every line that is not blank is used or named
    used = len(out.outcomes)
    assert used + len(out.problems) >= sum(1 for ln in raw.split(b"\n") if ln.strip()) - sum(
        dict_cids.count(c) for c in set(dict_cids) if dict_cids.count(c) > 1 and c in ASKED
    )


# ---- price files ---------------------------------------------------------------------------------------------

PRICE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 10**7), JUNK)
PRICE_EDGE = st.sampled_from([-1, -0.01, -(10**30), MAX_PRICE + 1, 10**30, math.nan, math.inf, -math.inf, True, "1"])


@st.composite
def row_one_edge(draw) -> dict:
    """A well-formed row, then one of its prices set to an edge value."""
    row = {"in": draw(st.floats(0, 10)), "out": draw(st.floats(0, 10)), "cached_in": draw(st.floats(0, 10))}
    if draw(st.booleans()):  # with a batch price (vab run --batch)
        row |= {"batch_in": draw(st.floats(0, 10)), "batch_out": draw(st.floats(0, 10))}
    row[draw(st.sampled_from(sorted(row)))] = draw(PRICE_EDGE)
    return row


ROW = st.one_of(
    row_one_edge(),
    JUNK,
    st.dictionaries(
        st.one_of(st.sampled_from(["in", "out", "cached_in", "currency"]), TEXT), st.one_of(PRICE, ANY_TEXT), max_size=5
    ),
    st.fixed_dictionaries(
        {"in": PRICE, "out": PRICE},
        optional={
            "cached_in": PRICE,
            "currency": st.one_of(st.sampled_from(["USD", "EUR"]), ANY_TEXT, JUNK),
            "batch_in": PRICE,
            "batch_out": PRICE,
            "batch_cached_in": PRICE,
        },
    ),
)


def _price_ok(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and 0 <= v <= MAX_PRICE


@given(
    rows=st.one_of(
        JUNK,
        st.dictionaries(st.one_of(st.sampled_from(["m", "gpt", "*"]), ANY_TEXT, NUMBER), ROW, min_size=1, max_size=3),
    ),
    tail=st.sampled_from(["", "\n", "\x00", "\ufeff", "m: {in: 1, in: 2, out: 3}\n", ": :\n"]),
)
def test_a_price_file_is_read_or_refused_in_one_line_and_never_prices_below_zero(rows, tail):
    import yaml

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "prices.yaml"
        path.write_bytes((yaml.safe_dump(rows, allow_unicode=True) + tail).encode("utf-8", "surrogatepass"))
        try:
            table = read_price_file(path)
        except UserError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc), str(exc)
            return
    assert table.rows
    for name, price in table.rows.items():
        assert isinstance(name, str) and name and name != "*"
        assert all(_price_ok(p) for p in (price.in_, price.out, price.cached_in)), price
        if price.batch is not None:  # a batch price is held to the same rules, in the row's currency
            assert all(_price_ok(p) for p in (price.batch.in_, price.batch.out, price.batch.cached_in)), price
            assert price.batch.currency == price.currency and call_cost({"prompt_tokens": 7}, price.batch) >= 0
        assert price.currency.isprintable() and price.currency.strip() == price.currency and price.currency
        # the cost of any counts a server could send is never below zero
        for counts in (
            {"prompt_tokens": 7, "completion_tokens": 3, "cached_tokens": 7},
            {"prompt_tokens": 0, "completion_tokens": 0},
        ):
            assert call_cost(counts, price) >= 0
    if isinstance(rows, dict) and tail in ("", "\n"):  # every accepted row is what the file said
        for name, price in table.rows.items():
            assert price.in_ == rows[name]["in"] and price.out == rows[name]["out"]


@settings(max_examples=30)
@given(data=st.binary(max_size=120))
def test_arbitrary_bytes_as_a_price_file_are_read_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "prices.yaml"
        path.write_bytes(data)
        try:
            table = read_price_file(path)
        except UserError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc), str(exc)
            return
    assert all(_price_ok(p.in_) and _price_ok(p.out) and _price_ok(p.cached_in) for p in table.rows.values())

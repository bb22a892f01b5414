"""Token usage of a model run: what the server said each answered call cost, read one way.

A chat-completions reply's `usage` object (OpenAI's shape) is read by `from_reply` into the kit's four counts:
`prompt_tokens`, `completion_tokens` (both required), and where the server gives them `reasoning_tokens`
(`completion_tokens_details.reasoning_tokens`, part of the completion) and `cached_tokens`
(`prompt_tokens_details.cached_tokens`, part of the prompt). A reply without `usage` has none (None: never
counted as zero); a `usage` that is not counts (negative, fractional, a string, implausibly large) is damaged:
None, with the problem named.

An answers line (`pstbench vab run`) carries what its request cost over every answered attempt written to it
(`usage`, the sum), or `usage: null` with `usage_note` saying why it is not known. `totals` sums the lines of an
answers file, per run and per prompt type, and counts the lines whose usage is not known or not recorded.
"""

from __future__ import annotations

COUNTS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")
REQUIRED = ("prompt_tokens", "completion_tokens")
_DETAILS = {
    "reasoning_tokens": ("completion_tokens_details", "reasoning_tokens"),
    "cached_tokens": ("prompt_tokens_details", "cached_tokens"),
}
MAX_TOKENS_PER_CALL = 100_000_000  # a count above this is not a call's usage (a server's garbage)
NO_USAGE = "the server sent no usage"
CACHED = "cached"  # an answers line answered from the response cache: no call, no tokens spent by this run


def _count_problem(name: str, value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"usage {name} {value!r} is not a whole number"
    if value < 0:
        return f"usage {name} {value} is negative"
    if value > MAX_TOKENS_PER_CALL:
        return f"usage {name} {value} is over {MAX_TOKENS_PER_CALL:,} tokens for one call"
    return None


def from_reply(raw) -> tuple[dict | None, str | None]:
    """(counts, problem) of a reply's `usage` value: (None, None) when the server sent none, (None, problem)
    when it is damaged, (counts, None) otherwise."""
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        return None, f"usage is {type(raw).__name__}, not an object"
    out = {}
    for name in REQUIRED:
        if name not in raw:
            return None, f"usage lacks {name}"
        problem = _count_problem(name, raw[name])
        if problem:
            return None, problem
        out[name] = raw[name]
    for name, (outer, inner) in _DETAILS.items():
        details = raw.get(outer)
        if isinstance(details, dict) and details.get(inner) is not None:
            problem = _count_problem(name, details[inner])
            if problem:
                return None, problem
            out[name] = details[inner]
    if out.get("reasoning_tokens", 0) > out["completion_tokens"] or out.get("cached_tokens", 0) > out["prompt_tokens"]:
        return None, "usage counts more reasoning (cached) tokens than completion (prompt) tokens"
    return out, None


def add(a: dict | None, b: dict) -> dict:
    """The sum of two counts (a field present in either is present in the sum)."""
    if a is None:
        return dict(b)
    return {name: a.get(name, 0) + b.get(name, 0) for name in COUNTS if name in a or name in b}


def line_problem(value) -> str | None:
    """What is wrong with an answers line's `usage` value (None or counts as `from_reply` gives them)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"usage is {type(value).__name__}, not an object of token counts or null"
    unknown = sorted(set(value) - set(COUNTS))
    if unknown:
        return f"usage field {unknown[0]!r} is not one of {', '.join(COUNTS)}"
    for name in REQUIRED:
        if name not in value:
            return f"usage lacks {name}"
    for name, v in value.items():
        problem = _count_problem(name, v)
        if problem:
            return problem
    return None


def totals(lines) -> dict:
    """Token totals of answers lines: `lines` yields (prompt_type, usage) where usage is counts, None (not known:
    the server sent none or sent damaged counts) or ... (not recorded: a line without `usage`, e.g. written by
    another tool) or CACHED (answered from the response cache). Sums per run and per prompt type; a count is summed
    only over the lines that carry it."""
    out = {"lines_with_usage": 0, "lines_without_usage": 0, "lines_not_recorded": 0}
    cached = 0
    run: dict | None = None
    per_type: dict[str, dict] = {}
    for ptype, usage in lines:
        if usage is ...:
            out["lines_not_recorded"] += 1
        elif usage == CACHED:
            cached += 1
        elif usage is None:
            out["lines_without_usage"] += 1
        else:
            out["lines_with_usage"] += 1
            run = add(run, usage)
            per_type[ptype] = add(per_type.get(ptype), usage)
    if cached:  # only when the cache answered something: files without it keep their totals' shape
        out["lines_from_cache"] = cached
    out["tokens"] = run or {}
    out["by_prompt_type"] = {k: per_type[k] for k in sorted(per_type)}
    return out

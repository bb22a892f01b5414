"""Validation of selection protocols (`kind: selection`, e.g. `protocols/vab.yaml`) and typed access
to their parameters. `pytest_pstbench.core.protocol.load_protocol` calls `validate_selection_protocol`
for a file with `kind: selection`; everything else reads the parameters through `SelectionParams`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import (
    MAX_SEED,
    MAX_VERSION,
    PowerSection,
    bootstrap_problem,
    integer_problem,
    number_problem,
    power_problem,
)

PROMPT_TYPES = ("pick_best", "pick_worst", "pick_best_and_worst")
METRICS = ("top1", "bot1", "tb1")
AGGREGATIONS = ("ap@1", "pass^3")
_CORRECT = {"top1": "best", "bot1": "worst", "tb1": "best_and_worst"}
_METRIC_PROMPT = {"top1": "pick_best", "bot1": "pick_worst", "tb1": "pick_best_and_worst"}
DEFAULT_SELECTION_PROTOCOL = "vab"
RECORD_RULES = ("counted", "dropped", "absent")  # how a trial's record enters the metrics (answers.records)
_DEFINITION = {"ap@1": "mean_of_trial_accuracies", "pass^3": "all_trials"}
# Ranges of the counts and times a selection protocol sets (docs/protocol.md, "Ranges").
MAX_LABELS = 26  # candidates.max: one single capital letter per presentation position
MAX_TRIALS = 100  # trials.count: each trial is a request per task and prompt type
MAX_REDRAWS = 1_000_000  # trials.permutation.max_redraws
MAX_ATTEMPTS = 100  # answers.attempts.max and answers.attempts.http.retries: each may be a paid request
MAX_WAIT_S = 3600.0  # any delay, backoff or Retry-After honoured, in seconds
MAX_TEMPERATURE = 100.0  # sampling.temperature (sent to the endpoint as it is)
MAX_TOKENS = 10_000_000  # sampling.max_tokens
MAX_JUDGE_TRIALS = 1_000  # judge.num_trials: calls of a scoring function per image
MAX_JUDGES = 1_000  # consensus.n_judges


class _Rules:
    """The checks of one selection protocol file: each broken rule is one line naming the file and the key."""

    def __init__(self, path: Path):
        self.path = path

    def bad(self, rule: str) -> UserError:
        return UserError(f"{self.path}: invalid selection protocol: {rule}")

    def mapping(self, obj, where: str) -> dict:
        if not isinstance(obj, dict):
            raise self.bad(f"'{where}' must be a mapping")
        return obj

    def need(self, obj: dict, key: str, where: str):
        if key not in obj:
            raise self.bad(f"missing key '{where}.{key}'" if where else f"missing top-level key '{key}'")
        return obj[key]

    def check(self, problem: str | None) -> None:
        if problem:
            raise self.bad(problem)

    def seconds(self, values, key: str) -> None:
        if not isinstance(values, list) or any(number_problem(d, key, low=0, high=MAX_WAIT_S) for d in values):
            raise self.bad(f"{key} must be a list of seconds >= 0 and <= {MAX_WAIT_S:g}")


def validate_selection_protocol(path: Path, data: Any) -> None:
    """Raise UserError (naming the file and the key) when `data` is not a valid selection protocol: the rules of
    `RULES`, section by section, in order (the first one broken is the one named)."""
    rules = _Rules(path)
    data = rules.mapping(data, "the file")
    for rule in RULES:
        rule(rules, data)


def _top_level(rules: _Rules, data: dict) -> None:
    """The top-level keys, the kind and the version."""
    for key in (
        "id",
        "kind",
        "candidates",
        "trials",
        "prompt_types",
        "answers",
        "judge",
        "metrics",
        "aggregations",
        "aggregation",
        "consensus",
    ):
        rules.need(data, key, "")
    if data["kind"] != "selection":
        raise rules.bad("'kind' must be 'selection'")
    if "version" in data:
        rules.check(integer_problem(data["version"], "version", low=1, high=MAX_VERSION))


def _candidates(rules: _Rules, data: dict) -> None:
    """How many candidates a task has and their labels."""
    cand = rules.mapping(data["candidates"], "candidates")
    lo, hi, labels = (
        rules.need(cand, "min", "candidates"),
        rules.need(cand, "max", "candidates"),
        rules.need(cand, "labels", "candidates"),
    )
    if not (isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool) and 2 <= lo <= hi <= MAX_LABELS):
        raise rules.bad(f"candidates.min and candidates.max must be integers with 2 <= min <= max <= {MAX_LABELS}")
    if not isinstance(labels, list) or len(labels) < hi or len(set(map(str, labels))) != len(labels):
        raise rules.bad(f"candidates.labels must list at least {hi} distinct labels (one per presentation position)")
    if any(not re.fullmatch(r"[A-Z]", str(lab)) for lab in labels):
        raise rules.bad("candidates.labels must be single capital letters (A, B, C, ...)")


def _trials(rules: _Rules, data: dict) -> None:
    """The trials per task and how their orders are drawn."""
    lo, hi = data["candidates"]["min"], data["candidates"]["max"]
    trials = rules.mapping(data["trials"], "trials")
    count = rules.need(trials, "count", "trials")
    rules.check(integer_problem(count, "trials.count", low=1, high=MAX_TRIALS))
    perm = rules.mapping(rules.need(trials, "permutation", "trials"), "trials.permutation")
    if rules.need(perm, "rule", "trials.permutation") != "vab-toolkit":
        raise rules.bad("trials.permutation.rule must be 'vab-toolkit' (the only rule implemented)")
    distinct_k = rules.need(perm, "redraw_distinct_min_k", "trials.permutation")
    rules.check(integer_problem(distinct_k, "trials.permutation.redraw_distinct_min_k", low=2, high=MAX_LABELS + 1))
    rules.check(
        integer_problem(
            rules.need(perm, "max_redraws", "trials.permutation"),
            "trials.permutation.max_redraws",
            low=1,
            high=MAX_REDRAWS,
        )
    )
    smallest = max(distinct_k, lo)
    if smallest <= hi and math.factorial(smallest) < count:
        raise rules.bad(
            f"trials.count {count} needs distinct orders, but k = {smallest} has only {math.factorial(smallest)} "
            f"(trials.permutation.redraw_distinct_min_k); fix: lower trials.count or raise redraw_distinct_min_k"
        )


def _prompt_types(rules: _Rules, data: dict) -> None:
    """The prompt of each question."""
    ptypes = rules.mapping(data["prompt_types"], "prompt_types")
    for p in PROMPT_TYPES:
        spec = rules.mapping(rules.need(ptypes, p, "prompt_types"), f"prompt_types.{p}")
        if not isinstance(rules.need(spec, "template", f"prompt_types.{p}"), str):
            raise rules.bad(f"prompt_types.{p}.template must be a string")
        min_k = rules.need(spec, "min_k", f"prompt_types.{p}")
        if not isinstance(min_k, int) or not 2 <= min_k <= (3 if p == "pick_best_and_worst" else 2):
            raise rules.bad(
                f"prompt_types.{p}.min_k must be 2"
                + (" or 3 (3: derived from pick_best for k = 2)" if p == "pick_best_and_worst" else "")
            )


def _answer_patterns(rules: _Rules, data: dict) -> None:
    """How a label is read from a reply."""
    answers = rules.mapping(data["answers"], "answers")
    patterns = rules.mapping(rules.need(answers, "patterns", "answers"), "answers.patterns")
    for key in ("best", "worst"):
        pat = rules.need(patterns, key, "answers.patterns")
        try:
            compiled = re.compile(str(pat))
        except re.error as exc:
            raise rules.bad(f"answers.patterns.{key} is not a valid regular expression ({exc})") from None
        if compiled.groups < 1:
            raise rules.bad(f"answers.patterns.{key} needs a group capturing the label")
    if answers.get("match", "last") not in ("first", "last"):
        raise rules.bad("answers.match must be 'first' or 'last'")
    for flag in answers.get("flags", []) or []:
        if not hasattr(re, str(flag)):
            raise rules.bad(f"answers.flags: unknown flag {flag!r} (use names of Python's re flags, e.g. IGNORECASE)")


def _answer_attempts(rules: _Rules, data: dict) -> None:
    """The attempts per request."""
    answers = data["answers"]
    attempts = rules.mapping(answers.get("attempts", {"max": 1}), "answers.attempts")
    mx = attempts.get("max", 1)
    if isinstance(mx, bool) or not isinstance(mx, int) or not 1 <= mx <= MAX_ATTEMPTS:
        raise rules.bad(
            f"answers.attempts.max must be a positive integer of at most {MAX_ATTEMPTS} (attempts per request, the first included)"
        )
    rules.seconds(attempts.get("delays_s", []), "answers.attempts.delays_s")
    for r in attempts.get("retry_on", []) or []:
        if r not in ("unparseable", "error"):
            raise rules.bad(f"answers.attempts.retry_on: {r!r} is not one of unparseable, error")
    for key in ("not_retried_statuses", "stop_run_statuses"):
        codes = attempts.get(key, []) or []
        if not isinstance(codes, list) or any(
            isinstance(c, bool) or not isinstance(c, int) or not 100 <= c <= 599 for c in codes
        ):
            raise rules.bad(f"answers.attempts.{key} must be a list of HTTP status codes (100..599)")
    if not set(attempts.get("stop_run_statuses", []) or []) <= set(attempts.get("not_retried_statuses", []) or []):
        raise rules.bad(
            "answers.attempts.stop_run_statuses must also be listed in answers.attempts.not_retried_statuses"
        )


def _answer_http(rules: _Rules, data: dict) -> None:
    """The HTTP calls within one attempt."""
    attempts = rules.mapping(data["answers"].get("attempts", {"max": 1}), "answers.attempts")
    http = rules.mapping(attempts.get("http", {"retries": 0}), "answers.attempts.http")
    n = http.get("retries", 0)
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_ATTEMPTS:
        raise rules.bad(
            f"answers.attempts.http.retries must be an integer >= 0 and <= {MAX_ATTEMPTS} (HTTP calls made again within one attempt)"
        )
    for c in http.get("retry_statuses", []) or []:
        if c != "5xx" and (isinstance(c, bool) or not isinstance(c, int) or not 100 <= c <= 599):
            raise rules.bad(f"answers.attempts.http.retry_statuses: {c!r} is not an HTTP status code or '5xx'")
    for r in http.get("retry_on", []) or []:
        if r not in ("timeout", "connection"):
            raise rules.bad(f"answers.attempts.http.retry_on: {r!r} is not one of timeout, connection")
    rules.seconds(http.get("backoff_s", []), "answers.attempts.http.backoff_s")
    rules.check(
        number_problem(
            http.get("retry_after_max_s", 0), "answers.attempts.http.retry_after_max_s", low=0, high=MAX_WAIT_S
        )
    )


def _answer_content(rules: _Rules, data: dict) -> None:
    """The part of a reply read for its answer."""
    answers = data["answers"]
    content = rules.mapping(answers.get("content") or {}, "answers.content")
    split = content.get("reasoning_split")
    if split is not None:
        split = rules.mapping(split, "answers.content.reasoning_split")
        try:
            rx = re.compile(str(rules.need(split, "pattern", "answers.content.reasoning_split")))
        except re.error as exc:
            raise rules.bad(
                f"answers.content.reasoning_split.pattern is not a valid regular expression ({exc})"
            ) from None
        for flag in split.get("flags", []) or []:
            if not hasattr(re, str(flag)):
                raise rules.bad(
                    f"answers.content.reasoning_split.flags: unknown flag {flag!r} (use names of Python's re flags, e.g. DOTALL)"
                )
        g = rules.need(split, "keep_group", "answers.content.reasoning_split")
        if isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= rx.groups:
            raise rules.bad(
                f"answers.content.reasoning_split.keep_group must be a group of the pattern (1..{rx.groups})"
            )
        fields = split.get("separate_fields", []) or []
        if not isinstance(fields, list) or any(not isinstance(f, str) for f in fields):
            raise rules.bad("answers.content.reasoning_split.separate_fields must be a list of message field names")


def _answer_records(rules: _Rules, data: dict) -> None:
    """How a missing, failed or unparseable trial enters the metrics."""
    answers = data["answers"]
    records = rules.mapping(rules.need(answers, "records", "answers"), "answers.records")
    for status in ("missing", "error", "unparseable"):
        rule = rules.need(records, status, "answers.records")
        per_prompt = rule if isinstance(rule, dict) else {p: rule for p in PROMPT_TYPES}
        for p in PROMPT_TYPES:
            if per_prompt.get(p) not in RECORD_RULES:
                raise rules.bad(
                    f"answers.records.{status}"
                    + (f".{p}" if isinstance(rule, dict) else "")
                    + f" must be one of {', '.join(RECORD_RULES)}"
                )


def _derived_answers(rules: _Rules, data: dict) -> None:
    """The pick-best-and-worst answer for k = 2."""
    ptypes = data["prompt_types"]
    derived = ptypes["pick_best_and_worst"].get("derived_for_k2_from", "pick_best")
    if derived != "pick_best":
        raise rules.bad(
            "prompt_types.pick_best_and_worst.derived_for_k2_from must be pick_best (the only rule implemented)"
        )


def _sampling(rules: _Rules, data: dict) -> None:
    """The model's sampling settings."""
    sampling = rules.mapping(data.get("sampling") or {}, "sampling")
    t = sampling.get("temperature", 1.0)
    rules.check(number_problem(t, "sampling.temperature", low=0, high=MAX_TEMPERATURE))
    mt = sampling.get("max_tokens", 1)
    if isinstance(mt, bool) or not isinstance(mt, int) or not 1 <= mt <= MAX_TOKENS:
        raise rules.bad(f"sampling.max_tokens must be a positive integer of at most {MAX_TOKENS}")


def _message(rules: _Rules, data: dict) -> None:
    """The request's message and images."""
    msg = data.get("message")
    if msg is not None:
        msg = rules.mapping(msg, "message")
        for key in ("option_line", "image_caption"):
            if not isinstance(rules.need(msg, key, "message"), str):
                raise rules.bad(f"message.{key} must be a string")
        image = rules.mapping(rules.need(msg, "image", "message"), "message.image")
        if image.get("mode") != "RGB" or image.get("format") != "JPEG":
            raise rules.bad("message.image: only mode RGB and format JPEG are implemented")
        if image.get("exif_orientation", "none") not in ("none", "when_tagged"):
            raise rules.bad("message.image.exif_orientation must be 'none' or 'when_tagged'")
        q = image.get("quality")
        if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= 100:
            raise rules.bad("message.image.quality must be an integer 1..100")


def _judge(rules: _Rules, data: dict) -> None:
    """A scoring function's trials and ties."""
    judge = rules.mapping(data["judge"], "judge")
    nt = rules.need(judge, "num_trials", "judge")
    if isinstance(nt, bool) or not isinstance(nt, int) or not 1 <= nt <= MAX_JUDGE_TRIALS:
        raise rules.bad(f"judge.num_trials must be a positive integer of at most {MAX_JUDGE_TRIALS}")
    if rules.need(judge, "tie_break", "judge") != "presentation_position":
        raise rules.bad("judge.tie_break must be 'presentation_position' (the only rule implemented)")


def _metrics(rules: _Rules, data: dict) -> None:
    """The metrics and what each counts as correct."""
    metrics = rules.mapping(data["metrics"], "metrics")
    if not metrics:
        raise rules.bad("'metrics' must name at least one of top1, bot1, tb1")
    for name, spec in metrics.items():
        if name not in METRICS:
            raise rules.bad(f"metrics.{name}: unknown metric (known: {', '.join(METRICS)})")
        spec = rules.mapping(spec, f"metrics.{name}")
        rules.need(spec, "label", f"metrics.{name}")
        if spec.get("prompt_type", _METRIC_PROMPT[name]) != _METRIC_PROMPT[name]:
            raise rules.bad(f"metrics.{name}.prompt_type must be {_METRIC_PROMPT[name]}")
        if spec.get("correct", _CORRECT[name]) != _CORRECT[name]:
            raise rules.bad(f"metrics.{name}.correct must be {_CORRECT[name]}")


def _aggregations(rules: _Rules, data: dict) -> None:
    """The aggregations over trials."""
    aggs = rules.mapping(data["aggregations"], "aggregations")
    for name in aggs:
        if name not in AGGREGATIONS:
            raise rules.bad(f"aggregations.{name}: unknown aggregation (known: {', '.join(AGGREGATIONS)})")
        definition = rules.mapping(aggs[name], f"aggregations.{name}").get("definition")
        if definition != _DEFINITION[name]:
            raise rules.bad(f"aggregations.{name}.definition must be {_DEFINITION[name]} (the only rule implemented)")
    boot = rules.mapping(
        rules.need(rules.mapping(data["aggregation"], "aggregation"), "bootstrap", "aggregation"),
        "aggregation.bootstrap",
    )
    for key in ("confidence", "resamples", "seed"):
        rules.need(boot, key, "aggregation.bootstrap")
    rules.check(bootstrap_problem(boot, "aggregation.bootstrap"))


def _consensus(rules: _Rules, data: dict) -> None:
    """The expert consensus and its thresholds."""
    lo, hi = data["candidates"]["min"], data["candidates"]["max"]
    cons = rules.mapping(data["consensus"], "consensus")
    n = rules.need(cons, "n_judges", "consensus")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_JUDGES:
        raise rules.bad(f"consensus.n_judges must be a positive integer of at most {MAX_JUDGES}")
    alpha = rules.need(cons, "alpha", "consensus")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise rules.bad("consensus.alpha must be a number between 0 and 1")
    th = rules.mapping(rules.need(cons, "thresholds", "consensus"), "consensus.thresholds")
    for k, m in th.items():
        if not (isinstance(k, int) and lo <= k <= hi) or not (isinstance(m, int) and 1 <= m <= n):
            raise rules.bad(
                f"consensus.thresholds: {k}: {m}: keys must be integers k in candidates.min..max, values integers 1..n_judges"
            )
    paper = cons.get("paper_thresholds", []) or []
    if not isinstance(paper, list) or any(k not in th for k in paper):
        raise rules.bad("consensus.paper_thresholds must list k values of consensus.thresholds")
    mc = rules.mapping(cons.get("monte_carlo") or {}, "consensus.monte_carlo")
    if "seed" in mc:
        rules.check(integer_problem(mc["seed"], "consensus.monte_carlo.seed", low=0, high=MAX_SEED))
    if "confidence" in mc:
        rules.check(
            number_problem(
                mc["confidence"], "consensus.monte_carlo.confidence", low=0, high=1, low_open=True, high_open=True
            )
        )


def _comparison(rules: _Rules, data: dict) -> None:
    """The optional comparison section (needed by compare and the gate)."""
    if "comparison" in data:  # optional (needed by compare and the gate); when present it is checked now
        from types import SimpleNamespace

        comparison_params(SimpleNamespace(path=rules.path, data=data))


#: The rules of a selection protocol, in the order they are checked: one function per section.
RULES = (
    _top_level,
    _candidates,
    _trials,
    _prompt_types,
    _answer_patterns,
    _answer_attempts,
    _answer_http,
    _answer_content,
    _answer_records,
    _derived_answers,
    _sampling,
    _message,
    _judge,
    _metrics,
    _aggregations,
    _consensus,
    _comparison,
)


# ---- the comparison section (read by selection.compare and the gate) ------------------------------

#: Outcomes, tests and corrections a selection protocol's `comparison` section may name.
OUTCOMES = ("pass^3", "ap@1")
_TESTS = ("mcnemar_exact",)
_CORRECTIONS = ("holm",)


@dataclass(frozen=True)
class ComparisonParams:
    test: str
    outcomes: tuple[str, ...]
    correction: str
    alpha: float
    min_counted_fraction: float  # a gated/bounded value must count at least this fraction of the track's tasks
    power: PowerSection = PowerSection()  # `comparison.power` (selection/power.py), the defaults when absent


def comparison_params(protocol) -> ComparisonParams:
    """The selection protocol's `comparison` section, checked (a bad one names the file and key)."""

    def bad(rule: str) -> UserError:
        return UserError(f"{protocol.path}: invalid selection protocol: {rule}")

    cfg = protocol.data.get("comparison")
    if not isinstance(cfg, dict):
        raise bad(
            "missing 'comparison' section (test, outcomes, correction, alpha), needed to compare selection runs; "
            "fix: copy it from the shipped protocols/vab.yaml"
        )
    for key in (k for k in ("test", "outcomes", "correction", "alpha", "min_counted_fraction") if k not in cfg):
        raise bad(f"missing key 'comparison.{key}'")
    if cfg["test"] not in _TESTS:
        raise bad(f"comparison.test must be {' or '.join(_TESTS)} (the only test implemented)")
    if cfg["correction"] not in _CORRECTIONS:
        raise bad(f"comparison.correction must be {' or '.join(_CORRECTIONS)} (the only correction implemented)")
    outcomes = cfg["outcomes"]
    if (
        not isinstance(outcomes, list)
        or not outcomes
        or any(o not in OUTCOMES for o in outcomes)
        or len(set(outcomes)) != len(outcomes)
    ):
        raise bad(f"comparison.outcomes must be a non-empty list of distinct outcomes among {', '.join(OUTCOMES)}")
    alpha, frac = cfg["alpha"], cfg["min_counted_fraction"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise bad("comparison.alpha must be a number between 0 and 1")
    if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
        raise bad("comparison.min_counted_fraction must be a number in (0, 1] (1: every task counted)")
    if "power" in cfg and power_problem(cfg["power"], "comparison.power"):  # optional (selection/power.py)
        raise bad(power_problem(cfg["power"], "comparison.power"))
    if "baseline_correlation" in (cfg.get("power") or {}):  # a field the engine cannot honour is refused
        raise bad(
            "comparison.power.baseline_correlation plans paired runs only (a selection MDE uses the observed discordance); fix: drop it"
        )
    return ComparisonParams(
        str(cfg["test"]),
        tuple(outcomes),
        str(cfg["correction"]),
        float(alpha),
        float(frac),
        PowerSection.of(cfg.get("power")),
    )


@dataclass(frozen=True)
class SelectionParams:
    """Typed view on a loaded selection protocol (`pytest_pstbench.core.protocol.Protocol`)."""

    protocol: Any

    @classmethod
    def of(cls, protocol) -> SelectionParams:
        if protocol.data.get("kind") != "selection":
            raise UserError(
                f"{protocol.path}: protocol {protocol.id} is not a selection protocol (kind: selection); "
                f"fix: use --protocol {DEFAULT_SELECTION_PROTOCOL} (or another selection protocol) with a selection track"
            )
        return cls(protocol)

    @property
    def data(self) -> dict:
        return self.protocol.data

    @property
    def labels(self) -> list[str]:
        return [str(x) for x in self.data["candidates"]["labels"]]

    @property
    def k_min(self) -> int:
        return int(self.data["candidates"]["min"])

    @property
    def k_max(self) -> int:
        return int(self.data["candidates"]["max"])

    @property
    def trials(self) -> int:
        return int(self.data["trials"]["count"])

    @property
    def permutation(self) -> dict:
        return self.data["trials"]["permutation"]

    def prompt_types_for(self, k: int) -> list[str]:
        """The prompt types asked for a task of size k (in protocol order)."""
        return [p for p in PROMPT_TYPES if k >= int(self.data["prompt_types"][p]["min_k"])]

    def template(self, prompt_type: str) -> str:
        return self.data["prompt_types"][prompt_type]["template"]

    @property
    def metrics(self) -> dict[str, dict]:
        return self.data["metrics"]

    @property
    def aggregations(self) -> list[str]:
        return list(self.data["aggregations"])

    @property
    def bootstrap(self) -> dict:
        return self.data["aggregation"]["bootstrap"]

    @property
    def consensus(self) -> dict:
        return self.data["consensus"]

    @property
    def judge(self) -> dict:
        return self.data["judge"]

    def answer_regex(self, which: str) -> re.Pattern:
        answers = self.data["answers"]
        flags = 0
        for name in answers.get("flags", []) or []:
            flags |= getattr(re, str(name))
        return re.compile(str(answers["patterns"][which]), flags)

    def record_rule(self, status: str, prompt_type: str) -> str:
        """'counted', 'dropped' or 'absent' for a trial whose answer has `status` (not 'ok')."""
        rule = self.data["answers"]["records"][status]
        return rule[prompt_type] if isinstance(rule, dict) else rule

    @property
    def attempts(self) -> dict:
        a = self.data["answers"].get("attempts") or {}
        return {
            "max": int(a.get("max", 1)),
            "delays_s": list(a.get("delays_s", [])),
            "retry_on": list(a.get("retry_on", [])),
            "not_retried_statuses": list(a.get("not_retried_statuses", []) or []),
            "stop_run_statuses": list(a.get("stop_run_statuses", []) or []),
        }

    @property
    def http_retries(self) -> dict:
        """answers.attempts.http: HTTP calls made again within one attempt (none when absent)."""
        h = (self.data["answers"].get("attempts") or {}).get("http") or {}
        return {
            "retries": int(h.get("retries", 0)),
            "retry_statuses": list(h.get("retry_statuses", []) or []),
            "retry_on": list(h.get("retry_on", []) or []),
            "backoff_s": [float(x) for x in h.get("backoff_s", []) or []],
            "retry_after_max_s": float(h.get("retry_after_max_s", 0)),
        }

    @property
    def reasoning_split(self) -> tuple[re.Pattern, int, tuple[str, ...]] | None:
        """answers.content.reasoning_split as (compiled pattern, group kept, separate fields), or None."""
        split = (self.data["answers"].get("content") or {}).get("reasoning_split")
        if not split:
            return None
        flags = 0
        for name in split.get("flags", []) or []:
            flags |= getattr(re, str(name))
        return (
            re.compile(str(split["pattern"]), flags),
            int(split["keep_group"]),
            tuple(split.get("separate_fields", []) or []),
        )

    @property
    def message(self) -> dict | None:
        return self.data.get("message")

    @property
    def sampling(self) -> dict:
        return dict(self.data.get("sampling") or {})

    @property
    def answer_match(self) -> str:
        return str(self.data["answers"].get("match", "last"))

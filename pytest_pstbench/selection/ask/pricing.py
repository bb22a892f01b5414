"""What a model run cost: a price table (money per million tokens) applied to the token usage its answers file
records (`usage`), per run, per prompt type, per task and per trial.

A price table comes from the command line (`--price-in X --price-out Y`, optional `--price-cached-in` (default:
the input price) and `--currency` (default USD): one price for every model) or from a small YAML price file
(`--prices FILE`), one row per model, nothing built in for any provider::

    gpt-4o-mini: {in: 0.15, out: 0.60, cached_in: 0.075, currency: USD}
    my-org/vlm-7b:
      in: 0.20
      out: 0.20

A row may also hold the model's batch price (`batch_in`, `batch_out`, optional `batch_cached_in`, default
`batch_in`): what a request asked through the Batch API costs (`vab run --batch`; an answers line from a batch says
`batch`). A batch line (and a `--batch` run's estimate and budget) is priced at it, never at the interactive price:
where the row has none (or the prices come from the command line), `price_of(model, batch=True)` is one UserError
naming the file and the fix::

    gpt-4o-mini: {in: 0.15, out: 0.60, cached_in: 0.075, batch_in: 0.075, batch_out: 0.30}

A call costs (prompt - cached) x in + cached x cached_in + completion x out, per million tokens; reasoning tokens
are part of the completion tokens (counted once). A line whose usage is not known (`usage: null`, or no `usage`
at all) is never priced as zero: the cost says "unknown for N lines", and a trial with such a line has no cost.
run.json's judge records the cost with the prices used and where they came from (`judge.cost`); summary.json
its totals (`cost`). `run_check.check_usage_and_cost` recomputes them from run.json's usage, never trusting them.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.ask.usage import CACHED

PER = 1_000_000  # prices are money per million tokens
MAX_PRICE = 1_000_000.0  # per million tokens: above it a price is a typo (or a price per token given per million)
ANY_MODEL = "*"  # the row of a price given on the command line: every model
ROW_KEYS = ("in", "out", "cached_in", "batch_in", "batch_out", "batch_cached_in", "currency")
BATCH_ROW = " (batch)"  # judge.cost's prices: the name of a row's batch price (`row` + BATCH_ROW)
SUMMARY_KEYS = ("currency", "total", "lines_priced", "lines_unknown", "by_prompt_type")
FILE_FIX = "fix: give one row per model, e.g. `my-model: {in: 0.15, out: 0.60, cached_in: 0.075, currency: USD}` (money per million tokens)"


@dataclass(frozen=True)
class Price:
    in_: float
    out: float
    cached_in: float
    currency: str
    batch: Price | None = None  # the same model's batch price (the Batch API's), where the row gives one

    def row(self) -> dict:
        return {"in": self.in_, "out": self.out, "cached_in": self.cached_in, "currency": self.currency}


@dataclass(frozen=True)
class PriceTable:
    rows: dict  # model name (or ANY_MODEL) -> Price
    source: str  # "command line" or the price file's path
    sha256: str | None = None  # the price file's

    def price_of(self, model: str | None, batch: bool = False) -> tuple[str, Price]:
        """(the row's name, its price) that prices `model`'s calls; `batch`: its batch price (a UserError where the
        table has none: the interactive price is never used for a batch)."""
        row, price = self._row(model)
        if not batch:
            return row, price
        if price.batch is None:
            if self.source == "command line":
                raise UserError(
                    "--price-in/--price-out: the interactive price; a request asked through the Batch API (--batch) is "
                    "billed at the batch price; fix: give --prices FILE with the batch price in the model's row, e.g. "
                    f"`{model or 'MODEL'}: {{in: X, out: Y, batch_in: X2, batch_out: Y2}}`"
                )
            raise UserError(
                f"{self.source}: row {row} has no batch price (batch_in, batch_out), and requests asked through the "
                "Batch API (--batch) are billed at it; fix: add `batch_in: X, batch_out: Y` (money per million tokens, "
                f"the provider's batch price) to row {row}"
            )
        return row + BATCH_ROW, price.batch

    def _row(self, model: str | None) -> tuple[str, Price]:
        if ANY_MODEL in self.rows:
            return ANY_MODEL, self.rows[ANY_MODEL]
        if model is None and len(self.rows) == 1:
            return next(iter(self.rows.items()))
        if model not in self.rows:
            shown = ", ".join(sorted(self.rows)[:8])
            what = f"model {model!r}" if model is not None else "an answers line without a model"
            raise UserError(
                f"{self.source}: no price row for {what} (rows: {shown}); fix: add a row "
                f"`{model or 'MODEL'}: {{in: ..., out: ...}}` or price it with --price-in/--price-out"
            )
        return model, self.rows[model]


def _number(value, where: str, fix: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= MAX_PRICE
    ):
        raise UserError(f"{where} is {value!r}, not a price per million tokens from 0 to {MAX_PRICE:g}; {fix}")
    return float(value)


def _currency(value, where: str, fix: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 16 or not value.isprintable():
        raise UserError(f"{where} is {value!r}, not a currency name (e.g. USD, EUR: up to 16 characters); {fix}")
    return value.strip()


def read_price_file(path: Path | str) -> PriceTable:
    """The price file `path` (one row per model); any problem is one UserError naming the file, line and row."""
    from pytest_pstbench.core.files.yamlfile import read_yaml, yaml_line

    path = Path(path)
    data = read_yaml(path, "price file")

    def at(*keys) -> str:
        line = yaml_line(path, keys)
        return f"{path}:{line}" if line else str(path)

    if not isinstance(data, dict) or not data:
        raise UserError(
            f"{at()}: a price file is a mapping of model name -> prices, not {type(data).__name__}; {FILE_FIX}"
        )
    rows = {}
    for model, row in data.items():
        if not isinstance(model, str) or not model or not model.isprintable() or model == ANY_MODEL:
            raise UserError(f"{at()}: row name {model!r} is not a model name; {FILE_FIX}")
        if not isinstance(row, dict):
            raise UserError(
                f"{at(model)}: row {model}: is {type(row).__name__}, not a mapping of in, out, cached_in, currency; {FILE_FIX}"
            )
        unknown = [k for k in row if k not in ROW_KEYS]
        if unknown:
            raise UserError(
                f"{at(model, unknown[0])}: row {model}: field {unknown[0]!r} is not one of {', '.join(ROW_KEYS)}; {FILE_FIX}"
            )
        for need in ("in", "out"):
            if need not in row:
                raise UserError(f"{at(model)}: row {model}: lacks {need!r} (money per million tokens); {FILE_FIX}")
        got = {
            k: _number(row[k], f"{at(model, k)}: row {model}: {k}", FILE_FIX)
            for k in ROW_KEYS
            if k != "currency" and k in row
        }
        currency = _currency(row.get("currency", "USD"), f"{at(model, 'currency')}: row {model}: currency", FILE_FIX)
        batch = _batch(got, at(model), model, currency)
        rows[model] = Price(got["in"], got["out"], got.get("cached_in", got["in"]), currency, batch)
    return PriceTable(rows, str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def _batch(got: dict, where: str, model: str, currency: str) -> Price | None:
    """A row's batch price (None where it gives none); batch_in and batch_out come together."""
    given = [k for k in ("batch_in", "batch_out", "batch_cached_in") if k in got]
    if not given:
        return None
    if "batch_in" not in got or "batch_out" not in got:
        lacks = "batch_in" if "batch_in" not in got else "batch_out"
        raise UserError(
            f"{where}: row {model}: has {given[0]} but lacks {lacks!r} (a batch price needs both); fix: give "
            "`batch_in: X, batch_out: Y` (the provider's batch price per million tokens), or neither"
        )
    return Price(got["batch_in"], got["batch_out"], got.get("batch_cached_in", got["batch_in"]), currency)


def table_from_args(args) -> PriceTable | None:
    """The price table of `--prices FILE` or `--price-in/--price-out` (None when neither is given)."""
    p_in, p_out = getattr(args, "price_in", None), getattr(args, "price_out", None)
    cached, prices = getattr(args, "price_cached_in", None), getattr(args, "prices", None)
    currency = getattr(args, "currency", None)
    given = [
        o
        for o, v in (
            ("--price-in", p_in),
            ("--price-out", p_out),
            ("--price-cached-in", cached),
            ("--currency", currency),
        )
        if v is not None
    ]
    if prices is not None:
        if given:
            raise UserError(
                f"--prices and {given[0]}: give one price table; fix: put the prices in the file, or drop --prices"
            )
        return read_price_file(prices)
    if not given:
        return None
    if p_in is None or p_out is None:
        raise UserError(
            f"{given[0]} without {'--price-in' if p_in is None else '--price-out'}: a price needs both; "
            "fix: give --price-in X --price-out Y (money per million prompt / completion tokens)"
        )
    fix = "fix: give money per million tokens, e.g. --price-in 0.15 --price-out 0.60"
    p_in, p_out = _number(p_in, "--price-in", fix), _number(p_out, "--price-out", fix)
    cached = p_in if cached is None else _number(cached, "--price-cached-in", fix)
    return PriceTable(
        {ANY_MODEL: Price(p_in, p_out, cached, _currency(currency or "USD", "--currency", fix))}, "command line"
    )


def call_cost(counts: dict, price: Price) -> float:
    """The money a call's (or a sum of calls') token counts cost: cached prompt tokens at the cached price,
    reasoning tokens inside the completion tokens."""
    cached = counts.get("cached_tokens", 0)
    return (
        (counts["prompt_tokens"] - cached) * price.in_
        + cached * price.cached_in
        + counts["completion_tokens"] * price.out
    ) / PER


def cost_record(answer_set, table: PriceTable, model: str | None = None, trials: int | None = None) -> dict:
    """run.json's `judge.cost` of an answers file under a price table: the prices used and where from, the total,
    per prompt type, per task and trial (None where a line's usage is not known), and the lines priced / unknown.
    `model`: the model of lines that name none (`vab run --model`)."""
    used: dict[str, Price] = {}
    total, priced, unknown = 0.0, 0, 0
    by_type: dict[str, float] = {}
    per_trial: dict[tuple[str, int], float | None] = {}
    batch = list(getattr(answer_set, "usage_batch", ()))  # beside each line: asked through the Batch API
    for i, ((ptype, usage), (tid, trial, line_model)) in enumerate(zip(answer_set.usage_lines, answer_set.usage_keys)):
        key = (tid, trial)
        if usage == CACHED:  # answered from the response cache: this run paid nothing for it
            per_trial.setdefault(key, 0.0)
            continue
        if usage is None or usage is ...:
            unknown += 1
            per_trial[key] = None
            continue
        row, price = table.price_of(line_model or model, batch=i < len(batch) and batch[i])
        used[row] = price
        c = call_cost(usage, price)
        priced += 1
        total += c
        by_type[ptype] = by_type.get(ptype, 0.0) + c
        if key not in per_trial or per_trial[key] is not None:
            per_trial[key] = per_trial.get(key, 0.0) + c
    currencies = sorted({p.currency for p in used.values()})
    if len(currencies) > 1:
        raise UserError(
            f"{table.source}: the models of these answers are priced in {', '.join(currencies)}; "
            "fix: give their prices in one currency"
        )
    per_task: dict[str, list] = {}
    if trials is None:
        trials = max((t for _tid, t in per_trial), default=-1) + 1
    for (tid, t), c in sorted(per_trial.items()):
        per_task.setdefault(tid, [0.0] * trials)[t] = c
    source = {"source": table.source, **({"sha256": table.sha256} if table.sha256 else {})}
    return {
        "currency": currencies[0] if currencies else next(iter(table.rows.values())).currency,
        "total": total if priced else None,
        "lines_priced": priced,
        "lines_unknown": unknown,
        "by_prompt_type": {k: by_type[k] for k in sorted(by_type)},
        "per_task": per_task,
        "prices": {name: p.row() for name, p in sorted(used.items())},
        "unit": "money per million tokens",
        **source,
    }


def with_cost(provenance: dict, answer_set, table: PriceTable | None, params, model: str | None = None) -> dict:
    """A judge's provenance with `cost` added (unchanged without a price table)."""
    if table is None:
        return provenance
    return {**provenance, "cost": cost_record(answer_set, table, model, params.trials)}


def summary_cost(cost: dict) -> dict:
    """summary.json's `cost`: run.json judge.cost's totals."""
    return {k: cost[k] for k in SUMMARY_KEYS}


def money(value: float | None, currency: str) -> str:
    if value is None:
        return "unknown"
    return f"{value:.4g} {currency}" if value < 1 else f"{value:,.2f} {currency}"


def cost_line(cost: dict | None) -> str | None:
    """One line: the run's cost (or why it is not known), per prompt type."""
    if not cost:
        return None
    cur = cost["currency"]
    text = f"cost: {money(cost['total'], cur)}"
    if cost["lines_unknown"]:
        text += (
            f" for {cost['lines_priced']} lines with usage; unknown for {cost['lines_unknown']} lines "
            "(the server sent no usage)"
        )
    parts = [f"{k} {money(v, cur)}" for k, v in cost["by_prompt_type"].items()]
    return text + (f" ({'; '.join(parts)})" if parts else "")


def per_correct(cost: dict | None, n_correct: float | None) -> float | None:
    """Cost per correct task (None when the cost is not fully known or nothing is correct)."""
    if not cost or cost.get("total") is None or cost.get("lines_unknown") or not n_correct:
        return None
    return cost["total"] / n_correct


PER_CORRECT = ("tb1", "pass^3")  # the number a lab compares: cost per task the judge got right on TB-1 pass^3


def table_columns(track: str, runs, params) -> list:
    """`pstbench table`'s cost columns of a track whose runs carry a cost (summary.json `cost`; none otherwise): the
    run's cost and its cost per correct TB-1 pass^3 task (correct tasks: the overall cell's mean x its n). Not
    ranked, not tested; a run whose cost is not fully known shows why."""
    from pytest_pstbench.core.paper_table import Cell, Column

    costs = {r.name: r.summary.get("cost") for r in runs}
    if not any(isinstance(c, dict) for c in costs.values()):
        return []
    currencies = sorted({c["currency"] for c in costs.values() if isinstance(c, dict)})
    unit = currencies[0] if len(currencies) == 1 else "mixed currencies"
    total = Column(track, "cost", None, f"Cost ({unit})", False, None, False)
    metric, agg = PER_CORRECT
    label = (
        f"{params.metrics[metric].get('label', metric)} {params.data['aggregations'][agg].get('label', agg)}"
        if metric in params.metrics and agg in params.aggregations
        else None
    )
    per = (
        Column(track, "cost_per_correct", agg, f"Cost per correct {label} task ({unit})", False, None, False)
        if label
        else None
    )
    for r in runs:
        cost = costs[r.name]
        if not isinstance(cost, dict):
            total.cells[r.name] = Cell(None, None, None, None, "-")
            if per:
                per.cells[r.name] = Cell(None, None, None, None, "-")
            continue
        known = cost["total"] if not cost["lines_unknown"] else None
        text = f"{known:.4g}" if known is not None else f"unknown for {cost['lines_unknown']} lines"
        total.cells[r.name] = Cell(known, None, None, None, text)
        if per:
            overall = next((c for c in r.summary.get("cells", []) if c.get("group") == "overall"), {})
            e = (overall.get("metrics", {}).get(metric) or {}).get(agg) or {}
            n_correct = (
                round(e["mean"] * e["n"])
                if isinstance(e.get("mean"), (int, float)) and isinstance(e.get("n"), int)
                else None
            )
            value = per_correct(cost, n_correct)
            why = text if known is None else "no correct task"
            per.cells[r.name] = Cell(value, None, None, None, f"{value:.4g}" if value is not None else why)
    return [total] + ([per] if per else [])

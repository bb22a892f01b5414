"""The regression gate: a finished run against baseline runs and bounds on means."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_pstbench.core.errors import UserError, suggest


def parse_number_items(
    items,
    option: str,
    names: list[str],
    *,
    example: str,
    unknown,
    check=None,
    check_name=None,
    number_fix=None,
    noun: str = "values",
) -> dict[str, float]:
    """`["KEY=VALUE", ...]` -> {KEY: VALUE}: the one KEY=VALUE parser of the gate's options (bounds and
    margins). Each KEY is one of `names` (`unknown(key)` says why another is refused), each VALUE a finite
    number; `check_name(item, name)` and `check(item, name, value, number)` may refuse them further,
    `number_fix(name)` ends the line for a VALUE that is not a number. A KEY given twice with two values
    is refused (the same value twice counts once): with "the last wins", a bound given twice on the
    command line or in the ini file would silently loosen the gate."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = str(item).partition("=")
        name = name.strip()
        if not sep:
            raise UserError(f"{option} {item!r}: expected {example}")
        if name not in names:
            raise UserError(f"{option} {item!r}: {unknown(name)}{suggest(name, names)}")
        if check_name is not None:
            check_name(item, name)
        try:
            number = float(value)
        except ValueError:
            raise UserError(
                f"{option} {item!r}: {value!r} is not a number{number_fix(name) if number_fix else ''}"
            ) from None
        if check is not None:
            check(item, name, value, number)
        if name in out and out[name] != number:
            raise UserError(f"{option}: two {noun} for {name} ({out[name]:g} and {number:g}); fix: give one")
        out[name] = number
    return out


def parse_bound_items(
    items: list[str] | None,
    kind: str,
    names: list[str],
    *,
    example: str,
    unknown,
    lo: float = -math.inf,
    hi: float = math.inf,
) -> dict[str, float]:
    """`["KEY=VALUE", ...]` -> {KEY: VALUE} for `--pstbench-{kind}`, each KEY one of `names`; shared by
    paired and selection runs. `example` shows the syntax ("METRIC=VALUE, e.g. psnr=22"), `unknown(key)`
    says why a key is refused (naming the valid ones); `lo`/`hi` bound the values."""
    option = f"--pstbench-{kind}"

    def check(item, name, value, number):
        if not math.isfinite(number):
            raise UserError(f"{option} {item!r}: {value!r} is not a finite number")
        if not lo <= number <= hi:
            raise UserError(f"{option} {item!r}: {value!r} is outside [{lo:g}, {hi:g}], the range of these means")

    return parse_number_items(items, option, names, example=example, unknown=unknown, check=check)


def parse_bounds(items: list[str] | None, kind: str, protocol) -> dict[str, float]:
    """Paired runs: `["psnr=22", ...]` -> {"psnr": 22.0}; metric names are checked against the protocol."""
    names = protocol.metric_names
    return parse_bound_items(
        items,
        kind,
        names,
        example="METRIC=VALUE, e.g. psnr=22",
        unknown=lambda name: f"unknown metric {name!r}; protocol {protocol.id} has {', '.join(names)}",
    )


def parse_margins(
    items: list[str] | None, protocol, *, option: str = "--pstbench-gate-margin", tested: list[str] | None = None
) -> dict[str, float]:
    """Paired runs: `["lpips=0.002", ...]` -> {"lpips": 0.002}, the non-inferiority margins of the gate
    (`--pstbench-gate-margin`, `pstbench compare --margin`), in the units of the per-pair values of
    metrics.csv. A margin must be a finite number >= 0 for a metric of the protocol that is tested
    (`tested`: the gated/compared metrics, default the ranked ones); margin 0 is the test without a margin."""
    names = protocol.metric_names
    tested = list(tested or protocol.ranked_metrics)

    def check_name(item, name):
        if name not in tested:
            raise UserError(
                f"{option} {item!r}: {name} is not among the tested metrics ({', '.join(tested)}); "
                "fix: test it (--metrics / --pstbench-gate-metrics) or drop its margin"
            )

    def check(item, name, value, number):
        if not math.isfinite(number) or number < 0:
            raise UserError(
                f"{option} {item!r}: a margin must be a finite number >= 0 (0: no margin); fix: give e.g. {name}=0.002"
            )

    return parse_number_items(
        items,
        option,
        names,
        example="METRIC=DELTA, e.g. lpips=0.002; fix: name a metric and its margin",
        check_name=check_name,
        check=check,
        number_fix=lambda name: f"; fix: give a margin such as {name}=0.002",
        unknown=lambda name: (
            f"unknown metric {name!r}; fix: use one of protocol {protocol.id}'s metrics: {', '.join(names)}"
        ),
        noun="margins",
    )


def margins_to_apply(
    items, protocol, *, option: str = "--pstbench-gate-margin", tested: list[str] | None = None
) -> dict[str, float]:
    """The margins a comparison applies (`compare_two`'s `margins`): `parse_margins` of `items` (METRIC=DELTA
    strings, or a mapping {metric: delta} from Python), keeping those > 0 (margin 0 is the test without a
    margin). The one margin path of `pstbench compare --margin`, `--pstbench-gate-margin` and the API's
    `compare(margins=...)`."""
    if isinstance(items, Mapping):
        items = [f"{m}={d}" for m, d in items.items()]
    return {m: d for m, d in parse_margins(items, protocol, option=option, tested=tested).items() if d > 0}


def parse_metrics(spec: str | None, protocol) -> list[str] | None:
    if not spec:
        return None
    from pytest_pstbench.core.compare import check_metric_names

    names = [m.strip() for m in str(spec).split(",") if m.strip()]
    if not names:
        return names
    return check_metric_names(
        names,
        protocol.metrics,
        lambda unknown: (
            f"--pstbench-gate-metrics: unknown metric(s) {', '.join(unknown)}; protocol {protocol.id} has "
            f"{', '.join(protocol.metric_names)}"
        ),
    )


def check_bounds(
    means: dict[str, float | None],
    mins: dict[str, float],
    maxs: dict[str, float],
    label=str,
    statistic=lambda key: "mean",
) -> list[str]:
    """One reason per broken bound (`--pstbench-min`/`--pstbench-max`), in the order of `mins` then
    `maxs`; `label(key)` names the value in the reason and `statistic(key)` says what it is (the mean,
    or the statistic the protocol aggregates that metric with). A missing value (nothing scored) breaks
    its bound."""
    reasons = []
    for bounds, kind, word, broken in (
        (mins, "min", "below the minimum", lambda v, b: v < b),
        (maxs, "max", "above the maximum", lambda v, b: v > b),
    ):
        for key, bound in bounds.items():
            value = means.get(key)
            what = statistic(key)
            if value is None:
                reasons.append(
                    f"{label(key)} has no {what} (nothing was scored), so the bound {bound:g} fails (--pstbench-{kind})"
                )
            elif broken(value, bound):
                reasons.append(f"{label(key)} {what} {value:.6g} is {word} {bound:g} (--pstbench-{kind})")
    return reasons


@dataclass(frozen=True)
class WorstItems:
    """The items a candidate lost most on, for one metric it failed the gate on against one baseline (a kind's
    `RunKind.gate_worst`): what the terminal summary and the Markdown summary show under the gate's reasons.
    Plain text cells, formatted by the kind; every front door escapes them as it shows them."""

    title: str  # e.g. "PSNR↑ (psnr) against baseline run base: the 3 pairs the candidate lost most on ..."
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""  # said when there is no row, or what the rows leave out


@dataclass
class GateResult:
    comparison: object | None = None  # compare.Comparison
    reasons: list[str] = field(default_factory=list)
    worst: list[WorstItems] = field(default_factory=list)  # per failing metric and baseline: the items lost most on
    notes: list[str] = field(default_factory=list)  # e.g. a baseline given twice, counted once
    basis: list[str] = field(default_factory=list)  # what the verdict rests on, beyond the items scored

    @property
    def failed(self) -> bool:
        return bool(self.reasons)

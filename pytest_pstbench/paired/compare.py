"""Paired comparison of runs: Wilcoxon signed-rank per ranked metric, Holm over all tests of a call.

Used by `pstbench compare`, by the pytest regression gate (`--pstbench-baseline`) and by the
`pstbench_compare` fixture. Every parameter (tie thresholds, zero_method, alpha, bootstrap) comes
from the protocol's `comparison` section.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from pytest_pstbench.core.compare import check_runs_comparable, checked_runs, protocol_for, run_pairs
from pytest_pstbench.core.errors import UserError, suggest
from pytest_pstbench.paired.clusters import SIGN_FLIP
from pytest_pstbench.paired.clusters import paired_test as _paired_test
from pytest_pstbench.paired.clusters import run_clusters_of as _run_clusters
from pytest_pstbench.paired.runs import Run, check_record_lists, load_run

BETTER, WORSE, NO_DIFF = "better", "worse", "no significant difference"
# Verdicts of a test with a margin (non-inferiority gate, `--margin` / `--pstbench-gate-margin`).
WORSE_BEYOND_MARGIN, WITHIN_MARGIN = "worse beyond margin", "within margin"


@dataclass
class MetricComparison:
    metric: str
    baseline: str
    candidate: str
    n: int
    higher_is_better: bool
    mean_baseline: float
    mean_candidate: float
    mean_diff: float  # candidate - baseline
    diff_ci_low: float | None  # None: no interval over fewer clusters than comparison.bootstrap.min_clusters
    diff_ci_high: float | None
    wins: int  # pairs where the candidate is better (beyond the tie threshold)
    ties: int
    losses: int
    statistic: float
    pvalue: float
    direction: float = 0.0  # signed-rank sum oriented so that > 0 means the candidate is better
    p_holm: float = 1.0
    verdict: str = NO_DIFF
    # Set only for a metric with a margin > 0: then `statistic`/`pvalue`/`direction` are those of the
    # one-sided test of the margin-shifted differences (see `compare_two`); absent from the JSON otherwise.
    margin: float | None = None
    # What the test can detect (paired/power.py `detectable`: compare and the gate): the minimum detectable
    # effect and the settings it was simulated with; absent from the JSON where it was not computed.
    detectable: dict | None = None
    # Under a protocol that tests clusters (comparison.test cluster_sign_flip): their count, and then `statistic`
    # is the mean of the clusters' mean differences (stats.sign_flip_test); absent from the JSON otherwise.
    clusters: int | None = None


@dataclass
class Comparison:
    rows: list[MetricComparison]
    alpha: float
    protocol: str

    @property
    def worse(self) -> list[MetricComparison]:
        """Tests significantly worse (beyond the margin, for a test with a margin)."""
        return [r for r in self.rows if r.verdict in (WORSE, WORSE_BEYOND_MARGIN)]

    @property
    def better(self) -> list[MetricComparison]:
        return [r for r in self.rows if r.verdict == BETTER]

    def to_json(self) -> dict:
        return {"protocol": self.protocol, "alpha": self.alpha, "tests": [_row_json(r) for r in self.rows]}


def _row_json(row: MetricComparison) -> dict:
    d = asdict(row)
    if d["margin"] is None:  # without a margin the JSON is what it was before margins existed
        del d["margin"]
    if d["detectable"] is None:
        del d["detectable"]
    if d["clusters"] is None:
        del d["clusters"]
    return d


def _check_counts(run: Run, csv_path, complete: bool, fix: str) -> None:
    """run.json's n_pairs against metrics.csv's rows, and its n_scored a count from 0 to n_pairs (n_pairs when
    complete): a count a page shows is never negative (issue #54, found by tests/core/test_run_files_properties.py)."""
    n_pairs = run.run.get("n_pairs")
    if (
        not isinstance(n_pairs, int)
        or isinstance(n_pairs, bool)
        or (n_pairs != len(run.scores) if complete else n_pairs < len(run.scores))
    ):
        raise UserError(f"{csv_path}: has {len(run.scores)} pair rows but run.json n_pairs is {n_pairs!r}; {fix}")
    n_scored = run.run.get("n_scored", n_pairs)
    if not isinstance(n_scored, int) or isinstance(n_scored, bool) or not 0 <= n_scored <= n_pairs:
        raise UserError(f"{run.path / 'run.json'}: n_scored is {n_scored!r}, not a count from 0 to n_pairs; {fix}")
    if complete and n_scored != n_pairs:
        raise UserError(f"{run.path / 'run.json'}: complete, but n_scored {n_scored} is not n_pairs {n_pairs}; {fix}")


def validate_run(run: Run, protocol) -> None:
    """Refuse a paired run folder that this kit would not have written under `protocol` (baselines, table
    rows and report pages are held to the rules of new runs: an edited or foreign file must not be read as
    a number). One line naming the file, the rule and the fix: metrics.csv's columns are the protocol's
    metrics in its order; a complete run has a row for every pair of run.json's count, each cell a finite
    number (an incomplete one: a failed pair's row is empty); summary.json is an object that agrees with
    run.json (name, track, protocol, dataset revision, complete, n) and each metric's entry is the one
    recomputed from metrics.csv's scored pairs (`aggregation.summary_entry`: the statistic, its CI and pm,
    relative 1e-9); run.json's outputs, failures and deviations are lists of the entries this kit writes
    (`runs.check_record_lists`)."""
    import math

    from pytest_pstbench.paired.aggregation import summary_entry

    check_record_lists(run)
    fix = "fix: score that run again with this kit (or give another baseline)"
    csv_path, summary_path = run.path / "metrics.csv", run.path / "summary.json"
    names = protocol.metric_names
    columns = list(next(iter(run.scores.values()), {}).keys()) if run.scores else None
    if columns is not None and columns != names:
        raise UserError(
            f"{csv_path}: columns {', '.join(columns)} are not protocol {protocol.id}'s metrics "
            f"({', '.join(names)}); {fix}"
        )
    complete = run.run.get("complete") is True
    _check_counts(run, csv_path, complete, fix)
    for pid, values in run.scores.items():
        empty = [m for m, v in values.items() if v is None]
        for m, v in values.items():
            if (v is None and (complete or len(empty) != len(values))) or (v is not None and not math.isfinite(v)):
                raise UserError(
                    f"{csv_path}: pair {pid} {m} is {'empty' if v is None else v}, not a finite number, in a "
                    f"run that says complete: {str(complete).lower()}; {fix}"
                )
    scored_ids = [pid for pid, values in run.scores.items() if all(v is not None for v in values.values())]
    scored = [run.scores[pid] for pid in scored_ids]
    clusters = None
    if protocol.aggregation.bootstrap is not None and protocol.aggregation.bootstrap.clustered:
        from pytest_pstbench.paired.clusters import clusters_of

        clusters = clusters_of(run, scored_ids)
    summary = run.summary
    if not isinstance(summary, dict) or not isinstance(summary.get("metrics"), dict):
        raise UserError(f"{summary_path}: not a summary of a paired run (no metrics); {fix}")
    for key, want in (
        ("name", run.run.get("name")),
        ("track", run.run.get("track")),
        ("protocol", (run.run.get("protocol") or {}).get("id") if isinstance(run.run.get("protocol"), dict) else None),
        (
            "dataset_revision",
            (run.run.get("dataset") or {}).get("revision") if isinstance(run.run.get("dataset"), dict) else None,
        ),
        ("complete", run.run.get("complete")),
        ("n", len(scored)),
    ):
        if not _same(summary.get(key), want):
            raise UserError(
                f"{summary_path}: {key} is {summary.get(key)!r} but run.json and metrics.csv say {want!r}; {fix}"
            )
    for m in names:
        stated = summary["metrics"].get(m)
        expected = summary_entry([values[m] for values in scored], protocol, m, clusters)
        if not isinstance(stated, dict):
            raise UserError(f"{summary_path}: metrics.{m} is {stated!r}, not the entry metrics.csv gives; {fix}")
        for key in sorted(set(stated) | set(expected), key=lambda k: (k not in ("mean", "value"), k)):
            if not _same(stated.get(key, KeyError), expected.get(key, KeyError)):
                what = f"{m} {expected.get('statistic', 'mean')}" if key in ("mean", "value") else f"{m} {key}"
                raise UserError(
                    f"{summary_path}: {what} is {stated.get(key)!r} but metrics.csv gives {expected.get(key)!r}; {fix}"
                )


def _same(stated, expected) -> bool:
    """A summary.json value equals the recomputed one: a float within relative 1e-9 (a number, not a bool or
    a string), anything else equal and of the same type."""
    import math

    if isinstance(expected, float) and not isinstance(expected, bool):
        return (
            isinstance(stated, (int, float))
            and not isinstance(stated, bool)
            and math.isfinite(stated)
            and math.isclose(stated, expected, rel_tol=1e-9, abs_tol=1e-12)
        )
    return type(stated) is type(expected) and stated == expected


def check_comparable(runs: list[Run]) -> None:
    """Refuse incomplete runs and runs that differ in protocol, track, dataset revision or pairs."""
    check_runs_comparable(runs, unit="pairs", n_key="n_pairs", ids_file="metrics.csv", ids=lambda r: list(r.scores))


def shifted_differences(diff, margin: float, higher_is_better: bool):
    """Per-pair differences (candidate - baseline) shifted by the margin, and the scipy `alternative`
    under which "worse by more than the margin" is the alternative hypothesis: for a higher-is-better
    value, worse beyond the margin is d < -margin, i.e. d + margin < 0 ("less"); for a lower-is-better
    value it is d > margin, i.e. d - margin > 0 ("greater")."""
    import numpy as np

    d = np.asarray(diff, dtype=np.float64)
    return (d + margin, "less") if higher_is_better else (d - margin, "greater")


def compare_two(
    baseline: Run, candidate: Run, protocol, metrics: list[str] | None = None, margins: dict[str, float] | None = None
) -> list[MetricComparison]:
    """One paired test per metric (`metric_row`, with the mean difference's bootstrap interval). Without a margin
    (or margin 0): the protocol's Wilcoxon test of the tied differences. With a margin > 0 for a metric: a one-sided
    Wilcoxon test of the differences shifted by the margin (`shifted_differences`), ties by the protocol's threshold
    on the shifted differences, with its zero_method and method; `statistic`/`pvalue` are that test's."""
    import numpy as np

    names = metrics or protocol.ranked_metrics
    rows = []
    pair_ids = list(baseline.scores)
    clusters = _run_clusters(baseline, candidate, pair_ids, protocol)
    for m in names:
        check_metric(m, protocol)
        a = np.array([baseline.scores[p][m] for p in pair_ids], dtype=np.float64)
        b = np.array([candidate.scores[p][m] for p in pair_ids], dtype=np.float64)
        margin = float((margins or {}).get(m, 0.0))
        rows.append(metric_row(m, (baseline.name, a), (candidate.name, b), protocol, clusters, margin))
    return rows


def check_metric(m: str, protocol) -> None:
    if m not in protocol.metrics:
        raise UserError(
            f"metric {m!r} is not in protocol {protocol.id} (metrics: {', '.join(protocol.metric_names)})"
            f"{suggest(m, protocol.metric_names)}"
        )


def metric_row(
    m: str, baseline: tuple, candidate: tuple, protocol, clusters, margin: float = 0.0, interval: bool = True
) -> MetricComparison:
    """The test of metric `m` between `baseline` and `candidate`, each (run name, its per-pair values in the same
    pair order), `clusters` the pairs' clusters (or None): `compare_two`'s row, Holm not applied yet. `interval`
    False: no bootstrap interval of the mean difference (diff_ci_low/high None; the test and every other field
    unchanged), for a caller that uses the test only (`pairwise_tests`: the board's ranks)."""
    import numpy as np
    from scipy.stats import rankdata

    from pytest_pstbench.core.stats import MeanCI, bootstrap_mean_ci, cluster_bootstrap_mean_ci, tie_differences
    from pytest_pstbench.paired.aggregation import per_pair_higher_is_better

    cfg = protocol.comparison
    (base_name, a), (cand_name, b) = baseline, candidate
    hib = per_pair_higher_is_better(protocol, m)  # per-pair MSE (pooled_mse) is lower-is-better
    threshold = cfg.tie(m)
    d = tie_differences(b - a, threshold)
    if margin > 0:
        shifted, alternative = shifted_differences(b - a, margin, hib)
        tested = tie_differences(shifted, threshold)
    else:
        tested, alternative = d, cfg.alternative
    test = _paired_test(tested, alternative, cfg, clusters)
    if not interval or (cfg.bootstrap.clustered and cfg.bootstrap.too_few_clusters(len(set(clusters)))):
        ci = MeanCI(float((b - a).mean()), None, None)  # no interval over too few clusters (min_clusters)
    elif cfg.bootstrap.clustered:
        ci = cluster_bootstrap_mean_ci(b - a, clusters, **cfg.bootstrap.kwargs())
    else:
        ci = bootstrap_mean_ci(b - a, **cfg.bootstrap.kwargs())
    good = d > 0 if hib else d < 0
    bad = d < 0 if hib else d > 0
    row = MetricComparison(
        metric=m,
        baseline=base_name,
        candidate=cand_name,
        n=len(a),
        higher_is_better=hib,
        mean_baseline=float(a.mean()),
        mean_candidate=float(b.mean()),
        mean_diff=ci.mean,
        diff_ci_low=ci.ci_low,
        diff_ci_high=ci.ci_high,
        wins=int(good.sum()),
        ties=int((d == 0).sum()),
        losses=int(bad.sum()),
        statistic=test.statistic,
        pvalue=test.pvalue,
    )
    if margin > 0:
        row.margin = margin
    if cfg.test == SIGN_FLIP:  # direction: the sign of the mean cluster difference (what the test is about)
        row.clusters = len(set(clusters))
        row.direction = test.statistic if hib else -test.statistic
        return row  # no `differences`: the MDE (paired/power.py) simulates the Wilcoxon test only
    # Direction of a significant result: the sign of the signed-rank sum (what the test is about).
    nz = tested[tested != 0]
    signed_rank_sum = float(np.sum(np.sign(nz) * rankdata(np.abs(nz)))) if nz.size else 0.0
    row.direction = signed_rank_sum if hib else -signed_rank_sum
    row.differences = b - a  # not a field (not in the JSON): what paired/power.py simulates from
    return row


def pairwise_tests(runs: list[Run], protocol, metric: str) -> list[MetricComparison]:
    """Every pair of `runs` (the later run is the candidate, as `compare_runs`) tested on `metric` as `compare_two`
    tests it (`metric_row`), without the bootstrap interval nor the detectable effect a ranking does not use (the
    board's ranks): each run's values are read once."""
    import numpy as np

    check_metric(metric, protocol)
    values = [{p: s[metric] for p, s in r.scores.items()} for r in runs]
    arrays = [np.fromiter(v.values(), dtype=np.float64, count=len(v)) for v in values]
    orders = [tuple(v) for v in values]
    rows = []
    for i, base in enumerate(runs):
        pair_ids = list(orders[i])
        for j in range(i + 1, len(runs)):
            cand = runs[j]
            same = orders[j] == orders[i]  # the same pair order: the arrays as they are
            b = arrays[j] if same else np.array([values[j][p] for p in pair_ids], dtype=np.float64)
            clusters = _run_clusters(base, cand, pair_ids, protocol)
            rows.append(metric_row(metric, (base.name, arrays[i]), (cand.name, b), protocol, clusters, interval=False))
    return rows


def compare_runs(
    runs: list[Run],
    *,
    protocol=None,
    against_first: bool = False,
    metrics: list[str] | None = None,
    margins: dict[str, float] | None = None,
) -> Comparison:
    """All pairs of runs (the later run is the candidate), or each run against the first; Holm over all tests."""
    if len(runs) < 2:
        raise UserError("compare needs at least two run folders")
    protocol = checked_runs(PAIRED_RUNS, runs, protocol=protocol, comparable=True)
    rows: list[MetricComparison] = []
    for base, cand in run_pairs(runs, against_first):
        rows.extend(compare_two(base, cand, protocol, metrics, margins))
    return finish_with_power(rows, protocol)


def finish_comparison(rows: list[MetricComparison], protocol) -> Comparison:
    from pytest_pstbench.core.stats import holm

    alpha = protocol.comparison.alpha
    adjusted = holm([r.pvalue for r in rows])
    for r, p in zip(rows, adjusted):
        r.p_holm = p
        if r.margin is not None:  # one-sided test: significant means worse beyond the margin
            if p < alpha:
                r.verdict = WORSE_BEYOND_MARGIN
            elif (r.diff_ci_low > 0) if r.higher_is_better else (r.diff_ci_high < 0):
                r.verdict = BETTER  # descriptive: the mean difference's CI lies on the better side of 0
            else:
                r.verdict = WITHIN_MARGIN
        elif p < alpha and r.direction != 0:
            r.verdict = BETTER if r.direction > 0 else WORSE
        else:
            r.verdict = NO_DIFF
    return Comparison(rows, alpha, protocol.id)


def finish_with_power(rows: list[MetricComparison], protocol) -> Comparison:
    """`finish_comparison`, then each row's minimum detectable effect (paired/power.py): what compare and the
    gate report (`pstbench table` finishes without it)."""
    from pytest_pstbench.paired.power import detectable

    comp = finish_comparison(rows, protocol)
    detectable(comp, protocol)
    return comp


def load_runs(paths: list[str | Path]) -> list[Run]:
    return [load_run(Path(p)) for p in paths]


# ---- the paired run kind (pytest_pstbench.core.kinds.RunKind) -------------------------------------------------
def _worse_reason(r: MetricComparison, comp: Comparison, protocol) -> str:
    """The gate's reason for a worse row; the metric named as the tables name it, its id beside the label."""
    params = protocol.metrics[r.metric]
    metric = f"{params['label']}{'↑' if params['higher_is_better'] else '↓'} ({r.metric})"
    if r.margin is None:
        return (
            f"{metric} is significantly worse than baseline run {r.baseline}: "
            f"mean diff {r.mean_diff:+.6g}, Holm-adjusted p = {r.p_holm:.4g} < alpha {comp.alpha}"
        )
    return (
        f"{metric} is significantly worse than baseline run {r.baseline} by more than the margin "
        f"{r.margin:g}: mean diff {r.mean_diff:+.6g} [{r.diff_ci_low:+.6g}, {r.diff_ci_high:+.6g}], "
        f"one-sided Holm-adjusted p = {r.p_holm:.4g} < alpha {comp.alpha}"
    )


def _smallest_pvalue(r: MetricComparison, protocol) -> float:
    """The smallest p-value this row's test can give with its n pairs: every pair worse, no ties."""
    import numpy as np

    from pytest_pstbench.core.stats import wilcoxon_test

    cfg = protocol.comparison
    magnitudes = np.arange(1, (r.clusters if cfg.test == SIGN_FLIP else r.n) + 1, dtype=np.float64)
    worse = -magnitudes if r.higher_is_better else magnitudes
    alternative = ("less" if r.higher_is_better else "greater") if r.margin is not None else cfg.alternative
    if cfg.test == SIGN_FLIP:  # every cluster worse
        from pytest_pstbench.core.stats import sign_flip_test

        return sign_flip_test(worse, alternative=alternative, **cfg.sign_flip.kwargs()).pvalue
    return wilcoxon_test(worse, zero_method=cfg.zero_method, alternative=alternative, method=cfg.method).pvalue


def _compare_paths(paths, *, protocol_spec=None, against_first=False, metrics=None, margins=None):
    """`pstbench compare` and `api.compare` on paired run folders -> (comparison, protocol, runs)."""
    runs = load_runs(paths)
    protocol = protocol_for(runs, protocol_spec) if protocol_spec else None
    comp = compare_runs(runs, protocol=protocol, against_first=against_first, metrics=metrics, margins=margins)
    return comp, protocol or protocol_for(runs), runs


def _compare_text(comp: Comparison, runs: list[Run], protocol) -> str:
    """What `pstbench compare` prints for paired runs: the runs' track, protocol and n, then the table."""
    from pytest_pstbench.paired.tables import comparison_table

    s = runs[0].summary
    return (
        f"track: {s['track']}   protocol: {s['protocol']}   dataset revision: {s['dataset_revision']}   n={s['n']}   "
        f"alpha={comp.alpha}\n{comparison_table(comp, protocol)}"
    )


def _worst(comp: Comparison, runs: list[Run], protocol, n: int, against_first: bool) -> tuple[str, list]:
    """`pstbench compare --worst N` on paired runs: the pairs each candidate lost most on, per tested metric."""
    from pytest_pstbench.paired.worst import track_files, worst_json, worst_pairs, worst_text

    files = track_files(runs[0].summary)
    metrics = list(dict.fromkeys(r.metric for r in comp.rows))
    worst = worst_pairs(run_pairs(runs, against_first), metrics, protocol, n, files)
    return worst_text(worst, protocol, n, files is not None, runs[0].summary.get("track")), worst_json(worst)


def _gate_worst(row, base: Run, cand: Run, protocol, n: int, files: dict | None = None):
    """A failed gate's worst pairs for one failing metric (`paired.worst.gate_worst`)."""
    from pytest_pstbench.paired.worst import gate_worst

    return gate_worst(row, base, cand, protocol, n, files)


def _accept_margins(what: str, fix: str) -> None:
    """Paired runs take margins (a shifted Wilcoxon): nothing to refuse."""


def _history_values(run: Run, protocol, metrics=None) -> dict:
    """`pstbench history`'s point: each metric's value (mean, or the protocol's statistic) and its interval, from
    the run's summary.json (checked against metrics.csv by `validate_run`); default: the ranked metrics."""
    from pytest_pstbench.paired.aggregation import entry_value

    names = metrics or protocol.ranked_metrics
    for m in names:
        if m not in protocol.metrics:
            raise UserError(
                f"--metric {m}: not a metric of protocol {protocol.id} (metrics: {', '.join(protocol.metric_names)})"
                f"{suggest(m, protocol.metric_names)}"
            )
    entries = run.summary["metrics"]
    return {
        m: {
            "mean": entry_value(entries[m]),
            "low": entries[m].get("ci_low"),
            "high": entries[m].get("ci_high"),
            "higher_is_better": bool(protocol.metrics[m]["higher_is_better"]),
        }
        for m in names
    }


def _history_step(row: MetricComparison) -> tuple[str, float]:
    return row.metric, row.mean_diff


def _make_kind():
    from pytest_pstbench.core.kinds import RunKind
    from pytest_pstbench.paired.runs import RUN_FILES

    return RunKind(
        name="paired",
        run_files=RUN_FILES,
        load=load_run,
        check_comparable=check_comparable,
        validate=validate_run,
        item_file="metrics.csv",
        smallest_pvalue=_smallest_pvalue,
        unit="pairs",
        compare_two=compare_two,
        finish=finish_with_power,
        worse_reason=_worse_reason,
        compare_paths=_compare_paths,
        compare_text=_compare_text,
        check_margins=_accept_margins,
        worst=_worst,
        gate_worst=_gate_worst,
        history_values=_history_values,
        history_step=_history_step,
        history_finish=finish_comparison,
        pairwise_tests=pairwise_tests,
    )


PAIRED_RUNS = _make_kind()

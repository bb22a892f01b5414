"""Terminal tables (tabulate) of the paired kind: the score table of runs (`run_table`, its header line) and
the comparison table of `pstbench compare` and the gate (`comparison_table`)."""

from __future__ import annotations

from pytest_pstbench.core.text import cell


def _fmt(entry: dict, decimals: int) -> str:
    from pytest_pstbench.paired.aggregation import entry_value

    value = entry_value(entry)
    if value is None:
        return "-"
    if entry.get("pm") is None and entry.get("no_interval"):  # too few clusters (summary.json says why)
        k = entry.get("clusters")
        return f"{value:.{decimals}f} (no CI: {k} cluster{'s' if k != 1 else ''})"
    return f"{value:.{decimals}f} ± {entry['pm']:.{decimals}f}"


def header_line(summary: dict, dataset_id: str, n_items: int | None = None) -> str:
    """The line above a score table: track, protocol, dataset revision and n, the track's pair count
    (`n_items`; else the summary's n). A row with fewer pairs says so itself (`run_table`)."""
    n = summary["n"] if n_items is None else n_items
    return (
        f"track: {summary['track']}   protocol: {summary['protocol']}   "
        f"dataset: {dataset_id}@{summary['dataset_revision']}   n={n}"
    )


def row_name(name: str, summary: dict, n_items: int | None) -> str:
    """A row's method name, marked `(incomplete: K of N pairs)` when its run scored fewer pairs than the
    track has (or says complete: false): its numbers are over those K pairs, not the header's n."""
    n = summary.get("n")
    if n_items is None or (n == n_items and summary.get("complete", True) is not False):
        return name
    return f"{name} (incomplete: {n} of {n_items} pairs)"


def run_table(protocol, rows: list[tuple[str, dict]], tablefmt: str = "simple", n_items: int | None = None) -> str:
    """rows: (method name, summary dict). Columns follow the protocol's metric order; `tablefmt` is
    tabulate's ("github" for Markdown). With `n_items` (the track's pair count, the header's n) a row of a
    run that scored fewer pairs is marked (`row_name`). The one renderer of score tables (`pstbench score`,
    `pstbench demo`, the pytest terminal summary and its Markdown)."""
    from tabulate import tabulate

    from pytest_pstbench.paired.aggregation import heading_suffix

    headers = ["method"]
    for m, p in protocol.metrics.items():
        headers.append(f"{p['label']}{'↑' if p['higher_is_better'] else '↓'}{heading_suffix(protocol, m)}")
    body = []
    for name, summary in rows:
        line = [cell(row_name(name, summary, n_items), tablefmt)]
        for m, p in protocol.metrics.items():
            line.append(_fmt(summary["metrics"].get(m, {}), int(p.get("decimals", 4))))
        body.append(line)
    return tabulate(body, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def comparison_table(comp, protocol, tablefmt: str = "simple") -> str:
    from tabulate import tabulate

    from pytest_pstbench.paired.power import mde_text

    body = []
    with_margin = any(r.margin is not None for r in comp.rows)
    powered = [r.detectable for r in comp.rows if r.detectable]
    for r in comp.rows:
        params = protocol.metrics[r.metric]
        dec = int(params.get("decimals", 4)) + 1
        body.append(
            [
                f"{params['label']}{'↑' if r.higher_is_better else '↓'}",
                cell(r.baseline, tablefmt),
                cell(r.candidate, tablefmt),
                *([f"{r.margin:g}" if r.margin is not None else "-"] if with_margin else []),
                f"{r.mean_diff:+.{dec}f} [{r.diff_ci_low:+.{dec}f}, {r.diff_ci_high:+.{dec}f}]"
                if r.diff_ci_low is not None
                else f"{r.mean_diff:+.{dec}f} (no CI: {r.clusters or 'too few'} clusters)",
                f"{r.wins}/{r.ties}/{r.losses}",
                f"{r.statistic:g}",
                f"{r.pvalue:.4g}",
                f"{r.p_holm:.4g}",
                *([mde_text(r, 3)] if powered else []),
                r.verdict,  # last: CI scripts read the verdict from the last column
            ]
        )
    clustered = protocol.comparison.test == "cluster_sign_flip"  # statistic: the mean of the cluster mean differences
    boot = protocol.comparison.bootstrap
    ci = f"{boot.confidence * 100:g}% cluster CI" if boot.clustered else "95% CI"
    headers = [
        "metric",
        "baseline",
        "candidate",
        *(["margin"] if with_margin else []),
        f"mean diff [{ci}]",
        "W/T/L",
        "T (cluster mean)" if clustered else "W",
        "p",
        "p (Holm)",
        *([f"MDE ({powered[0]['power'] * 100:g}% power)"] if powered else []),
        "verdict",
    ]
    return tabulate(body, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def metric_table(data: dict) -> tuple[list[list], list[str]]:
    """`pstbench ls metrics` of a paired protocol (its parsed data): a row per metric (label, kind, the image it
    is measured against, its direction, whether it is ranked) and the headings."""
    rows = []
    for name, entry in data["metrics"].items():
        entry = entry if isinstance(entry, dict) else {}
        rows.append(
            [
                name,
                entry.get("label", ""),
                entry.get("kind", ""),
                entry.get("against", ""),
                "higher" if entry.get("higher_is_better") else "lower",
                "yes" if entry.get("ranked") else "no (reported)",
            ]
        )
    return rows, ["metric", "label", "kind", "against", "better", "ranked"]

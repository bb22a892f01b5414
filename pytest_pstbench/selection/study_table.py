"""Terminal tables of `pstbench vab study` (the ranking-vs-scoring protocol study, study.py)."""

from __future__ import annotations


def _ci(entry: dict, decimals: int = 3) -> str:
    if entry["mean"] is None:
        return "-"
    return f"{entry['mean']:.{decimals}f} [{entry['ci_low']:.{decimals}f}, {entry['ci_high']:.{decimals}f}]"


def _p(p: float) -> str:
    return f"{p:.4g}"


def table(body, headers) -> str:
    from tabulate import tabulate

    return tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True)


def study_tables(result: dict) -> str:
    """The study as printed: a header line, then fidelity, reproducibility, distinguishability, Kendall's W
    and the per-annotator fidelity; each mean with its bootstrap interval."""
    return "\n".join(
        _header_lines(result)
        + _reproducibility_lines(result)
        + _distinguishability_lines(result)
        + _agreement_lines(result)
    )


def _header_lines(result: dict) -> list[str]:
    """The header (the study, the tasks kept, the bootstrap) and the fidelity table."""
    boot = result["bootstrap"]
    tasks = result["tasks"]
    conf = f"{boot['confidence'] * 100:g}%"
    lines = [
        f"study: {result['annotations']['path']}   tasks: {tasks['kept']} of {tasks['read']}   "
        f"annotators: {len(result['annotators'])}   majority: {result['majority']['rule']}   "
        f"protocol: {result['protocol']['id']}",
        f"each mean with its {conf} percentile bootstrap interval over tasks ({boot['resamples']} resamples, "
        f"seed {boot['seed']}); differences are ranking - scoring",
    ]
    if tasks["dropped"]:
        lines.append(
            f"dropped (Kendall's W of the score rankings >= {result['max_w']:g}): {', '.join(tasks['dropped'])}"
        )
    fid = result["fidelity"]
    lines += [
        "",
        "fidelity: the score-derived ranking against the direct ranking, per annotator and task",
        table(
            [
                ["Kendall's tau-b", _ci(fid["kendall_tau_b"])],
                ["top-1 self-consistency", _ci(fid["top1_self_consistency"])],
            ],
            ["statistic", "mean"],
        ),
    ]
    if fid["tau_undefined"]:
        lines.append(
            f"({fid['tau_undefined']} annotator-task pairs with all scores equal have no tau-b and are left out)"
        )
    return lines


def _reproducibility_lines(result: dict) -> list[str]:
    body = []
    for lab, e in result["reproducibility"].items():
        mc = e["mcnemar"]
        body.append(
            [
                lab,
                _ci(e["ranking"]),
                _ci(e["scoring"]),
                _ci(e["difference"]),
                f"{mc['b']}/{mc['c']}",
                _p(mc["p"]),
                _p(mc["p_bonferroni"]),
            ]
        )
    return [
        "",
        f"reproducibility: share of tasks whose label gets the votes of at least {result['majority']['rule']}",
        table(body, ["label", "ranking", "scoring", "difference", "McNemar b/c", "p", "p Bonferroni"]),
    ]


def _distinguishability_lines(result: dict) -> list[str]:
    dist = result["distinguishability"]
    wil = dist["entropy"]["wilcoxon"]
    return [
        "",
        "distinguishability: the best-vote distribution per task",
        table(
            [
                [
                    "entropy (nats)",
                    _ci(dist["entropy"]["ranking"]),
                    _ci(dist["entropy"]["scoring"]),
                    _ci(dist["entropy"]["difference"]),
                    f"{_p(wil['p'])} (n={wil['n_nonzero']})",
                ],
                [
                    "unanimous",
                    _ci(dist["unanimous"]["ranking"]),
                    _ci(dist["unanimous"]["scoring"]),
                    _ci(dist["unanimous"]["difference"]),
                    "",
                ],
            ],
            ["statistic", "ranking", "scoring", "difference", "Wilcoxon p"],
        ),
    ]


def _agreement_lines(result: dict) -> list[str]:
    """Kendall's W of the rankings per task, and the fidelity per annotator."""
    fid = result["fidelity"]
    w = result["kendall_w"]
    lines = [
        "",
        "Kendall's W per task (agreement of the annotators' rankings; tie-corrected)",
        table([["score rankings", _ci(w["scoring"])], ["direct rankings", _ci(w["ranking"])]], ["rankings", "mean"]),
    ]
    body = [
        [a, str(e["tasks"]), _ci(e["kendall_tau_b"]), _ci(e["top1_self_consistency"])]
        for a, e in fid["per_annotator"].items()
    ]
    lines += [
        "",
        "fidelity per annotator",
        table(body, ["annotator", "tasks", "Kendall's tau-b", "top-1 self-consistency"]),
    ]
    return lines

"""The ranking-vs-scoring protocol study of the VAB paper (section 2, appendix F): `pstbench vab study`.

Input: an annotations CSV (`annotations.read_annotations`: every annotator of a task scores each of its n
images on 0-10 and ranks them 1..n). Two protocols are read from it:
**ranking** (an annotator's best is its rank 1, worst its rank n) and **scoring** (best: the highest
score, worst: the lowest).

Definitions (docs/selection.md "Protocol study" says the same with a worked example):

- Ties in scores are **split**: an annotator whose top score is shared by t images gives each of them
  1/t of a best vote (likewise at the bottom for worst), and its top-1 self-consistency is 1/t when its
  rank-1 image is among them, else 0 (the expected value under a random tie-break). Votes are exact
  fractions.
- Fidelity: per annotator and task, Kendall's tau-b between the scores and the direct ranking (the
  score-derived ranking against the ranking; tau-b corrects for tied scores; undefined when all the
  annotator's scores of the task are equal: left out of the means and counted). A task's value is the
  mean over its annotators; the reported mean is over tasks. Per annotator: the mean over its tasks.
- Reproducibility: a task's best label is reached under a protocol when one image has at least m best
  votes and no other image has as many (worst alike); "both" needs both reached, on two different images.
  m: `majority`, else a strict majority of the task's annotators, floor(n/2) + 1 (5 of 8 as in the
  paper). Each of best, worst, both is tested ranking vs scoring with an exact two-sided McNemar test
  over tasks (b: reached under ranking only, c: under scoring only), Bonferroni-corrected over these
  three tests (p x 3, capped at 1).
- Distinguishability: per task the Shannon entropy, in nats (natural log), of the best-vote shares
  (votes / annotators) under each protocol; a task is unanimous when one image has every annotator's
  whole best vote (entropy 0). The per-task entropy difference ranking - scoring is tested with
  scipy.stats.wilcoxon (two-sided, zero differences dropped: zero_method "wilcox", method "auto"), not
  corrected.
- Kendall's W per task: of the annotators' score rankings (tied scores get their average rank; W with
  the tie correction, 12 S / (m^2 (n^3 - n) - m sum T), T = sum (t^3 - t) over an annotator's tie groups)
  and, for comparison, of the direct rankings. Undefined (null) when every annotator scores all images
  of the task alike. `max_w` drops tasks whose score W is at or above it (an undefined W is kept).
- Every mean has the percentile bootstrap interval over its tasks of `core.stats.bootstrap_mean_ci`, with
  the protocol's `aggregation.bootstrap` (confidence, resamples, seed; one stream per mean).
  Differences are ranking - scoring, per task, and bootstrapped the same way.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.annotations import StudyTask, read_annotations

PROTOCOLS = ("ranking", "scoring")
LABELS = ("best", "worst", "both")
CLI_NAMES = {"majority": "--majority {}", "max_w": "--max-w {}"}  # how messages name the options


# ---- per-task statistics -------------------------------------------------------------------------


def kendall_tau_b(x: list[float], y: list[float]) -> float | None:
    """Kendall's tau-b of two paired sequences; None when either is constant (tau-b's denominator is 0)."""
    conc = disc = tied_x = tied_y = pairs = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            pairs += 1
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            tied_x += dx == 0
            tied_y += dy == 0
            conc += dx * dy > 0
            disc += dx * dy < 0
    denominator = (pairs - tied_x) * (pairs - tied_y)
    return None if denominator == 0 else (conc - disc) / math.sqrt(denominator)


def average_ranks(values: list[float], *, descending: bool) -> list[Fraction]:
    """Ranks 1..n of `values` (1 = the highest when descending); tied values share their average rank."""
    order = sorted(range(len(values)), key=lambda i: -values[i] if descending else values[i])
    ranks: list[Fraction] = [Fraction(0)] * len(values)
    pos = 0
    while pos < len(order):
        end = pos
        while end + 1 < len(order) and values[order[end + 1]] == values[order[pos]]:
            end += 1
        for i in order[pos : end + 1]:
            ranks[i] = Fraction(pos + end + 2, 2)
        pos = end + 1
    return ranks


def kendall_w(rankings: list[list[Fraction]]) -> float | None:
    """Kendall's W of m rankings of n items (average ranks for ties) with the tie correction; None when
    the denominator is 0 (every ranking all tied)."""
    m, n = len(rankings), len(rankings[0])
    totals = [sum(r[i] for r in rankings) for i in range(n)]
    mean = Fraction(m * (n + 1), 2)
    s = sum((t - mean) ** 2 for t in totals)
    ties = sum(c**3 - c for r in rankings for c in Counter(r).values())
    denominator = m * m * (n**3 - n) - m * ties
    return None if denominator == 0 else float(12 * s / denominator)


def _extreme_shares(scores: dict[str, float], highest: bool) -> dict[str, Fraction]:
    top = max(scores.values()) if highest else min(scores.values())
    tied = [i for i, s in scores.items() if s == top]
    return {i: Fraction(1, len(tied)) for i in tied}


def _reached(votes: dict[str, Fraction], m: int) -> str | None:
    """The image with at least m votes and strictly more than any other, or None."""
    ranked = sorted(votes.items(), key=lambda kv: -kv[1])
    if not ranked or ranked[0][1] < m or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def entropy_nats(shares: list[Fraction]) -> float:
    """Shannon entropy (natural log) of a distribution; 0 log 0 = 0; summed in a fixed (sorted) order."""
    return float(-sum(float(p) * math.log(float(p)) for p in sorted(shares) if p > 0)) + 0.0


def task_statistics(t: StudyTask, m: int) -> dict:
    """Every per-task value of the study (one row of study.csv)."""
    n_ann = len(t.annotators)
    votes = {p: {lab: {i: Fraction(0) for i in t.images} for lab in ("best", "worst")} for p in PROTOCOLS}
    taus, consistency = {}, {}
    for who in t.annotators:
        sc, rk = t.scores[who], t.ranks[who]
        taus[who] = kendall_tau_b([sc[i] for i in t.images], [-rk[i] for i in t.images])
        best_rank = next(i for i in t.images if rk[i] == 1)
        worst_rank = next(i for i in t.images if rk[i] == len(t.images))
        votes["ranking"]["best"][best_rank] += 1
        votes["ranking"]["worst"][worst_rank] += 1
        best_shares = _extreme_shares(sc, True)
        for i, share in best_shares.items():
            votes["scoring"]["best"][i] += share
        for i, share in _extreme_shares(sc, False).items():
            votes["scoring"]["worst"][i] += share
        consistency[who] = float(best_shares.get(best_rank, Fraction(0)))
    defined = [v for v in taus.values() if v is not None]
    row = {
        "task_id": t.task_id,
        "n_images": len(t.images),
        "n_annotators": n_ann,
        "majority": m,
        "kendall_tau_b": sum(defined) / len(defined) if defined else None,
        "tau_undefined": len(taus) - len(defined),
        "top1_self_consistency": sum(consistency.values()) / n_ann,
        "w_scoring": kendall_w(
            [average_ranks([t.scores[a][i] for i in t.images], descending=True) for a in t.annotators]
        ),
        "w_ranking": kendall_w([[Fraction(t.ranks[a][i]) for i in t.images] for a in t.annotators]),
    }
    for p in PROTOCOLS:
        best = _reached(votes[p]["best"], m)
        worst = _reached(votes[p]["worst"], m)
        row[f"best_{p}"] = best
        row[f"worst_{p}"] = worst
        row[f"both_{p}"] = best is not None and worst is not None and best != worst
        shares = [v / n_ann for v in votes[p]["best"].values()]
        row[f"entropy_{p}"] = entropy_nats(shares)
        row[f"unanimous_{p}"] = any(v == n_ann for v in votes[p]["best"].values())
    row["_taus"], row["_consistency"] = taus, consistency
    return row


# ---- the study -----------------------------------------------------------------------------------


def _check_options(majority, max_w, names: dict) -> None:
    if majority is not None and (isinstance(majority, bool) or not isinstance(majority, int) or majority < 1):
        raise UserError(
            f"{names['majority'].format(majority)}: must be a whole number of annotators, at least 1 "
            "(or leave it out: a strict majority of each task's annotators)"
        )
    if max_w is not None:
        if isinstance(max_w, bool) or not isinstance(max_w, (int, float)) or not 0 < max_w <= 1:
            raise UserError(
                f"{names['max_w'].format(max_w)}: must be a number in (0, 1] (Kendall's W lies in [0, 1]; "
                "the paper drops tasks with W >= 0.825)"
            )


def _mean(values, boot: dict) -> dict:
    """{"mean", "ci_low", "ci_high", "n"} over `values` (None entries left out); nulls when empty."""
    from pytest_pstbench.core.stats import bootstrap_mean_ci

    xs = [float(v) for v in values if v is not None]
    if not xs:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    ci = bootstrap_mean_ci(
        xs, confidence=float(boot["confidence"]), resamples=int(boot["resamples"]), seed=int(boot["seed"])
    )
    return {"mean": ci.mean, "ci_low": ci.ci_low, "ci_high": ci.ci_high, "n": len(xs)}


def _wilcoxon(diffs: list[float]) -> dict:
    import warnings

    from pytest_pstbench.core.stats import wilcoxon_test

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's small-sample notes; the result says how many entered
        res = wilcoxon_test(diffs, zero_method="wilcox", alternative="two-sided", method="auto")
    return {"statistic": res.statistic, "p": res.pvalue, "n_nonzero": res.n_nonzero}


STUDY_DEFINITIONS = {
    "ties_in_scores": "split: t images tied at an annotator's top (bottom) score get 1/t of its best (worst) vote each",
    "kendall_tau": "tau-b (tie-corrected) between scores and direct ranks; undefined when all scores of the annotator's task are equal",
    "reached": "one image has >= majority votes and no other as many; both: best and worst reached on two different images",
    "entropy": "Shannon entropy of the best-vote shares, natural log (nats)",
    "kendall_w": "with the tie correction (average ranks for tied scores)",
    "mcnemar": "exact two-sided binomial on discordant tasks; Bonferroni over best, worst, both",
    "wilcoxon": "scipy.stats.wilcoxon of per-task entropy ranking - scoring, two-sided, zero_method wilcox, method auto; not corrected",
    "differences": "ranking - scoring, per task",
}


def run_study(
    path: Path | str,
    *,
    protocol=None,
    majority: int | None = None,
    max_w: float | None = None,
    names: dict | None = None,
) -> dict:
    """The study of the annotations CSV `path` under the selection protocol `protocol` (a loaded protocol
    or an id/path; default vab: its bootstrap and candidate-set sizes) -> the dict written as study.json.
    `names` maps the options to how messages name them (format strings; default the CLI's, `--majority {}`)."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import DEFAULT_SELECTION_PROTOCOL, SelectionParams

    names = {**CLI_NAMES, **(names or {})}
    _check_options(majority, max_w, names)
    if not hasattr(protocol, "data"):
        protocol = load_protocol(DEFAULT_SELECTION_PROTOCOL if protocol is None else str(protocol))
    params = SelectionParams.of(protocol)
    boot = params.bootstrap
    path = Path(path)
    tasks = read_annotations(path, k_range=(params.k_min, params.k_max), protocol_id=protocol.id)
    rows, kept = _task_rows(tasks, majority, max_w, names)
    annotators = list(dict.fromkeys(a for t in tasks for a in t.annotators))
    reproducibility = _reproducibility(kept, boot)
    ent = {p: [r[f"entropy_{p}"] for r in kept] for p in PROTOCOLS}
    uni = {p: [float(r[f"unanimous_{p}"]) for r in kept] for p in PROTOCOLS}
    per_annotator = _per_annotator(kept, annotators, boot)
    digest = tasks.sha256  # of the bytes read (a pipe, `<(...)`, is read once: csvfile.Read)
    return {
        "study": "ranking vs scoring (VAB paper section 2, appendix F)",
        "annotations": {"path": str(path), "sha256": digest},
        "protocol": {"id": protocol.id, "sha256": protocol.sha256},
        "bootstrap": {
            "method": "percentile",
            "confidence": float(boot["confidence"]),
            "resamples": int(boot["resamples"]),
            "seed": int(boot["seed"]),
            "over": "tasks",
        },
        "definitions": dict(STUDY_DEFINITIONS),
        "majority": {"given": majority, "rule": _majority_rule(majority, kept)},
        "max_w": max_w,
        "tasks": {"read": len(rows), "kept": len(kept), "dropped": [r["task_id"] for r in rows if not r["kept"]]},
        "annotators": annotators,
        "fidelity": {
            "kendall_tau_b": _mean([r["kendall_tau_b"] for r in kept], boot),
            "tau_undefined": sum(r["tau_undefined"] for r in kept),
            "top1_self_consistency": _mean([r["top1_self_consistency"] for r in kept], boot),
            "per_annotator": per_annotator,
        },
        "reproducibility": reproducibility,
        "distinguishability": {
            "entropy": {
                "ranking": _mean(ent["ranking"], boot),
                "scoring": _mean(ent["scoring"], boot),
                "difference": _mean(_diff(ent["ranking"], ent["scoring"]), boot),
                "wilcoxon": _wilcoxon(_diff(ent["ranking"], ent["scoring"])),
            },
            "unanimous": {
                "ranking": _mean(uni["ranking"], boot),
                "scoring": _mean(uni["scoring"], boot),
                "difference": _mean(_diff(uni["ranking"], uni["scoring"]), boot),
            },
        },
        "kendall_w": {
            "scoring": _mean([r["w_scoring"] for r in kept], boot),
            "ranking": _mean([r["w_ranking"] for r in kept], boot),
        },
        "per_task": [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows],
    }


def _task_rows(tasks, majority: int | None, max_w: float | None, names: dict) -> tuple[list[dict], list[dict]]:
    """(every task's statistics, each marked `kept` or not by `max_w`; the kept ones); a `majority` above a
    task's annotators, or a `max_w` that drops every task, is a UserError."""
    fewest = min(tasks, key=lambda t: len(t.annotators))
    if majority is not None and majority > len(fewest.annotators):
        raise UserError(
            f"{names['majority'].format(majority)}: task {fewest.task_id} has only {len(fewest.annotators)} annotators; "
            f"fix: give at most {len(fewest.annotators)} (or leave it out: a strict majority of each task's annotators)"
        )
    rows = [task_statistics(t, majority if majority is not None else len(t.annotators) // 2 + 1) for t in tasks]
    for r in rows:
        r["kept"] = max_w is None or r["w_scoring"] is None or r["w_scoring"] < max_w
    kept = [r for r in rows if r["kept"]]
    if not kept:
        lowest = min(r["w_scoring"] for r in rows)
        raise UserError(
            f"{names['max_w'].format(max_w)}: drops every task (the lowest Kendall's W of the score rankings is "
            f"{lowest:.4f}); fix: give a larger W"
        )
    return rows, kept


def _majority_rule(majority: int | None, kept: list[dict]) -> str:
    """The majority rule in words, for the kept tasks' annotator counts."""
    counts = sorted({r["n_annotators"] for r in kept})
    if majority is not None:
        return f"{majority} of {counts[0]}" if len(counts) == 1 else f"{majority} of each task's annotators"
    return (
        f"{counts[0] // 2 + 1} of {counts[0]}" if len(counts) == 1 else "floor(n/2) + 1 of each task's n annotators"
    ) + " (strict majority)"


def _diff(p_values, q_values) -> list[float]:
    return [float(a) - float(b) for a, b in zip(p_values, q_values)]


def _reproducibility(kept: list[dict], boot: dict) -> dict:
    """Per label (best, worst, both): the share of kept tasks reached under each protocol, their difference and
    the exact McNemar test, Bonferroni-corrected over the labels."""
    from pytest_pstbench.selection.compare import mcnemar_exact

    reproducibility, pvalues = {}, []
    for lab in LABELS:
        hit = {p: [float(r[f"{lab}_{p}"] not in (None, False)) for r in kept] for p in PROTOCOLS}
        b = sum(1 for x, y in zip(hit["ranking"], hit["scoring"]) if x and not y)
        c = sum(1 for x, y in zip(hit["ranking"], hit["scoring"]) if y and not x)
        p = mcnemar_exact(b, c)
        pvalues.append(p)
        reproducibility[lab] = {
            "ranking": _mean(hit["ranking"], boot),
            "scoring": _mean(hit["scoring"], boot),
            "difference": _mean(_diff(hit["ranking"], hit["scoring"]), boot),
            "mcnemar": {"b": b, "c": c, "p": p},
        }
    for lab, p in zip(LABELS, pvalues):
        reproducibility[lab]["mcnemar"]["p_bonferroni"] = min(1.0, p * len(pvalues))
    return reproducibility


def _per_annotator(kept: list[dict], annotators: list[str], boot: dict) -> dict:
    """Per annotator: its kept tasks, mean tau-b (and how many undefined) and top-1 self-consistency."""
    per_annotator, by_annotator = {}, {a: [] for a in annotators}
    for r in kept:  # one pass: each annotator's kept tasks (not annotators x tasks)
        for a in r["_taus"]:
            by_annotator[a].append(r)
    for a in annotators:
        mine = by_annotator[a]
        per_annotator[a] = {
            "tasks": len(mine),
            "kendall_tau_b": _mean([r["_taus"][a] for r in mine], boot),
            "tau_undefined": sum(1 for r in mine if r["_taus"][a] is None),
            "top1_self_consistency": _mean([r["_consistency"][a] for r in mine], boot),
        }
    return per_annotator


CSV_COLUMNS = (
    "task_id",
    "kept",
    "n_images",
    "n_annotators",
    "majority",
    "w_scoring",
    "w_ranking",
    "kendall_tau_b",
    "tau_undefined",
    "top1_self_consistency",
    "best_ranking",
    "best_scoring",
    "worst_ranking",
    "worst_scoring",
    "both_ranking",
    "both_scoring",
    "entropy_ranking",
    "entropy_scoring",
    "unanimous_ranking",
    "unanimous_scoring",
)


def study_csv(result: dict) -> str:
    """study.csv: one row per task read (dropped ones with kept = 0); a reached label is the image's name."""
    import csv
    import io

    def cell(v):
        if v is None:
            return ""
        if isinstance(v, bool):
            return int(v)
        return repr(v) if isinstance(v, float) else v

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in result["per_task"]:
        w.writerow([cell(r[c]) for c in CSV_COLUMNS])
    return buf.getvalue()


STUDY_FILES = ("study.csv", "study.json")  # what `write_study` writes into its folder


def write_study(result: dict, out_dir: Path | str) -> None:
    """study.csv and study.json (the seal, written last) into `out_dir`, all or none."""
    import json

    from pytest_pstbench.core.files.write import write_files

    text = json.dumps(result, indent=2, allow_nan=False) + "\n"
    write_files(
        Path(out_dir),
        {"study.csv": study_csv(result), "study.json": text},
        what="the study's files",
        fix="free some space or give --out another folder",
    )

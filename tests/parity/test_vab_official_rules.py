"""The vab protocol against an independent implementation of the official VAB toolkit's rules.

The reference below (`Ref*`, `ref_*`) is written in this file from a reading of the official
toolkit (BakeLab/Visual-Aesthetic-Benchmark, eval.py and summarize.py at commit d0f73e5); it calls
nothing of the kit. It mirrors the official pipeline: one result record per (task, prompt type,
trial) built as eval.py builds it (first regex match, tag in upper case, letter upper-cased and a
shown label; best+worst needs both; API errors as error records; missing answers as no record),
k = 2 best+worst records derived from parsed pick_best records, then summarize.py's buckets
(pass^3 per (task, prompt type) group; avg pass@1 as the mean of per-trial accuracies) and its
random baseline. Generated tasks and answers cover format drift, unparseable answers, API errors,
missing answers, retries and k = 2 tasks. Every cell (overall, domain, k) of every metric and
aggregation, the random baselines, TB-1's best-only / worst-only accuracy and the trial-0 accuracy
must be equal (==, same float arithmetic) to the kit's.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path

import pytest

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection import answers as ans
from pytest_pstbench.selection.accuracy import aggregate, trial_outcomes
from pytest_pstbench.selection.permutations import orders_for
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import load_selection_manifest

DOMAINS = ["fine-art", "illustration", "photograph"]
TRIALS = 3
PTYPES = ("pick_best", "pick_worst", "pick_best_and_worst")


# ---- the reference: official rules, written here ------------------------------------------------


def ref_permutations(n: int, task_id: str) -> list[list[int]]:
    perms = [list(range(n))]
    rng = random.Random(task_id)
    while len(perms) < TRIALS:
        p = list(range(n))
        rng.shuffle(p)
        if n == 2 or p not in perms:
            perms.append(p)
    return perms


def ref_tag(tag: str, text: str):
    """Official: the first `TAG:` (upper case, colon right after) then optional spaces and one letter."""
    m = re.search(r"\b" + tag + r":\s*([A-Za-z])\b", text)
    return m.group(1).upper() if m else None


def ref_tag_lenient(tag: str, text: str):
    """The lenient variant: the last match, any case, bold / brackets / 'Image' tolerated."""
    found = re.findall(r"\b" + tag + r"\s*\**\s*[:：]\s*\**\s*(?:image\s+)?[\(\[]?\s*([A-Z])\b", text, re.IGNORECASE)
    return found[-1].upper() if found else None


def ref_parse(ptype: str, text: str, labels: list[str], find=ref_tag):
    """Parsed answer in presented labels ({'best': 'B'}), or None (eval.py's parse_pick_*)."""
    best, worst = find("BEST", text), find("WORST", text)
    if ptype == "pick_best":
        return {"best": best} if best in labels else None
    if ptype == "pick_worst":
        return {"worst": worst} if worst in labels else None
    return {"best": best, "worst": worst} if best in labels and worst in labels else None


def ref_records(tasks, lines, find=ref_tag) -> list[dict]:
    """eval.py's result records from the final answer of each request (the highest attempt)."""
    final: dict = {}
    for line in lines:
        key = (line["task_id"], line["prompt_type"], line["trial"])
        if key not in final or line.get("attempt", 1) > final[key].get("attempt", 1):
            final[key] = line
    by_id = {t["id"]: t for t in tasks}
    results = []
    for (tid, pt, trial), line in final.items():
        t = by_id[tid]
        k = len(t["candidates"])
        perm = ref_permutations(k, tid)[trial]
        labels = [chr(65 + i) for i in range(k)]
        new_to_orig = {labels[i]: perm[i] for i in range(k)}  # presented label -> dataset index
        gt = {"best": t["best"], "worst": t["worst"]}
        base = {"task_id": tid, "prompt_type": pt, "trial": trial, "domain": t["domain"], "n_images": k}
        if line.get("error"):
            results.append({**base, "error": line["error"]})
            continue
        parsed = ref_parse(pt, line["response"], labels, find)
        mapped = None if parsed is None else {key: new_to_orig[v] for key, v in parsed.items()}
        if pt == "pick_best":
            correct = mapped is not None and mapped["best"] == gt["best"]
        elif pt == "pick_worst":
            correct = mapped is not None and mapped["worst"] == gt["worst"]
        else:
            correct = mapped is not None and mapped["best"] == gt["best"] and mapped["worst"] == gt["worst"]
        results.append({**base, "parsed_answer": mapped, "ground_truth": gt, "correct": correct})
    # k = 2: best+worst derived from a parsed, non-error pick_best record of the same trial
    for r in list(results):
        if r["prompt_type"] == "pick_best" and r["n_images"] == 2 and "error" not in r and r["parsed_answer"]:
            b = r["parsed_answer"]["best"]
            w = 1 - b
            gt = r["ground_truth"]
            results.append(
                {
                    **r,
                    "prompt_type": "pick_best_and_worst",
                    "parsed_answer": {"best": b, "worst": w},
                    "correct": b == gt["best"] and w == gt["worst"],
                }
            )
    return results


def _bucket():
    return {
        "pick_best": [0, 0],
        "pick_worst": [0, 0],
        "pick_best_and_worst": [0, 0, 0, 0],
    }  # total, correct(, worst, both)


def ref_summary(results, cell_of) -> dict:
    """summarize.py's compute_model_scores for every cell; cell_of(record) -> the cells it belongs to.
    Returns {cell: {"p3": {metric: acc or None}, "ap1": {...}, "t0": {...}, "p3_best", "p3_worst", "ap1_best", "ap1_worst"}}."""
    groups = defaultdict(list)
    for r in results:
        groups[(r["task_id"], r["prompt_type"])].append(r)
    stats = defaultdict(_bucket)
    trial_stats = defaultdict(lambda: [_bucket() for _ in range(TRIALS)])
    for (_tid, pt), trials in groups.items():
        non_error = [r for r in trials if "error" not in r]
        if not non_error:
            continue
        cells = cell_of(trials[0])
        if pt in ("pick_best", "pick_worst"):
            ok = len(non_error) >= TRIALS and all(r["correct"] for r in non_error)
            for c in cells:
                stats[c][pt][0] += 1
                stats[c][pt][1] += int(ok)
            for r in non_error:
                for c in cells:
                    trial_stats[c][r["trial"]][pt][0] += 1
                    trial_stats[c][r["trial"]][pt][1] += int(r["correct"])
        else:
            valid = [r for r in non_error if r["parsed_answer"]]
            has_all = len(valid) >= TRIALS
            cb = has_all and all(r["parsed_answer"]["best"] == r["ground_truth"]["best"] for r in valid)
            cw = has_all and all(r["parsed_answer"]["worst"] == r["ground_truth"]["worst"] for r in valid)
            for c in cells:
                s = stats[c][pt]
                s[0] += 1
                s[1] += int(cb)
                s[2] += int(cw)
                s[3] += int(cb and cw)
            for r in valid:
                tcb = r["parsed_answer"]["best"] == r["ground_truth"]["best"]
                tcw = r["parsed_answer"]["worst"] == r["ground_truth"]["worst"]
                for c in cells:
                    s = trial_stats[c][r["trial"]][pt]
                    s[0] += 1
                    s[1] += int(tcb)
                    s[2] += int(tcw)
                    s[3] += int(tcb and tcw)
    out = {}
    names = {"top1": ("pick_best", 1), "bot1": ("pick_worst", 1), "tb1": ("pick_best_and_worst", 3)}
    parts = {"best": ("pick_best_and_worst", 1), "worst": ("pick_best_and_worst", 2)}
    for c in set(stats) | set(trial_stats):
        res = {}

        def acc(bucket, pt, i):
            return bucket[pt][i] / bucket[pt][0] if bucket[pt][0] else None  # official: 0 when total is 0

        def ap1(pt, i):
            accs = [ts[pt][i] / ts[pt][0] for ts in trial_stats[c] if ts[pt][0] > 0]
            return sum(accs) / len(accs) if accs else None

        res["p3"] = {m: acc(stats[c], pt, i) for m, (pt, i) in names.items()}
        res["ap1"] = {m: ap1(pt, i) for m, (pt, i) in names.items()}
        res["t0"] = {m: acc(trial_stats[c][0], pt, i) for m, (pt, i) in names.items()}
        for part, (pt, i) in parts.items():
            res[f"p3_{part}"] = acc(stats[c], pt, i)
            res[f"ap1_{part}"] = ap1(pt, i)
        out[c] = res
    return out


def ref_random(tasks, cell_of) -> dict:
    """summarize.py's compute_random_baseline per cell: {cell: {(metric, 'p3'|'ap1'): value}}."""
    acc = defaultdict(lambda: defaultdict(float))
    count = defaultdict(int)
    for t in tasks:
        k = len(t["candidates"])
        pb = (1.0 / k) ** TRIALS
        bw = 0.5**TRIALS if k == 2 else (1.0 / (k * (k - 1))) ** TRIALS
        pb1 = 1.0 / k
        bw1 = 0.5 if k == 2 else 1.0 / (k * (k - 1))
        for c in cell_of({"domain": t["domain"], "n_images": k}):
            a = acc[c]
            a[("top1", "p3")] += pb
            a[("bot1", "p3")] += pb
            a[("tb1", "p3")] += bw
            a[("top1", "ap1")] += pb1
            a[("bot1", "ap1")] += pb1
            a[("tb1", "ap1")] += bw1
            count[c] += 1
    return {c: {key: v / count[c] for key, v in a.items()} for c, a in acc.items()}


def cell_of(r) -> list[tuple[str, str]]:
    return [("overall", "all"), ("domain", r["domain"]), ("k", str(r["n_images"]))]


# ---- generated tasks and answers -----------------------------------------------------------------


def _forms(tag: str, label: str, other: str, rng: random.Random) -> str:
    """One way of writing `TAG: label` (format drift included)."""
    form = rng.choice(
        [
            "clean",
            "clean",
            "clean",
            "bold",
            "title",
            "lowertag",
            "lowerletter",
            "image",
            "several",
            "several_rev",
            "outside",
            "nospace",
            "paren",
            "none",
            "prose",
        ]
    )
    return {
        "clean": f"{tag}: {label}",
        "bold": f"**{tag}:** {label}",
        "title": f"**{tag.title()}:** {label}",
        "lowertag": f"{tag.lower()}: {label}",
        "lowerletter": f"{tag}: {label.lower()}",
        "image": f"{tag}: Image {label}",
        "several": f"{tag}: {other} (first thought)\nOn reflection\n{tag}: {label}",
        "several_rev": f"{tag}: {label}\nor maybe {tag}: {other}",
        "outside": f"{tag}: Z",
        "nospace": f"{tag}:{label}",
        "paren": f"{tag}: ({label})",
        "none": "I cannot tell them apart.",
        "prose": f"The {tag.lower()} one is {label}.",
    }[form]


def generate(root: Path, seed: int = 12, per_cell: int = 6):
    """90 tasks (3 domains x k = 2..6 x 6) on disk, and answer lines with drift, errors, gaps, retries."""
    rng = random.Random(seed)
    tasks = []
    png = bytes.fromhex(  # a 1x1 PNG
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415478da63f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
    )
    (root / "img.png").write_bytes(png)
    for d in DOMAINS:
        for k in range(2, 7):
            for j in range(per_cell):
                tid = f"{d[:3]}-{k}-{j}"
                best = rng.randrange(k)
                worst = rng.choice([i for i in range(k) if i != best])
                tasks.append(
                    {"id": tid, "domain": d, "topic": "t", "candidates": ["img.png"] * k, "best": best, "worst": worst}
                )
    import yaml

    manifest = root / "track.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {"kind": "selection", "id": "official-check", "revision": "gen1", "tasks": tasks}, sort_keys=False
        )
    )
    lines = []
    for t in tasks:
        k = len(t["candidates"])
        labels = [chr(65 + i) for i in range(k)]
        for trial, perm in enumerate(ref_permutations(k, t["id"])):
            true_b, true_w = labels[perm.index(t["best"])], labels[perm.index(t["worst"])]
            for pt in PTYPES:
                if pt == "pick_best_and_worst" and k == 2:
                    continue
                base = {"task_id": t["id"], "trial": trial, "prompt_type": pt}
                u = rng.random()
                if u < 0.05:
                    continue  # missing
                if u < 0.12:
                    lines.append({**base, "error": "RateLimitError: 429", "attempt": 3})
                    continue
                n_att = 1 if rng.random() < 0.85 else rng.choice([2, 3])
                for att in range(1, n_att + 1):
                    b = true_b if rng.random() < 0.6 else rng.choice(labels)
                    w = true_w if rng.random() < 0.6 else rng.choice(labels)
                    ob, ow = rng.choice(labels), rng.choice(labels)
                    parts = ["Let me compare the images."]
                    if pt in ("pick_best", "pick_best_and_worst"):
                        parts.append(_forms("BEST", b, ob, rng))
                    if pt in ("pick_worst", "pick_best_and_worst"):
                        parts.append(_forms("WORST", w, ow, rng))
                    line = {**base, "response": "\n".join(parts)}
                    if n_att > 1 or rng.random() < 0.3:
                        line["attempt"] = att
                    lines.append(line)
    rng.shuffle(lines)  # the order of lines does not matter; the highest attempt counts
    answers = root / "answers.jsonl"
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return manifest, tasks, lines, answers


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("official")
    return generate(root)


@pytest.fixture(scope="module")
def params():
    return SelectionParams.of(load_protocol("vab"))


@pytest.fixture(scope="module")
def lenient():
    return SelectionParams.of(load_protocol("vab-lenient"))


# ---- function by function -----------------------------------------------------------------------


def test_generated_data_covers_the_cases(gen):
    _manifest, tasks, lines, _answers = gen
    texts = [x["response"] for x in lines if "response" in x]
    assert sum(1 for x in lines if "error" in x) > 20
    assert (
        any("**BEST:**" in s for s in texts) and any("best:" in s for s in texts) and any("Image " in s for s in texts)
    )
    results = ref_records(tasks, lines)
    assert sum(1 for r in results if "error" not in r and r.get("parsed_answer") is None) > 50  # unparseable
    assert sum(1 for t in tasks if len(t["candidates"]) == 2) == 18
    assert any(x.get("attempt", 1) > 1 for x in lines)


def test_orders_are_the_official_permutations(gen, params):
    manifest, tasks, _lines, _answers = gen
    track = load_selection_manifest(manifest)
    for task, t in zip(track.tasks, tasks):
        assert [list(o) for o in orders_for(task, params)] == ref_permutations(len(t["candidates"]), t["id"])


@pytest.mark.parametrize("variant", ["vab", "vab-lenient"])
def test_parser_matches_reference_on_every_response(gen, params, lenient, variant):
    _manifest, tasks, lines, _answers = gen
    p, find = (params, ref_tag) if variant == "vab" else (lenient, ref_tag_lenient)
    k_of = {t["id"]: len(t["candidates"]) for t in tasks}
    n = 0
    for x in lines:
        if "response" not in x:
            continue
        k = k_of[x["task_id"]]
        labels = [chr(65 + i) for i in range(k)]
        found, status, _detail = ans.parse_response(x["response"], x["prompt_type"], k, p)
        want = ref_parse(x["prompt_type"], x["response"], labels, find)
        assert (status == "ok") == (want is not None), x
        if want is not None:
            assert {key: v for key, v in found.items()} == want, x
        n += 1
    assert n > 800


def test_parsers_disagree_on_drift(gen):
    _manifest, tasks, lines, _answers = gen
    k_of = {t["id"]: len(t["candidates"]) for t in tasks}
    differ = 0
    for x in lines:
        if "response" in x:
            labels = [chr(65 + i) for i in range(k_of[x["task_id"]])]
            a = ref_parse(x["prompt_type"], x["response"], labels, ref_tag)
            b = ref_parse(x["prompt_type"], x["response"], labels, ref_tag_lenient)
            differ += a != b
    assert differ > 100


def _kit_cells(track, answers_path, p):
    answer_set = ans.read_answers(answers_path, track, p)
    outcomes = [trial_outcomes(t, ans.task_answers_from_file(t, answer_set, p), p) for t in track.tasks]
    return {(c["group"], c["value"]): c for c in aggregate(track.tasks, outcomes, p)}


def _assert_cells_equal(kit: dict, ref: dict, rnd: dict):
    checked = 0
    for cell, r in ref.items():
        c = kit[cell]
        for m in ("top1", "bot1", "tb1"):
            assert c["metrics"][m]["pass^3"]["mean"] == r["p3"][m], (cell, m, "pass^3")
            assert c["metrics"][m]["ap@1"]["mean"] == r["ap1"][m], (cell, m, "ap@1")
            assert c["metrics"][m]["ap@1"]["per_trial"][0] == r["t0"][m], (cell, m, "trial 0")
            assert c["metrics"][m]["pass^3"]["random"] == rnd[cell][(m, "p3")], (cell, m, "random pass^3")
            assert c["metrics"][m]["ap@1"]["random"] == rnd[cell][(m, "ap1")], (cell, m, "random ap@1")
            checked += 5
        for part in ("best", "worst"):
            assert c["tb1_parts"][f"{part}_only"]["pass^3"]["mean"] == r[f"p3_{part}"], (cell, part)
            assert c["tb1_parts"][f"{part}_only"]["ap@1"]["mean"] == r[f"ap1_{part}"], (cell, part)
            checked += 2
    # every overall / domain / k cell of the kit was checked
    assert {k for k in kit if k[0] != "topic"} == set(ref)
    return checked


def test_every_cell_equals_the_official_rules(gen, params):
    manifest, tasks, lines, answers = gen
    track = load_selection_manifest(manifest)
    kit = _kit_cells(track, answers, params)
    ref = ref_summary(ref_records(tasks, lines), cell_of)
    assert _assert_cells_equal(kit, ref, ref_random(tasks, cell_of)) == 9 * 19


def test_lenient_variant_differs_only_by_the_parser(gen, params, lenient):
    manifest, tasks, lines, answers = gen
    track = load_selection_manifest(manifest)
    kit = _kit_cells(track, answers, lenient)
    ref_l = ref_summary(ref_records(tasks, lines, ref_tag_lenient), cell_of)
    _assert_cells_equal(kit, ref_l, ref_random(tasks, cell_of))
    ref_o = ref_summary(ref_records(tasks, lines), cell_of)
    shifted = [(c, m) for c in ref_o for m in ("top1", "bot1", "tb1") if ref_o[c]["ap1"][m] != ref_l[c]["ap1"][m]]
    assert ("overall", "all") in {c for c, _m in shifted}


def test_records_rules_function_by_function(gen, params):
    """kit trial_outcomes: counted exactly where the reference puts a record in the per-trial buckets."""
    manifest, tasks, lines, answers = gen
    track = load_selection_manifest(manifest)
    answer_set = ans.read_answers(answers, track, params)
    results = ref_records(tasks, lines)
    counted = set()
    present = set()
    for r in results:
        if "error" in r:
            continue
        present.add((r["task_id"], r["prompt_type"]))
        if r["prompt_type"] != "pick_best_and_worst" or r["parsed_answer"]:
            counted.add((r["task_id"], r["prompt_type"], r["trial"], r["correct"]))
    metric_pt = {"top1": "pick_best", "bot1": "pick_worst", "tb1": "pick_best_and_worst"}
    for task in track.tasks:
        out = trial_outcomes(task, ans.task_answers_from_file(task, answer_set, params), params)
        for m, pt in metric_pt.items():
            for t, rec in enumerate(out[m]):
                hit = {c for c in ((task.id, pt, t, True), (task.id, pt, t, False)) if c in counted}
                assert (rec["rule"] == "counted") == bool(hit), (task.id, m, t)
                if hit:
                    assert hit == {(task.id, pt, t, rec["correct"])}
            has_record = any(r["rule"] != "absent" for r in out[m])
            assert has_record == ((task.id, pt) in present), (task.id, m)


def test_k2_best_and_worst_is_derived_from_parsed_pick_best(params, tmp_path):
    manifest, tasks, _lines, _answers = generate(tmp_path, per_cell=1)
    track = load_selection_manifest(manifest)
    task = next(t for t in track.tasks if t.k == 2)
    orders = orders_for(task, params)
    lab = [params.labels[o.index(task.best)] for o in orders]
    lines = [
        {"task_id": task.id, "trial": 0, "prompt_type": "pick_best", "response": f"BEST: {lab[0]}"},
        {"task_id": task.id, "trial": 1, "prompt_type": "pick_best", "response": f"**BEST:** {lab[1]}"},  # unparseable
        {"task_id": task.id, "trial": 2, "prompt_type": "pick_best", "error": "APIError"},
    ]
    path = tmp_path / "k2.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    a = ans.task_answers_from_file(task, ans.read_answers(path, track, params), params)
    bw = a["pick_best_and_worst"]
    assert (bw[0]["status"], bw[0]["best"], bw[0]["worst"]) == ("ok", task.best, 1 - task.best)
    assert [bw[1]["status"], bw[2]["status"]] == ["missing", "missing"]
    out = trial_outcomes(task, a, params)
    assert [r["rule"] for r in out["top1"]] == ["counted", "counted", "absent"]
    assert [r["rule"] for r in out["tb1"]] == ["counted", "absent", "absent"]


# ---- the command line: two parsings, retries, bad input ------------------------------------------


def test_score_cli_official_and_lenient_side_by_side(gen, tmp_path, capsys):
    manifest, tasks, lines, answers = gen
    results = tmp_path / "r"
    code = cli_main(
        [
            "vab",
            "score",
            "--track",
            str(manifest),
            "--answers",
            str(answers),
            "--results",
            str(results),
            "--also-protocol",
            "vab-lenient",
            "--extras",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "the same answers parsed under protocol vab-lenient:" in out and "inside best+worst answers" in out
    official = json.loads((results / "official-check" / "answers" / "summary.json").read_text())
    lenient_s = json.loads((results / "official-check" / "answers@vab-lenient" / "summary.json").read_text())
    run_o = json.loads((results / "official-check" / "answers" / "run.json").read_text())
    run_l = json.loads((results / "official-check" / "answers@vab-lenient" / "run.json").read_text())
    assert (run_o["protocol"]["id"], run_l["protocol"]["id"]) == ("vab", "vab-lenient")
    assert run_o["answers"]["parser"]["match"] == "first" and run_l["answers"]["parser"]["match"] == "last"
    assert run_o["answers"]["error"] == sum(1 for x in lines if "error" in x)
    for summary, find in ((official, ref_tag), (lenient_s, ref_tag_lenient)):
        ref = ref_summary(ref_records(tasks, lines, find), cell_of)
        kit = {(c["group"], c["value"]): c for c in summary["cells"]}
        _assert_cells_equal(kit, ref, ref_random(tasks, cell_of))


def test_export_retry_lists_unparsed_and_errors_below_the_limit(tmp_path, params, capsys):
    manifest, tasks, _lines, _answers = generate(tmp_path, per_cell=1)
    track = load_selection_manifest(manifest)
    t3 = next(t for t in track.tasks if t.k == 3)
    lines = [
        {"task_id": t3.id, "trial": 0, "prompt_type": "pick_best", "response": "BEST: A"},
        {"task_id": t3.id, "trial": 1, "prompt_type": "pick_best", "response": "best: a"},  # unparseable, attempt 1
        {"task_id": t3.id, "trial": 2, "prompt_type": "pick_best", "response": "nothing", "attempt": 3},  # at the limit
        {"task_id": t3.id, "trial": 0, "prompt_type": "pick_worst", "error": "HTTP 500", "attempt": 1},
        {"task_id": t3.id, "trial": 1, "prompt_type": "pick_worst", "response": "no", "attempt": 1},
        {"task_id": t3.id, "trial": 1, "prompt_type": "pick_worst", "response": "WORST: B", "attempt": 2},  # fixed
    ]
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert ans.retry_requests(track, ans.read_answers(path, track, params), params) == {
        (t3.id, 1, "pick_best"): 2,
        (t3.id, 0, "pick_worst"): 2,
    }
    out = tmp_path / "retry"
    assert cli_main(["vab", "export", "--track", str(manifest), "--retry", str(path), "--out", str(out)]) == 0
    reqs = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["trial"], r["prompt_type"], r["attempt"]) for r in reqs] == [
        (t3.id, 0, "pick_worst", 2),
        (t3.id, 1, "pick_best", 2),
    ]
    assert reqs[0]["content"][0]["text"].startswith("You will be shown 3 images labeled A, B, C.")
    assert "re-ask list: 2 requests" in capsys.readouterr().out


@pytest.mark.parametrize(
    "line,message",
    [
        (
            {"trial": 0, "prompt_type": "pick_best", "response": "BEST: A", "attempt": "2"},
            ":1: attempt '2' is not a positive integer; fix: number the attempts of a request 1, 2, ...",
        ),
        ({"trial": 0, "prompt_type": "pick_best"}, ":1: has neither response, error nor best/worst"),
    ],
)
def test_bad_answer_lines(tmp_path, params, line, message):
    manifest, _tasks, _lines, _answers = generate(tmp_path, per_cell=1)
    track = load_selection_manifest(manifest)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"task_id": track.tasks[0].id, **line}) + "\n")
    with pytest.raises(UserError) as e:
        ans.read_answers(path, track, params)
    assert str(e.value).startswith(f"{path}{message}")
    assert "\n" not in str(e.value)


def test_also_protocol_needs_answers(gen, capsys):
    manifest = gen[0]
    assert (
        cli_main(["vab", "score", "--track", str(manifest), "--judge", "x.py:f", "--also-protocol", "vab-lenient"]) == 2
    )
    assert capsys.readouterr().err.count("\n") == 1


def test_highest_attempt_counts_whatever_the_order(tmp_path, params):
    manifest, _tasks, _lines, _answers = generate(tmp_path, per_cell=1)
    track = load_selection_manifest(manifest)
    tid = track.tasks[0].id
    base = {"task_id": tid, "trial": 0, "prompt_type": "pick_best"}
    rows = [{**base, "response": "BEST: B", "attempt": 2}, {**base, "error": "HTTP 500", "attempt": 1}]
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    entry = ans.read_answers(path, track, params).entries[(tid, 0, "pick_best")]
    assert (entry[0], entry[1], entry[3], entry[4]) == ({"best": "B"}, "ok", 1, 2)
    rows.append({**base, "response": "BEST: A", "attempt": 1})  # attempt 1 twice, after a higher attempt
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    with pytest.raises(UserError) as e:
        ans.read_answers(path, track, params)
    assert str(e.value).startswith(
        f"{path}:3: second answer for task {tid} trial 0 pick_best attempt 1 (first on line 2)"
    )


def test_t0_answers_are_shown_in_parentheses(gen, tmp_path, capsys):
    """The official summary's '(t=0)' is a second run at temperature 0: --t0-answers scores it as NAME@t0."""
    manifest, tasks, lines, answers = gen
    results = tmp_path / "r"
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(manifest),
                "--answers",
                str(answers),
                "--t0-answers",
                str(answers),
                "--results",
                str(results),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    ref = ref_summary(ref_records(tasks, lines), cell_of)[("overall", "all")]
    p = f"{ref['p3']['top1'] * 100:.1f}%"
    assert f"{p} ({p})" in out
    t0 = json.loads((results / "official-check" / "answers@t0" / "summary.json").read_text())
    assert t0["cells"][0]["metrics"]["top1"]["pass^3"]["mean"] == ref["p3"]["top1"]


@pytest.mark.parametrize(
    "edit,message",
    [
        (
            lambda d: d["answers"]["records"].update(error="ignored"),
            "answers.records.error must be one of counted, dropped, absent",
        ),
        (
            lambda d: d["answers"]["records"]["unparseable"].update(pick_worst="x"),
            "answers.records.unparseable.pick_worst must be one of",
        ),
        (lambda d: d["answers"]["attempts"].update(max=0), "answers.attempts.max must be a positive integer"),
        (
            lambda d: d["aggregations"]["ap@1"].update(definition="mean_over_tasks"),
            "aggregations.ap@1.definition must be mean_of_trial_accuracies",
        ),
        (
            lambda d: d["message"]["image"].update(format="PNG"),
            "message.image: only mode RGB and format JPEG are implemented",
        ),
        (
            lambda d: d["prompt_types"]["pick_best_and_worst"].update(derived_for_k2_from="pick_worst"),
            "derived_for_k2_from must be pick_best",
        ),
        (lambda d: d["sampling"].update(max_tokens="8k"), "sampling.max_tokens must be a positive integer"),
    ],
)
def test_protocol_fields_the_engine_cannot_honour_are_refused(tmp_path, edit, message):
    import yaml

    data = yaml.safe_load(load_protocol("vab").path.read_text())
    edit(data)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as e:
        load_protocol(str(path))
    assert str(e.value).startswith(f"{path}: invalid selection protocol: ") and message in str(e.value)

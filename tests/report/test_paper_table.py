"""`pstbench table`: numbers against summary.json read independently, marks against `pstbench compare
--json` (raw p-values; Holm recomputed here by its definition), LaTeX compiled with pdflatex + booktabs
when a TeX engine is installed (else a golden file), escaping of every user string, refusals."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.selection_runs import selection  # noqa: F401  (the selection runs good, bad, good2: a module fixture)
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.protocol import load_protocol

GOLDEN = Path(__file__).parent / "golden"
PROTOCOL = load_protocol()
METRICS = PROTOCOL.metric_names
PDFLATEX = shutil.which("pdflatex")


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def holm_reference(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    for rank, i in enumerate(order):
        out[i] = max(min(1.0, (m - j) * p[order[j]]) for j in range(rank + 1))
    return out


def _decimals(proto_path: Path) -> dict[str, int]:
    data = yaml.safe_load(Path(proto_path).read_text())
    return {m: int(v.get("decimals", 4)) for m, v in data["metrics"].items()}


def _hib(proto_path: Path) -> dict[str, bool]:
    data = yaml.safe_load(Path(proto_path).read_text())
    return {m: bool(v["higher_is_better"]) for m, v in data["metrics"].items()}


def _ranked(proto_path: Path) -> list[str]:
    data = yaml.safe_load(Path(proto_path).read_text())
    return [m for m, v in data["metrics"].items() if v.get("ranked")]


def _strip_md(cell: str) -> tuple[str, str, bool]:
    """(number text, mark best|second|'', dagger) of a Markdown cell."""
    cell = cell.strip()
    dagger = cell.endswith("†")
    cell = cell.removesuffix("†").strip()
    if cell.startswith("**"):
        return cell.strip("*"), "best", dagger
    if cell.startswith("<ins>"):  # GitHub keeps <ins> (rendered underlined); it strips <u>
        assert cell.endswith("</ins>")
        return cell[5:-6], "second", dagger
    return cell, "", dagger


def _parse_md(text: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert re.fullmatch(r"\|:---(\|---:)+\|", lines[1])
    rows = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip().strip("|").split(" | ")]
        assert len(cells) == len(head), ln
        rows[cells[0]] = cells[1:]
    return head, rows


def _expected_marks(values: dict[str, float], decimals: int, hib: bool, exclude: str) -> dict[str, str]:
    shown = {k: round(v, decimals) for k, v in values.items() if k != exclude}
    order = sorted(set(shown.values()), reverse=hib)
    return {
        k: ("best" if v == order[0] else "second" if len(order) > 1 and v == order[1] else "") for k, v in shown.items()
    }


# ---- paired runs scored on a local track ---------------------------------------------------------------
def _brighten(src: Path, out: Path, by: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("*.png")):
        arr = np.asarray(Image.open(f), dtype=np.int16)
        Image.fromarray(np.clip(arr + by, 0, 255).astype(np.uint8)).save(out / f.name)
    return out


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    root = tmp_path_factory.mktemp("table_paired")
    manifest = make_track(root / "track", n=10)
    proto = protocol_without_lpips(root / "proto.yaml")
    results = root / "results"
    outs = {
        "strong": make_outputs(manifest, root / "o" / "strong", strength=0.95),
        "mid": make_outputs(manifest, root / "o" / "mid", strength=0.6),
        "weak": make_outputs(manifest, root / "o" / "weak", strength=0.2),
    }
    outs["bright"] = _brighten(outs["strong"], root / "o" / "bright", 3)
    for name, o in [("identity", "identity"), *outs.items()]:
        code, _, err = _cli(
            "score",
            "--track",
            manifest,
            "--outputs",
            o,
            "--name",
            name,
            "--results",
            results,
            "--protocol",
            proto,
            "--no-cache",
        )
        assert code == 0, err
    runs = {n: results / "small" / n for n in ("identity", *outs)}
    return root, manifest, proto, runs


def check_paired_table(runs: dict[str, Path], proto: Path) -> None:
    """`pstbench table` of the non-Identity runs (Identity is found beside them): every number equals
    summary.json, every mark the expected rank, every dagger compare --json's raw p + Holm here."""
    methods = [n for n in runs if n != "identity"]
    given = [runs[n] for n in methods]
    code, md, err = _cli("table", *given)
    assert code == 0, err
    head, rows = _parse_md(md)
    ranked, dec, hib = _ranked(proto), _decimals(proto), _hib(proto)
    assert list(rows) == ["Identity", *methods]  # Identity first
    assert len(head) == 1 + len(ranked)
    summaries = {
        ("Identity" if n == "identity" else n): json.loads((d / "summary.json").read_text()) for n, d in runs.items()
    }
    code, js, _ = _cli("table", *given, "--format", "json")
    table = json.loads(js)
    all_tests = []  # (column metric, row, raw p, direction) of the table, in order
    for j, m in enumerate(ranked):
        values = {n: s["metrics"][m]["mean"] for n, s in summaries.items()}
        marks = _expected_marks(values, dec[m], hib[m], exclude="Identity")
        for n, s in summaries.items():
            e = s["metrics"][m]
            number, mark, dagger = _strip_md(rows[n][j])
            assert number == f"{e['mean']:.{dec[m]}f} ± {e['pm']:.{dec[m]}f}"  # summary.json, the protocol's decimals
            assert mark == marks.get(n, "")
        # the tests: compare --json with the column's best run first, every other run a candidate
        best = next(n for n in methods if marks[n] == "best")
        others = [n for n in summaries if n != best]
        code, out, err = _cli(
            "compare",
            runs[best],
            *[runs["identity" if n == "Identity" else n] for n in others],
            "--against-first",
            "--metrics",
            m,
            "--json",
        )
        assert code == 0, err
        comp = {t["candidate"]: t for t in json.loads(out)["tests"]}
        col = table["columns"][j]
        assert col["metric"] == m and col["reference"] == best
        for n in others:
            ref = comp["identity" if n == "Identity" else n]
            cell = col["cells"][n]
            assert cell["test"]["pvalue"] == ref["pvalue"] and cell["test"]["statistic"] == ref["statistic"]
            all_tests.append((m, n, ref["pvalue"], ref["direction"]))
    # Holm over the table's tests, by its definition; a dagger exactly where adjusted p < alpha and worse
    adjusted = holm_reference([t[2] for t in all_tests])
    alpha = yaml.safe_load(proto.read_text())["comparison"]["alpha"]
    daggers = {(m, n) for (m, n, _, d), p in zip(all_tests, adjusted) if p < alpha and d < 0}
    shown = {(m, n) for j, m in enumerate(ranked) for n in rows if _strip_md(rows[n][j])[2]}
    assert shown == daggers
    assert f"Holm over the {len(all_tests)} tests of this table" in md
    return daggers


def test_paired_markdown_numbers_equal_summary_and_marks_equal_compare(paired):
    root, manifest, proto, runs = paired
    daggers = check_paired_table(runs, proto)
    assert daggers, "the fixture should produce at least one significant difference"


def test_single_column_marks_equal_compare_verdicts_exactly(paired):
    """One column: the table's Holm family is compare --against-first's, so its verdicts are the marks."""
    root, manifest, proto, runs = paired
    for m in _ranked(proto):
        code, js, _ = _cli(
            "table",
            runs["identity"],
            runs["strong"],
            runs["mid"],
            runs["weak"],
            runs["bright"],
            "--metrics",
            m,
            "--format",
            "json",
        )
        col = json.loads(js)["columns"][0]
        best = col["reference"]
        others = [n for n in col["cells"] if n != best]
        code, out, _ = _cli(
            "compare",
            runs[best],
            *[runs["identity" if n == "Identity" else n] for n in others],
            "--against-first",
            "--metrics",
            m,
            "--json",
        )
        verdicts = {t["candidate"]: t["verdict"] for t in json.loads(out)["tests"]}
        for n in others:
            assert col["cells"][n]["worse"] == (verdicts["identity" if n == "Identity" else n] == "worse"), (m, n)
            assert (
                col["cells"][n]["test"]["p_holm"]
                == next(
                    t for t in json.loads(out)["tests"] if t["candidate"] == ("identity" if n == "Identity" else n)
                )["p_holm"]
            )


def test_against_a_named_run(paired):
    root, manifest, proto, runs = paired
    code, js, _ = _cli("table", runs["weak"], runs["strong"], "--against", "weak", "--format", "json")
    assert code == 0
    table = json.loads(js)
    assert all(c["reference"] == "weak" for c in table["columns"])
    assert "significantly worse than run weak" in table["legend"][2]
    code, js, _ = _cli("table", runs["mid"], runs["strong"], "--against", "first", "--format", "json")
    table = json.loads(js)
    assert all(c["reference"] == "mid" for c in table["columns"])
    assert "significantly worse than the first run given (mid)" in table["legend"][2]
    code, js, _ = _cli("table", runs["mid"], runs["strong"], "--against", "identity", "--format", "json")
    assert all(c["reference"] == "Identity" for c in json.loads(js)["columns"])
    code, _, err = _cli("table", runs["weak"], runs["strong"], "--against", "nonesuch")
    assert code == 2 and "--against nonesuch: no run of that name on track small" in err and err.count("\n") == 1


def _compile(tex: str, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / "table.tex").write_text(tex)
    (where / "doc.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n\\input{table.tex}\n\\end{document}\n"
    )
    proc = subprocess.run(
        [PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (where / "doc.pdf").stat().st_size > 0


def test_paired_latex_numbers_marks_and_compiles(paired, tmp_path):
    root, manifest, proto, runs = paired
    check_latex([runs[n] for n in ("strong", "mid", "weak", "bright")], tmp_path)


def check_latex(given: list[Path], tmp_path: Path) -> None:
    """The LaTeX table has the Markdown table's cells (numbers, marks, daggers) and compiles."""
    code, tex, err = _cli("table", *given, "--format", "latex")
    assert code == 0, err
    code, md, _ = _cli("table", *given)
    _, md_rows = _parse_md(md)
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule")[0]
    for line in [ln for ln in body.replace("\\midrule", "").splitlines() if ln.strip()]:
        cells = [c.strip() for c in line.removesuffix("\\\\").split(" & ")]
        name = cells[0]
        for c_tex, c_md in zip(cells[1:], md_rows[name]):
            number, mark, dagger = _strip_md(c_md)
            expect = number.replace("±", "$\\pm$")
            expect = {"best": f"\\textbf{{{expect}}}", "second": f"\\underline{{{expect}}}"}.get(mark, expect)
            assert c_tex == expect + ("$^{\\dagger}$" if dagger else "")
    assert "\\toprule" in tex and "\\bottomrule" in tex and "\\usepackage{booktabs}" in tex
    if PDFLATEX:
        _compile(tex, tmp_path / "tex")


def test_csv_one_line_per_cell(paired):
    import csv

    root, manifest, proto, runs = paired
    code, out, _ = _cli("table", runs["strong"], runs["mid"], "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    ranked = _ranked(proto)
    assert len(rows) == 3 * len(ranked)
    s = json.loads((runs["mid"] / "summary.json").read_text())
    for r in rows:
        if r["row"] == "mid":
            assert float(r["value"]) == s["metrics"][r["metric"]]["mean"]
            assert float(r["pm"]) == s["metrics"][r["metric"]]["pm"]


def test_demo_five_baselines(tmp_path):
    """The issue's check: the five demo runs (Identity, reinhard, mkl, idt, histmatch) made by `pstbench demo`."""
    results = tmp_path / "results"
    code, _, err = _cli("demo", "--methods", "all", "--results", results)
    assert code == 0, err
    runs = {n: results / "demo" / n for n in ("identity", "reinhard", "mkl", "idt", "histmatch")}
    check_paired_table(runs, PROTOCOL.path)
    check_latex([runs[n] for n in ("reinhard", "mkl", "idt", "histmatch")], tmp_path)


# ---- hand-written runs: escaping, ties, tracks, refusals ------------------------------------------------
def write_run(
    root: Path, folder: str, name: str, values: dict[str, np.ndarray], *, track="t", revision="r1", method=None
) -> Path:
    """A run folder in the documented formats, summary.json with the kit's entry per metric (`summary_entry`:
    table reads runs through the validating reader, which recomputes it)."""
    from pytest_pstbench.paired.aggregation import summary_entry

    d = root / track / folder
    d.mkdir(parents=True)
    n = len(next(iter(values.values())))
    cols = {m: values.get(m, np.full(n, 0.5)) for m in METRICS}
    lines = ["pair_id," + ",".join(METRICS)] + [
        f"p{i:02d}," + ",".join(repr(float(cols[m][i])) for m in METRICS) for i in range(n)
    ]
    (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    metrics = {m: summary_entry([float(v) for v in cols[m]], PROTOCOL, m) for m in METRICS}
    (d / "summary.json").write_text(
        json.dumps(
            {
                "track": track,
                "protocol": "pstbench",
                "dataset_revision": revision,
                "name": name,
                "n": n,
                "complete": True,
                "metrics": metrics,
            }
        )
    )
    (d / "run.json").write_text(
        json.dumps(
            {
                "protocol": {"id": "pstbench", "sha256": PROTOCOL.sha256},
                "name": name,
                "track": track,
                "dataset": {"id": track, "revision": revision},
                "complete": True,
                "n_pairs": n,
                "n_scored": n,
                **({"method": method} if method else {}),
            }
        )
    )
    return d


NASTY = "a&b%c$d#e_f{g}h~i^j\\k"


def _hand_runs(root: Path, track="t", revision="r1") -> list[Path]:
    n = 8
    base = np.linspace(20, 27, n)
    return [
        write_run(
            root,
            "identity",
            "identity",
            {"psnr": base - 3},
            track=track,
            revision=revision,
            method={"method": "identity"},
        ),
        write_run(root, "nasty", NASTY, {"psnr": base, "ssim": np.full(n, 0.91)}, track=track, revision=revision),
        write_run(root, "tie", "tie", {"psnr": base + 0.001, "ssim": np.full(n, 0.91)}, track=track, revision=revision),
        write_run(root, "low", "low_run", {"psnr": base - 1, "ssim": np.full(n, 0.80)}, track=track, revision=revision),
    ]


def test_escaping_golden_and_ties_share_the_mark(tmp_path):
    runs = _hand_runs(tmp_path)
    code, tex, err = _cli("table", *runs, "--format", "latex", "--metrics", "psnr", "ssim")
    assert code == 0, err
    golden = GOLDEN / "table_escape.tex"
    assert tex == golden.read_text()
    # every special character of the run name escaped
    assert "a\\&b\\%c\\$d\\#e\\_f\\{g\\}h\\textasciitilde{}i\\textasciicircum{}j\\textbackslash{}k" in tex
    assert "low\\_run" in tex
    code, md, _ = _cli("table", *runs, "--metrics", "psnr", "ssim")
    _, rows = _parse_md(md)
    md_name = next(k for k in rows if k not in ("Identity", "tie", "low\\_run"))
    # & as an entity, $ (GitHub's math) and ~ (strikethrough) escaped too (issue #44 case 10)
    assert md_name == "a&amp;b%c\\$d\\#e\\_f{g}h\\~i^j\\\\k"
    # PSNR 23.500 vs 23.501 print the same (2 decimals): both bold, "low" is then second
    assert _strip_md(rows[md_name][0])[1] == "best" and _strip_md(rows["tie"][0])[1] == "best"
    assert _strip_md(rows["low\\_run"][0])[1] == "second"
    assert _strip_md(rows["Identity"][0])[1] == ""  # Identity is not ranked
    if PDFLATEX:
        _compile(tex, tmp_path / "tex")


def test_several_tracks_grouped_columns(tmp_path):
    a = _hand_runs(tmp_path / "a", track="t1")
    b = _hand_runs(tmp_path / "b", track="t2")[:3]  # no "low" run on t2: an empty cell
    code, md, err = _cli("table", *a, *b, "--metrics", "psnr")
    assert code == 0, err
    head, rows = _parse_md(md)
    assert head == ["Method", "t1: PSNR↑", "t2: PSNR↑"]
    assert rows["low\\_run"][1] == ""
    code, tex, _ = _cli("table", *a, *b, "--metrics", "psnr", "--format", "latex")
    assert (
        "\\multicolumn{1}{c}{t1} & \\multicolumn{1}{c}{t2}" in tex and "\\cmidrule(lr){2-2} \\cmidrule(lr){3-3}" in tex
    )
    if PDFLATEX:
        _compile(tex, tmp_path / "tex")


@pytest.mark.parametrize(
    "case, message",
    [
        ("revision", "run.json dataset.revision is 'r2' but"),
        ("no_identity", "no Identity run of track t among the run folders nor at"),
        ("twice", "is also the name of"),
        ("metric", "--metrics: nonesuch not in protocol pstbench"),
        ("mixed", "is a paired run (metrics.csv) but"),
        ("unicode", "has no LaTeX spelling"),
    ],
)
def test_refusals_are_one_line_errors(tmp_path, case, message):
    runs = _hand_runs(tmp_path / "x")
    extra = []
    if case == "revision":
        args = [*runs, write_run(tmp_path / "y", "other", "other", {"psnr": np.linspace(20, 27, 8)}, revision="r2")]
    elif case == "no_identity":
        args = runs[1:]
        shutil.rmtree(runs[0])
    elif case == "twice":
        args = [*runs, runs[1]]
    elif case == "metric":
        args, extra = runs, ["--metrics", "nonesuch"]
    elif case == "mixed":
        sel = tmp_path / "sel"
        sel.mkdir()
        (sel / "run.json").write_text(json.dumps({"kind": "selection"}))
        args = [*runs, sel]
    else:
        args = [*runs, write_run(tmp_path / "x", "uni", "méthode", {"psnr": np.linspace(20, 27, 8)})]
        extra = ["--format", "latex"]
    code, out, err = _cli("table", *args, *extra)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err and "fix:" in err, err


# ---- selection runs (the module fixture `selection`: helpers/selection_runs.py) --------------------------------
def test_selection_numbers_random_row_and_mcnemar_marks(selection, tmp_path):
    names = ["good", "bad", "good2"]
    code, md, err = _cli("table", *[selection[n] for n in names])
    assert code == 0, err
    head, rows = _parse_md(md)
    vab = yaml.safe_load(load_protocol("vab").path.read_text())
    metrics, aggs = list(vab["metrics"]), list(vab["aggregations"])
    assert head[1:] == [
        f"{vab['metrics'][m]['label']} {vab['aggregations'][a]['label']}" for m in metrics for a in aggs
    ]
    human_label = "Human (leave-one-out, 10 experts)"  # vab-demo ships its simulated panel's votes (selection.human)
    assert list(rows) == ["Random", human_label, *names]
    overall = {
        n: next(c for c in json.loads((selection[n] / "summary.json").read_text())["cells"] if c["group"] == "overall")
        for n in names
    }
    human = next(
        c
        for c in json.loads((selection["good"] / "summary.json").read_text())["human"]["cells"]
        if c["group"] == "overall"
    )
    code, js, _ = _cli("table", *[selection[n] for n in names], "--format", "json")
    table = json.loads(js)
    tests = []
    for j, (m, a) in enumerate((m, a) for m in metrics for a in aggs):
        assert rows["Random"][j] == f"{overall['good']['metrics'][m][a]['random']:.3f}"
        h = human["metrics"][m][a]
        assert rows[human_label][j] == f"{h['mean']:.3f} ± {h['pm']:.3f}"  # a reference row: no mark, no dagger
        values = {n: overall[n]["metrics"][m][a]["mean"] for n in names}
        marks = _expected_marks(values, 3, True, exclude="Random")
        for n in names:
            e = overall[n]["metrics"][m][a]
            number, mark, _ = _strip_md(rows[n][j])
            assert number == f"{e['mean']:.3f} ± {e['pm']:.3f}" and mark == marks[n]
        best = next(n for n in names if marks[n] == "best")
        others = [n for n in names if n != best]
        code, out, _ = _cli(
            "compare", selection[best], *[selection[n] for n in others], "--against-first", "--metrics", m, "--json"
        )
        comp = {t["candidate"]: t for t in json.loads(out)["tests"] if t["outcome"] == a}
        col = table["columns"][j]
        assert (col["metric"], col["aggregation"], col["reference"]) == (m, a, best)
        for n in others:
            assert col["cells"][n]["test"]["pvalue"] == comp[n]["pvalue"]
            tests.append(((m, a), n, comp[n]["pvalue"], comp[n]["b"] - comp[n]["c"]))
    adjusted = holm_reference([t[2] for t in tests])
    daggers = {(col, n) for (col, n, _, d), p in zip(tests, adjusted) if p < 0.05 and d < 0}
    shown = {
        (ma, n) for j, ma in enumerate((m, a) for m in metrics for a in aggs) for n in names if _strip_md(rows[n][j])[2]
    }
    assert shown == daggers and daggers
    code, tex, _ = _cli("table", *[selection[n] for n in names], "--format", "latex")
    assert code == 0 and "Random & 0.290" in tex
    if PDFLATEX:
        _compile(tex, tmp_path / "tex")


def test_selection_refusals(selection, tmp_path):
    code, _, err = _cli("table", selection["good"], selection["bad"], "--against", "Random")
    assert code == 2 and "the random baseline is not a run" in err
    other = tmp_path / "other"
    shutil.copytree(selection["bad"], other)
    run = json.loads((other / "run.json").read_text())
    run["dataset"]["revision"] = "zzz"
    (other / "run.json").write_text(json.dumps(run))
    code, _, err = _cli("table", selection["good"], other)
    assert code == 2 and "run.json dataset.revision is 'zzz' but" in err and err.count("\n") == 1


# ---- nothing to compare; a reported-not-ranked metric (issue #24) --------------------------------------
def test_one_method_has_no_marks_and_the_legend_says_why(tmp_path):
    n = 8
    base = np.linspace(20, 27, n)
    ident = write_run(tmp_path, "identity", "identity", {"psnr": base - 3}, method={"method": "identity"})
    only = write_run(tmp_path, "only", "only", {"psnr": base, "ssim": np.full(n, 0.9)})
    code, md, err = _cli("table", ident, only)
    assert code == 0, err
    head, rows = _parse_md(md)
    assert len(head) == 1 + len(_ranked(PROTOCOL.path))  # the ranked metrics; H-Corr(style) left out
    assert all(_strip_md(c)[1] == "" for r in rows.values() for c in r)  # no bold, no underline anywhere
    code, js, err = _cli("table", ident, only, "--format", "json")
    assert json.loads(js)["legend"][-2:] == [
        "H-Corr(style) (hcorr_style): reported in each run's summary.json but not ranked by the protocol, so not a "
        "column here (--metrics ... hcorr_style shows it, without marks or tests).",
        "No bold or underline: nothing to compare (one run per track besides Identity, or equal values as printed).",
    ]
    assert "No bold or underline: nothing to compare" in md
    # the Identity row is still tested against the run: its PSNR is 3 dB worse on every pair
    assert _strip_md(rows["Identity"][head.index("PSNR↑") - 1])[2] is True


def test_reported_metric_asked_for_is_shown_unmarked_and_untested(tmp_path):
    n = 8
    base = np.linspace(20, 27, n)
    runs = [
        write_run(tmp_path, "identity", "identity", {"psnr": base - 3}, method={"method": "identity"}),
        write_run(tmp_path, "a", "a", {"psnr": base, "hcorr_style": np.full(n, 0.9)}),
        write_run(tmp_path, "b", "b", {"psnr": base - 1, "hcorr_style": np.linspace(0.1, 0.3, n)}),
    ]
    code, js, err = _cli("table", *runs, "--metrics", "psnr", "hcorr_style", "--format", "json")
    assert code == 0, err
    table = json.loads(js)
    psnr, hstyle = table["columns"]
    assert psnr["cells"]["a"]["rank"] == 1 and psnr["cells"]["b"]["rank"] == 2
    assert hstyle["reference"] is None and hstyle["tested"] is False
    assert all(c["rank"] is None and c["test"] is None and not c["worse"] for c in hstyle["cells"].values())
    assert table["n_tests"] == 2  # PSNR: Identity and b against a
    assert table["legend"][-1] == "H-Corr(style): reported, not ranked by the protocol: no marks, no tests."

"""`pstbench report`: the HTML page, its figures and thumbnails, links, values, escaping, refusals,
the sensitivity section, and a headless Chromium screenshot when Chromium is installed."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main

SOURCE = Path(__import__("pytest_pstbench").__file__).resolve().parents[1]  # the tests run from a source tree

N_PAIRS = 4


# ---- fixtures ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Two small runs (outputs 30% and 70% of the way from content to reference) on a local track."""
    root = tmp_path_factory.mktemp("report")
    manifest = make_track(root / "track", n=N_PAIRS)
    proto = protocol_without_lpips(root / "proto.yaml")
    results = root / "results"
    runs = []
    for name, strength in (("alpha", 0.3), ("beta", 0.7)):
        out = make_outputs(manifest, root / "outs" / name, strength=strength)
        argv = [
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(out),
            "--name",
            name,
            "--results",
            str(results),
            "--protocol",
            str(proto),
            "--no-cache",
        ]
        assert main(argv) == 0
        runs.append(results / "small" / name)
    return {"root": root, "manifest": manifest, "proto": proto, "results": results, "runs": runs}


@pytest.fixture(scope="module")
def report(setup):
    out = setup["root"] / "report"
    assert main(["report", *map(str, setup["runs"]), "--out", str(out), "--track", str(setup["manifest"])]) == 0
    return out


def protocol_metrics(proto: Path) -> dict:
    return yaml.safe_load(proto.read_text(encoding="utf-8"))["metrics"]


class Page(HTMLParser):
    """Collects links, ids, and the cells/attributes the tests read back."""

    def __init__(self):
        super().__init__()
        self.srcs, self.hrefs, self.ids, self.tags = [], [], set(), []
        self.cells = []  # (attrs, text) of <td> with data-*
        self._cell = None
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.srcs.append(a.get("src"))
        if tag == "a":
            self.hrefs.append(a.get("href"))
        if tag == "link" or tag == "script":
            self.srcs.append(a.get("href") or a.get("src") or "<inline script>")
        if tag == "td" and any(k.startswith("data-") for k in a):
            self._cell = (a, [])

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append((self._cell[0], "".join(self._cell[1]).strip()))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell[1].append(data)


def parse(out: Path) -> Page:
    p = Page()
    p.feed((out / "index.html").read_text(encoding="utf-8"))
    return p


def run_cli(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


def error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def copy_run(src: Path, dst: Path, edit=None, edit_summary=None) -> Path:
    shutil.copytree(src, dst)
    if edit:
        data = json.loads((dst / "run.json").read_text())
        edit(data)
        (dst / "run.json").write_text(json.dumps(data))
    if edit_summary:
        data = json.loads((dst / "summary.json").read_text())
        edit_summary(data)
        (dst / "summary.json").write_text(json.dumps(data))
    return dst


# ---- the page ----------------------------------------------------------------------------------
def test_report_writes_page_figures_and_thumbnails(setup, report):
    metrics = protocol_metrics(setup["proto"])
    assert (report / "index.html").is_file()
    figures = sorted((report / "figures").glob("*.png"))
    assert len(figures) == len(metrics)  # one figure per metric of the protocol
    for f in figures:
        with Image.open(f) as im:
            assert im.format == "PNG"
            px = np.asarray(im.convert("L"), dtype=float)
        assert px.std() > 5  # not a blank canvas
    page = parse(report)
    thumbs = [s for s in page.srcs if s.startswith("thumbs/")]
    # content, style, reference + one output per run, for every pair; all distinct files here
    assert len(thumbs) == N_PAIRS * (3 + 2)
    assert len(set(thumbs)) == len(thumbs)
    for t in thumbs:
        with Image.open(report / t) as im:
            assert max(im.size) <= 192
    # Figures are labelled from the protocol data: label and direction arrow in the page's alt texts.
    alts = [a.get("alt", "") for tag, a in page.tags if tag == "img" and a.get("src", "").startswith("figures/")]
    for name, m in metrics.items():
        arrow = "↑" if m["higher_is_better"] else "↓"
        assert any(alt.startswith(f"{m['label']} {arrow}") for alt in alts), (name, alts)


def test_every_link_resolves_inside_the_folder(report):
    page = parse(report)
    root = report.resolve()
    assert page.srcs and page.hrefs
    for link in page.srcs + page.hrefs:
        assert link, "empty link"
        u = urlparse(link)
        assert not u.scheme and not u.netloc, f"external resource: {link}"
        if link.startswith("#"):
            assert link[1:] in page.ids, f"anchor {link} has no target"
            continue
        target = (report / unquote(u.path)).resolve()
        assert target.is_relative_to(root), link
        assert target.is_file(), f"{link} does not exist"
    raw = (report / "index.html").read_text(encoding="utf-8")
    assert "<script" not in raw and "url(" not in raw and "@import" not in raw


def test_summary_table_equals_summary_json(setup, report):
    metrics = protocol_metrics(setup["proto"])
    page = parse(report)
    summary_cells = [(a, t) for a, t in page.cells if "data-mean" in a]
    assert len(summary_cells) == 2 * len(metrics)
    rows = iter(summary_cells)
    for run_dir in setup["runs"]:
        summary = json.loads((run_dir / "summary.json").read_text())  # independent read
        for name, m in metrics.items():
            attrs, text = next(rows)
            entry = summary["metrics"][name]
            assert attrs["data-metric"] == name
            assert float(attrs["data-mean"]) == entry["mean"]
            assert float(attrs["data-pm"]) == entry["pm"]
            d = m["decimals"]
            assert text == f"{entry['mean']:.{d}f} ± {entry['pm']:.{d}f}"


def test_pair_scores_equal_metrics_csv(setup, report):
    metrics = protocol_metrics(setup["proto"])
    page = parse(report)
    cells = {(a["data-pair"], int(a["data-run"]), a["data-metric"]): (a, t) for a, t in page.cells if "data-pair" in a}
    assert len(cells) == N_PAIRS * 2 * len(metrics)
    for i, run_dir in enumerate(setup["runs"]):
        with open(run_dir / "metrics.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                for name, m in metrics.items():
                    attrs, text = cells[(row["pair_id"], i, name)]
                    assert float(attrs["data-value"]) == float(row[name])
                    assert text == f"{float(row[name]):.{m['decimals']}f}"


def test_output_is_deterministic(setup, report, tmp_path):
    again = tmp_path / "again"
    assert main(["report", *map(str, setup["runs"]), "--out", str(again), "--track", str(setup["manifest"])]) == 0
    files = sorted(p.relative_to(report) for p in report.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for f in files:
        assert (report / f).read_bytes() == (again / f).read_bytes(), f


def test_rewrites_an_earlier_report_but_not_another_folder(setup, tmp_path, capsys):
    out = tmp_path / "rep"
    args = ["report", str(setup["runs"][0]), "--out", str(out), "--max-pairs", "1"]
    assert main(args) == 0
    assert main(args) == 0  # an earlier report is replaced
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    code, err = run_cli(["report", str(setup["runs"][0]), "--out", str(other)], capsys)
    assert code == 2 and "not empty" in error_line(err)
    assert (other / "keep.txt").read_text() == "x"


# ---- escaping ----------------------------------------------------------------------------------
def test_names_and_method_info_are_escaped(setup, tmp_path):
    name = "evil<script>alert(1)<script>&"
    out = make_outputs(setup["manifest"], tmp_path / "evil_outputs", strength=0.5)
    argv = [
        "score",
        "--track",
        str(setup["manifest"]),
        "--outputs",
        str(out),
        "--name",
        name,
        "--results",
        str(tmp_path / "results"),
        "--protocol",
        str(setup["proto"]),
        "--no-cache",
        "--method-info",
        'note=<img src=x onerror="alert(2)">',
    ]
    assert main(argv) == 0
    rep = tmp_path / "rep"
    assert main(["report", str(tmp_path / "results" / "small" / name), "--out", str(rep), "--max-pairs", "1"]) == 0
    raw = (rep / "index.html").read_text(encoding="utf-8")
    assert "<script" not in raw and "<img src=x" not in raw
    assert "evil&lt;script&gt;alert(1)&lt;script&gt;&amp;" in raw
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in raw
    assert name in "".join(parse(rep).text)  # the text a browser shows is the name itself


# ---- missing images ----------------------------------------------------------------------------
def test_missing_images_are_placeholders_with_notes(setup, tmp_path, capsys):
    run = copy_run(setup["runs"][0], tmp_path / "results" / "small" / "copy")
    outputs = json.loads((run / "run.json").read_text())["outputs"]
    moved = tmp_path / "moved_outputs"
    shutil.copytree(Path(outputs[0]["path"]).parent, moved)
    data = json.loads((run / "run.json").read_text())
    data["outputs_dir"] = str(moved)
    for o in data["outputs"]:
        o["path"] = str(moved / Path(o["path"]).name)
    assert data["dataset"]["manifest"] == str(Path(setup["manifest"]).resolve())
    data["dataset"]["manifest"] = str(tmp_path / "gone" / "track.yaml")  # the local track moved away
    (run / "run.json").write_text(json.dumps(data))
    (moved / f"{outputs[1]['pair']}.png").unlink()  # one output gone
    rep = tmp_path / "rep"
    # No --track and the recorded manifest is gone: a local track cannot be found from its id, so
    # content/style/reference are placeholders.
    code, err = run_cli(["report", str(run), "--out", str(rep)], capsys)
    assert code == 0, err
    page = parse(rep)
    raw = (rep / "index.html").read_text(encoding="utf-8")
    thumbs = [s for s in page.srcs if s.startswith("thumbs/")]
    assert len(thumbs) == N_PAIRS - 1  # the outputs that exist
    assert raw.count('class="placeholder"') == N_PAIRS * 3 + 1
    assert "could not be opened" in raw and "--track" in raw
    assert f"pair {outputs[1]['pair']}, alpha: output file" in raw


def test_local_track_found_by_the_manifest_run_json_records(setup, tmp_path, capsys):
    rep = tmp_path / "rep"
    code, err = run_cli(["report", *map(str, setup["runs"]), "--out", str(rep)], capsys)  # no --track
    assert code == 0, err
    raw = (rep / "index.html").read_text(encoding="utf-8")
    assert 'class="placeholder"' not in raw and "could not be opened" not in raw
    thumbs = [s for s in parse(rep).srcs if s.startswith("thumbs/")]
    assert len(thumbs) == N_PAIRS * (3 + len(setup["runs"]))  # content, style, reference and each output


def test_incomplete_run_is_shown_with_its_failures(setup, tmp_path):
    out = make_outputs(setup["manifest"], tmp_path / "partial", strength=0.5)
    gone = sorted(out.glob("*.png"))[0]
    gone.unlink()
    argv = [
        "score",
        "--track",
        str(setup["manifest"]),
        "--outputs",
        str(out),
        "--name",
        "partial",
        "--results",
        str(tmp_path / "results"),
        "--protocol",
        str(setup["proto"]),
        "--no-cache",
    ]
    assert main(argv) == 1  # a pair failed: run files with complete: false
    rep = tmp_path / "rep"
    run = tmp_path / "results" / "small" / "partial"
    assert (
        main(
            [
                "report",
                str(setup["runs"][0]),
                str(run),
                "--out",
                str(rep),
                "--track",
                str(setup["manifest"]),
                "--max-pairs",
                "2",
            ]
        )
        == 0
    )
    raw = (rep / "index.html").read_text(encoding="utf-8")
    assert f"incomplete: {N_PAIRS - 1} of {N_PAIRS} pairs" in raw
    assert raw.count('<div class="pair">') == 2  # --max-pairs
    first_pair = raw.split('<div class="pair">')[1]
    assert gone.stem in first_pair and '<span class="badge no">failed</span>' in first_pair
    assert f"missing output for pair {gone.stem}" in first_pair


def test_wrong_track_is_refused(setup, tmp_path, capsys):
    other = make_track(tmp_path / "other", n=2, track_id="other")
    code, err = run_cli(
        ["report", str(setup["runs"][0]), "--out", str(tmp_path / "rep"), "--track", str(other)], capsys
    )
    assert code == 2
    assert "--track" in error_line(err) and "'other'" in error_line(err)


# ---- refusals ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field,edit",
    [
        ("track", lambda d: d.update(track="elsewhere")),
        ("dataset.revision", lambda d: d["dataset"].update(revision="0000")),
        ("protocol.sha256", lambda d: d["protocol"].update(sha256="ab" * 32)),
    ],
)
def test_incompatible_runs_are_refused(setup, tmp_path, capsys, field, edit):
    bad = copy_run(setup["runs"][1], tmp_path / "bad", edit=edit)
    code, err = run_cli(["report", str(setup["runs"][0]), str(bad), "--out", str(tmp_path / "rep")], capsys)
    assert code == 2
    line = error_line(err)
    assert str(bad) in line and f"run.json {field}" in line
    assert not (tmp_path / "rep").exists()


def test_a_paired_run_labelled_selection_is_refused(setup, tmp_path, capsys):
    """issue #42: selection runs are drawn (tests/selection/report/test_selection_report.py); a folder whose run.json says
    kind: selection but that holds a paired run's files is refused by the selection loader, in one line."""
    sel = copy_run(
        setup["runs"][0],
        tmp_path / "sel",
        edit=lambda d: d.update(kind="selection"),
        edit_summary=lambda d: d.update(kind="selection"),
    )
    code, err = run_cli(["report", str(sel), "--out", str(tmp_path / "rep")], capsys)
    assert code == 2
    line = error_line(err)
    assert str(sel) in line and "selection run folder (missing per_task.csv)" in line
    assert not (tmp_path / "rep").exists()


def test_missing_matplotlib_is_a_one_line_error(setup, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    code, err = run_cli(["report", str(setup["runs"][0]), "--out", str(tmp_path / "rep")], capsys)
    assert code == 2
    assert f"fix: pip install -e '{SOURCE}[report]'" in error_line(err)  # issue #45 item 6: this source tree's extra


def test_module_import_is_cheap():
    code = (
        "import sys, pytest_pstbench.cli.report, pytest_pstbench.report.build; "
        "heavy = [m for m in ('numpy', 'PIL', 'matplotlib', 'yaml', 'torch') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- sensitivity -------------------------------------------------------------------------------
def analysis_for(setup) -> dict:
    """A hand-written analysis.json following `pstbench sensitivity`'s schema."""
    run = json.loads((setup["runs"][0] / "run.json").read_text())
    metrics = protocol_metrics(setup["proto"])
    ranked = [m for m, p in metrics.items() if p["ranked"]]
    variants = [
        {"id": "protocol", "description": "the protocol as written", "file": "protocols/pstbench.yaml", "changes": {}},
        {
            "id": "ssim_uniform7",
            "description": "SSIM with skimage defaults",
            "file": "protocols/variants/x.yaml",
            "changes": {"metrics.ssim.gaussian_weights": False},
        },
        {
            "id": "lpips_vgg",
            "description": "LPIPS with VGG",
            "file": "protocols/variants/x.yaml",
            "changes": {"metrics.lpips.net": "vgg"},
        },
    ]
    rankings = {v["id"]: {m: ["beta", "alpha"] for m in ranked} for v in variants[:2]}
    rankings["ssim_uniform7"]["ssim"] = ["alpha", "beta"]
    aggregates = {v: {m: {"alpha": 0.5, "beta": 0.6} for m in ranked} for v in rankings}
    kendall = {v: {m: {"tau": 1.0, "pvalue": 1.0} for m in ranked} for v in rankings}
    kendall["ssim_uniform7"]["ssim"] = {"tau": -1.0, "pvalue": 1.0}
    # A tie under ssim_uniform7 for H-Corr(gt): `ranks` (ties share the lowest rank) takes precedence over positions.
    ranks = {v: {m: {x: i + 1 for i, x in enumerate(order)} for m, order in per.items()} for v, per in rankings.items()}
    ranks["ssim_uniform7"]["hcorr_gt"] = {"beta": 1, "alpha": 1}
    return {
        "ranks": ranks,
        "track": run["track"],
        "protocol": run["protocol"]["id"],
        "protocol_sha256": run["protocol"]["sha256"],
        "dataset_revision": run["dataset"]["revision"],
        "methods": ["alpha", "beta"],
        "metrics": {
            m: {"label": metrics[m]["label"], "higher_is_better": metrics[m]["higher_is_better"]} for m in ranked
        },
        "variants": variants,
        "aggregates": aggregates,
        "rankings": rankings,
        "kendall_tau": kendall,
        "swaps": [
            {
                "variant": "ssim_uniform7",
                "metric": "ssim",
                "a": "alpha",
                "b": "beta",
                "base_order": ["beta", "alpha"],
                "variant_order": ["alpha", "beta"],
                "base_p_holm": 0.012,
                "variant_p_holm": 0.31,
                "base_significant": True,
                "variant_significant": False,
            }
        ],
        "unavailable": [
            {"variant": "lpips_vgg", "metric": m, "reason": "protocol has no <lpips> metric"} for m in ranked
        ],
        "timings": {"total_s": 1.5},
    }


def test_sensitivity_section(setup, tmp_path):
    sens = tmp_path / "sens"
    sens.mkdir()
    analysis = analysis_for(setup)
    (sens / "analysis.json").write_text(json.dumps(analysis))
    rep = tmp_path / "rep"
    assert (
        main(["report", *map(str, setup["runs"]), "--out", str(rep), "--sensitivity", str(sens), "--max-pairs", "1"])
        == 0
    )
    raw = (rep / "index.html").read_text(encoding="utf-8")
    page = parse(rep)
    assert "sensitivity" in page.ids and "swaps" in page.ids
    assert (rep / "figures" / "sensitivity_tau.png").is_file()
    bumps = sorted((rep / "figures").glob("sensitivity_rank_*.png"))
    assert len(bumps) == len(analysis["metrics"])
    for link in page.srcs:
        assert (rep / link).is_file()
    # The swapped pair is highlighted with its significance.
    sig_rows = raw.split('<table id="swaps">')[1].split("</table>")[0]
    assert sig_rows.count('<tr class="sig">') == 1 and "0.012" in sig_rows and "significant" in sig_rows
    # SSIM under ssim_uniform7: both methods change rank (1 <-> 2), and tau -1 is shown.
    ssim_table = raw.split(f"<summary>{analysis['metrics']['ssim']['label']}↑")[1].split("</details>")[0]
    assert ssim_table.count('class="num changed"') == 2
    assert "-1.000" in ssim_table
    # Other metrics: no change.
    psnr_table = raw.split(f"<summary>{analysis['metrics']['psnr']['label']}↑")[1].split("</details>")[0]
    assert "no rank change" in raw.split(f"<summary>{analysis['metrics']['psnr']['label']}↑")[1][:40]
    assert 'class="num changed"' not in psnr_table
    # The tie: alpha moves from rank 2 to a shared rank 1; beta keeps rank 1.
    hc = raw.split(f"<summary>{analysis['metrics']['hcorr_gt']['label']}↑")[1].split("</details>")[0]
    assert hc.count('class="num changed"') == 1 and "1 (▲1)" in hc
    # Unavailable variants are listed with their reason (escaped).
    assert "protocol has no &lt;lpips&gt; metric" in raw
    assert raw.count("unavailable: protocol has no &lt;lpips&gt; metric") == len(analysis["metrics"])


@pytest.mark.parametrize(
    "content,expect",
    [
        (lambda a: a.pop("rankings"), "missing key 'rankings'"),
        (lambda a: a.update(variants={}), "'variants' must be a JSON array"),
        (lambda a: a["swaps"][0].pop("variant_significant"), "swaps[0]"),
        (lambda a: a.update(track="elsewhere"), "track is 'elsewhere'"),
        ("not json {", "not valid JSON"),
        ("[1, 2]", "not a sensitivity analysis"),
    ],
)
def test_bad_analysis_is_a_one_line_error(setup, tmp_path, capsys, content, expect):
    sens = tmp_path / "sens"
    sens.mkdir()
    if callable(content):
        a = analysis_for(setup)
        content(a)
        content = json.dumps(a)
    (sens / "analysis.json").write_text(content)
    code, err = run_cli(
        ["report", str(setup["runs"][0]), "--out", str(tmp_path / "rep"), "--sensitivity", str(sens)], capsys
    )
    assert code == 2
    line = error_line(err)
    assert expect in line and "analysis.json" in line


def test_sensitivity_folder_without_analysis(setup, tmp_path, capsys):
    code, err = run_cli(
        ["report", str(setup["runs"][0]), "--out", str(tmp_path / "rep"), "--sensitivity", str(setup["runs"][1])],
        capsys,
    )
    assert code == 2 and "analysis.json not found" in error_line(err)


# ---- rendering in a browser --------------------------------------------------------------------
CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
def test_page_renders_in_headless_chromium(report, tmp_path):
    shot = tmp_path / "shot.png"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1200,2000",
        (report / "index.html").resolve().as_uri(),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    with Image.open(shot) as im:
        assert im.size == (1200, 2000)
        px = np.asarray(im.convert("RGB"), dtype=float)
    assert px.std() > 20  # not blank
    # The page's dark header band is drawn at the top, and thumbnails/figures add many colours below.
    assert px[:40, :, :].mean() < 80
    assert len(np.unique(px[400:].reshape(-1, 3), axis=0)) > 1000

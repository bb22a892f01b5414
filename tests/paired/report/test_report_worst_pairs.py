"""Issue #45 item 9 (the report's part): with two or more runs, `pstbench report` has a Worst pairs section:
per ranked metric, the pairs each run lost most on against the first run, largest loss first, each linked to
the pair's thumbnails (a plain anchor). Values checked against a hand computation from the runs' metrics.csv."""

from __future__ import annotations

import csv
from html.parser import HTMLParser

import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main


class Worst(HTMLParser):
    """The Worst pairs tables: (metric, run index) -> rows of (href or None, pair, base, value, loss, cell texts)."""

    def __init__(self):
        super().__init__()
        self.tables, self.ids, self.nav = {}, set(), []
        self._table = self._row = self._href = None
        self._td = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self._href = a["href"]
            self.nav.append(a["href"])
        if tag == "table" and "data-worst-metric" in a:
            self._table = self.tables.setdefault((a["data-worst-metric"], int(a["data-worst-run"])), [])
        if self._table is not None and tag == "tr":
            self._row = {"cells": [], "href": None}
        if self._row is not None and tag == "td":
            self._td = []
            self._row.update({k: v for k, v in a.items() if k.startswith("data-worst-")})

    def handle_endtag(self, tag):
        if tag == "td" and self._td is not None:
            self._row["cells"].append("".join(self._td).strip())
            self._td = None
        if tag == "a" and self._row is not None and self._href:
            self._row["href"] = self._href
        if tag == "a":
            self._href = None
        if tag == "tr" and self._row is not None:
            if self._row["cells"]:
                self._table.append(self._row)
            self._row = None
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._td is not None:
            self._td.append(data)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline and a candidate equal to it but on three pairs, made worse by three amounts."""
    root = tmp_path_factory.mktemp("worst_report")
    manifest = make_track(root / "track", n=6)
    proto = protocol_without_lpips(root / "proto.yaml")
    base = make_outputs(manifest, root / "base", 0.6)
    cand = make_outputs(manifest, root / "cand", 0.6)
    for pid, strength in (("p02", 0.4), ("p04", 0.1), ("p05", 0.25)):
        make_outputs(manifest, root / f"far{pid}", strength)
        (cand / f"{pid}.png").write_bytes((root / f"far{pid}" / f"{pid}.png").read_bytes())
    for name, out in (("base", base), ("cand", cand)):
        assert (
            main(
                [
                    "score",
                    "--track",
                    str(manifest),
                    "--outputs",
                    str(out),
                    "--name",
                    name,
                    "--results",
                    str(root / "results"),
                    "--protocol",
                    str(proto),
                    "--no-cache",
                ]
            )
            == 0
        )
    return root, manifest, proto, root / "results" / "small"


def _report(runs, *names, extra=()):
    root, manifest, proto, results = runs
    out = root / ("report-" + "-".join(names) + "".join(extra))
    assert (
        main(["report", *(str(results / n) for n in names), "--out", str(out), "--track", str(manifest), *extra]) == 0
    )
    p = Worst()
    p.feed((out / "index.html").read_text(encoding="utf-8"))
    return p


def _column(path, metric):
    with open(path, newline="") as f:
        return {r["pair_id"]: float(r[metric]) for r in csv.DictReader(f)}


def test_section_per_ranked_metric_ordered_by_loss_values_match_metrics_csv(runs, capsys):
    root, manifest, proto, results = runs
    page = _report(runs, "base", "cand", extra=("--worst", "2"))
    metrics = yaml.safe_load(proto.read_text())["metrics"]
    ranked = [m for m, p in metrics.items() if p["ranked"]]
    assert {m for m, _ in page.tables} <= set(ranked) and "#worst" in page.nav
    order = list(_column(results / "base" / "metrics.csv", "psnr"))
    for m in ranked:
        p = metrics[m]
        a, b = _column(results / "base" / "metrics.csv", m), _column(results / "cand" / "metrics.csv", m)
        loss = {k: (a[k] - b[k]) if p["higher_is_better"] else (b[k] - a[k]) for k in a}
        expected = sorted((k for k in loss if loss[k] > 0), key=lambda k: (-loss[k], k))[:2]
        rows = page.tables.get((m, 1), [])
        assert [r["data-worst-pair"] for r in rows] == expected, m
        dec = int(p.get("decimals", 4)) + 1
        for r in rows:
            k = r["data-worst-pair"]
            assert float(r["data-worst-base"]) == a[k] and float(r["data-worst-value"]) == b[k]
            assert float(r["data-worst-loss"]) == loss[k]
            assert r["cells"] == [k, f"{a[k]:.{dec}f}", f"{b[k]:.{dec}f}", f"{loss[k]:.{dec}f}"]
            assert r["href"] == f"#pair-{order.index(k)}" and r["href"][1:] in page.ids  # the pair's thumbnails
    psnr = [r["data-worst-pair"] for r in page.tables[("psnr", 1)]]
    assert psnr == ["p04", "p05"]  # made worse the most, then the next


def test_no_section_for_one_run_or_worst_0_and_a_negative_worst_is_refused(runs, capsys):
    root, manifest, proto, results = runs
    for page in (_report(runs, "base"), _report(runs, "base", "cand", extra=("--worst", "0"))):
        assert not page.tables and "worst" not in page.ids and "#worst" not in page.nav
    page = _report(runs, "cand", "base")  # base lost on no pair against cand
    assert "worst" in page.ids and not page.tables
    code = main(["report", str(results / "base"), str(results / "cand"), "--out", str(root / "r-neg"), "--worst", "-1"])
    err = capsys.readouterr().err
    assert code == 2 and "--worst -1: must be 0 (no Worst pairs section) or a positive number" in err
    assert "Traceback" not in err


def test_pairs_beyond_max_pairs_are_named_without_a_link(runs):
    page = _report(runs, "base", "cand", extra=("--max-pairs", "2"))
    rows = page.tables[("psnr", 1)]
    assert rows[0]["data-worst-pair"] == "p04" and rows[0]["href"] is None
    assert "(not shown: --max-pairs)" in rows[0]["cells"][0]

"""Issue #46 "Clustered intervals": pairs that share a content or style image form clusters; the shipped variant
`clustered` (`--protocol pstbench+clustered`) resamples whole clusters in the bootstrap and tests cluster-mean
differences with a sign-flip permutation test; a track that declares no clusters but shares input files gets one
warning line. Checked against independent computations: a coverage simulation written here, a plain-loop
enumeration of sign patterns, scipy.stats.permutation_test."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats
import yaml
from PIL import Image

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.stats import bootstrap_mean_ci, cluster_bootstrap_mean_ci, sign_flip_test

CLUSTERED = load_protocol("pstbench+clustered")


# ---- the variant is data, applied by name ------------------------------------------------------------------
def test_variant_is_named_data_and_default_protocol_untouched():
    base = load_protocol()
    raw = yaml.safe_load((Path(CLUSTERED.path)).read_text())
    assert CLUSTERED.id == "pstbench+clustered" and raw["id"] == "clustered"
    assert CLUSTERED.aggregation.bootstrap.unit == "cluster" and CLUSTERED.comparison.bootstrap.unit == "cluster"
    sf = raw["changes"]["comparison"]["sign_flip"]
    assert CLUSTERED.comparison.sign_flip.kwargs() == sf  # parameters from the file, none in code
    # the other statistics stay the base protocol's; the base protocol resamples pairs
    assert CLUSTERED.aggregation.bootstrap.kwargs() == base.aggregation.bootstrap.kwargs()
    assert base.aggregation.bootstrap.unit == "pair" and base.comparison.test == "wilcoxon"
    import hashlib

    assert (
        CLUSTERED.sha256
        == hashlib.sha256(
            f"{base.sha256}+{hashlib.sha256(Path(CLUSTERED.path).read_bytes()).hexdigest()}".encode()
        ).hexdigest()
    )


def test_unknown_variant_and_cluster_unit_with_median_are_refused(tmp_path):
    with pytest.raises(UserError, match="no shipped variant 'clusterd'.*clustered") as exc:
        load_protocol("pstbench+clusterd")
    assert "\n" not in str(exc.value)
    data = yaml.safe_load(load_protocol().path.read_text())
    data["aggregation"]["statistic"] = "median"
    data["aggregation"]["bootstrap"]["unit"] = "cluster"
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="unit cluster .* needs the statistic mean"):
        load_protocol(p)
    data["aggregation"]["statistic"] = "mean"
    data["comparison"]["sign_flip"] = {"exact_max_clusters": 3, "resamples": 10, "seed": 0}
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="sign_flip applies only with comparison.test cluster_sign_flip"):
        load_protocol(p)


# ---- (2) coverage simulation: clusters with a planted random effect ------------------------------------------
def test_cluster_bootstrap_covers_the_true_mean_where_the_pair_bootstrap_does_not():
    """12 clusters x 4 pairs; a cluster effect of sd 1 against pair noise of sd 0.25; true mean 0. Over 200 seeded
    simulations the 95% cluster bootstrap covers 0 in about 95% of them, the pair bootstrap clearly less."""
    kw = CLUSTERED.aggregation.bootstrap.kwargs()
    assert kw["confidence"] == 0.95
    kw = {**kw, "resamples": 2000}  # enough for coverage; the stream is the protocol's
    rng = np.random.default_rng(46)
    k, m, sims = 12, 4, 200
    labels = np.repeat(np.arange(k), m)
    effects = rng.normal(0.0, 1.0, size=(sims, k))
    values = effects[:, labels] + rng.normal(0.0, 0.25, size=(sims, k * m))
    cluster_cover = pair_cover = 0
    for x in values:
        c = cluster_bootstrap_mean_ci(x, labels, **kw)
        p = bootstrap_mean_ci(x, **kw)
        cluster_cover += c.ci_low <= 0.0 <= c.ci_high
        pair_cover += p.ci_low <= 0.0 <= p.ci_high
    assert 0.90 <= cluster_cover / sims <= 0.99, cluster_cover
    assert pair_cover / sims < 0.85, pair_cover


def test_cluster_bootstrap_equals_a_plain_loop():
    """Resample i draws K cluster indices with rng.integers(0, K, K); its mean is over every pair of the drawn clusters."""
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 0.5, 3.0])
    labels = ["a", "a", "b", "c", "c", "c", "d"]
    got = cluster_bootstrap_mean_ci(x, labels, confidence=0.9, resamples=500, seed=3)
    groups = [x[[i for i, l in enumerate(labels) if l == name]] for name in dict.fromkeys(labels)]
    rng = np.random.default_rng(3)
    means = []
    for _ in range(500):
        drawn = [groups[j] for j in rng.integers(0, len(groups), len(groups))]
        means.append(np.concatenate(drawn).mean())
    assert (got.ci_low, got.ci_high) == tuple(np.quantile(means, [0.05, 0.95]))
    assert got.mean == x.mean()


# ---- (3) the sign-flip test: exact enumeration and Monte Carlo ---------------------------------------------
def plain_sign_flip(means, alternative):
    """Every sign pattern, one by one: the share at least as extreme as the observed mean."""
    t = float(np.mean(means))
    count = total = 0
    for signs in itertools.product((1, -1), repeat=len(means)):
        s = sum(si * mi for si, mi in zip(signs, means)) / len(means)
        total += 1
        if alternative == "two-sided":
            count += abs(s) >= abs(t) - 1e-12
        elif alternative == "greater":
            count += s >= t - 1e-12
        else:
            count += s <= t + 1e-12
    return count / total


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_sign_flip_exact_equals_plain_enumeration_and_scipy(alternative):
    means = [0.8, -0.3, 1.1, 0.25, 0.6, -0.05, 0.9, 0.4, 0.3]
    got = sign_flip_test(means, alternative=alternative, exact_max_clusters=16, resamples=10, seed=0)
    assert got.pvalue == plain_sign_flip(means, alternative)
    ref = scipy.stats.permutation_test(
        (np.array(means),), np.mean, permutation_type="samples", n_resamples=np.inf, alternative=alternative
    )
    assert got.pvalue == pytest.approx(ref.pvalue, rel=1e-12)
    assert got.statistic == pytest.approx(np.mean(means))
    # the protocol's settings: 9 clusters are enumerated exactly (2^9 patterns)
    proto = sign_flip_test(means, alternative=alternative, **CLUSTERED.comparison.sign_flip.kwargs())
    assert proto.pvalue == got.pvalue and got.pvalue * 2**9 == round(got.pvalue * 2**9)


def test_sign_flip_monte_carlo_equals_a_plain_loop():
    """Above exact_max_clusters: `resamples` patterns from default_rng(seed), p = (1 + count) / (1 + resamples)."""
    rng0 = np.random.default_rng(5)
    means = rng0.normal(0.3, 1.0, 20)
    got = sign_flip_test(means, alternative="two-sided", exact_max_clusters=10, resamples=3000, seed=11)
    rng = np.random.default_rng(11)
    t, count = abs(means.mean()), 0
    for _ in range(3000):
        signs = 1 - 2 * rng.integers(0, 2, means.size)
        count += abs((signs * means).mean()) >= t - 1e-12 * np.abs(means).sum() / means.size
    assert got.pvalue == (1 + count) / 3001
    exact = sign_flip_test(means[:12], alternative="two-sided", exact_max_clusters=12, resamples=1, seed=0)
    assert exact.pvalue == plain_sign_flip(list(means[:12]), "two-sided")


def test_compare_under_the_variant_tests_cluster_means():
    """compare_two under pstbench+clustered: the statistic and p of the sign-flip test of the cluster means of the
    tied differences (a plain enumeration), the cluster bootstrap of the mean difference, the clusters counted."""
    from pytest_pstbench.paired.compare import compare_two, finish_comparison

    ids = [f"p{i:02d}" for i in range(20)]
    labels = {p: f"c{i // 2}" for i, p in enumerate(ids)}
    a = np.linspace(20, 21, 20)
    d = np.array([0.5, 0.7, -0.2, 0.1, 0.9, 1.2, 0.0004, 0.3, 0.6, 0.4] * 2) * np.repeat([1.0, -0.5], 10)

    def mk(name, vals):
        return SimpleNamespace(
            name=name,
            path=Path(name),
            run={"clusters": {"pairs": labels}},  # noqa: E731
            scores={p: {"psnr": float(v)} for p, v in zip(ids, vals)},
        )

    row = compare_two(mk("base", a), mk("cand", a + d), CLUSTERED, ["psnr"])[0]
    tied = (a + d) - a
    tied[np.abs(tied) < CLUSTERED.comparison.tie("psnr")] = 0
    cm = [tied[2 * c : 2 * c + 2].mean() for c in range(10)]
    assert row.clusters == 10 and row.n == 20
    assert row.pvalue == plain_sign_flip(cm, "two-sided") and row.statistic == pytest.approx(np.mean(cm))
    ci = cluster_bootstrap_mean_ci((a + d) - a, [labels[p] for p in ids], **CLUSTERED.comparison.bootstrap.kwargs())
    assert (row.diff_ci_low, row.diff_ci_high) == (ci.ci_low, ci.ci_high)
    comp = finish_comparison([row], CLUSTERED)
    assert comp.to_json()["tests"][0]["clusters"] == 10
    # the default protocol's JSON has no `clusters` key
    plain = compare_two(mk("base", a), mk("cand", a + d), load_protocol(), ["psnr"])[0]
    assert "clusters" not in finish_comparison([plain], load_protocol()).to_json()["tests"][0]


# ---- (4) shared input files: detected by digest, one warning line -------------------------------------------
def _png(path: Path, seed: int):
    arr = np.random.default_rng(seed).integers(0, 256, size=(32, 24, 3), dtype=np.uint8)
    Image.fromarray(arr).save(path)


def shared_track(tmp_path: Path, clusters=None) -> Path:
    """6 pairs; content a.png is used by p1, p2, p3 and a byte-identical copy a_copy.png by p4; the styles are distinct."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    _png(tmp_path / "a.png", 1)
    (tmp_path / "a_copy.png").write_bytes((tmp_path / "a.png").read_bytes())
    pairs = []
    for i in range(1, 7):
        _png(tmp_path / f"s{i}.png", 10 + i)
        _png(tmp_path / f"r{i}.png", 20 + i)
        if i > 4:
            _png(tmp_path / f"c{i}.png", 30 + i)
        content = {1: "a.png", 2: "a.png", 3: "a.png", 4: "a_copy.png"}.get(i, f"c{i}.png")
        pairs.append({"id": f"p{i}", "content": content, "style": f"s{i}.png", "reference": f"r{i}.png"})
        if clusters is not None:
            pairs[-1]["cluster"] = clusters[i - 1]
    m = tmp_path / "track.yaml"
    m.write_text(yaml.safe_dump({"id": "shared", "pairs": pairs}, sort_keys=False))
    return m


def test_shared_inputs_are_detected_and_named_once(tmp_path, capsys):
    from pytest_pstbench.paired import clusters
    from pytest_pstbench.paired.tracks import load_manifest

    track = load_manifest(shared_track(tmp_path))
    labels, source = clusters.track_clusters(track)
    assert source == clusters.SHARED_INPUTS
    assert labels == {"p1": "p1", "p2": "p1", "p3": "p1", "p4": "p1", "p5": "p5", "p6": "p6"}
    note = clusters.shared_note(track, load_protocol())
    assert note is not None and "\n" not in note
    assert "content a.png (4 pairs: p1, p2, p3 ...)" in note
    assert "cluster" in note and "--protocol pstbench+clustered" in note
    clusters._WARNED.discard((track.id, track.revision))
    clusters.warn_shared_once(track, load_protocol())
    clusters.warn_shared_once(track, load_protocol())
    err = capsys.readouterr().err
    assert err.count("pstbench: warning: track shared: pairs share input images") == 1
    # nothing to say under the clustered variant, or where the track declares clusters
    assert clusters.shared_note(track, CLUSTERED) is None
    declared = load_manifest(shared_track(tmp_path / "d", ["x", "x", "x", "x", "y", "z"]))
    assert clusters.shared_note(declared, load_protocol()) is None
    assert clusters.track_clusters(declared) == (
        {"p1": "x", "p2": "x", "p3": "x", "p4": "x", "p5": "y", "p6": "z"},
        clusters.DECLARED,
    )


def test_no_warning_without_shared_files(tmp_path):
    from pytest_pstbench.paired.clusters import shared_note
    from pytest_pstbench.paired.tracks import load_manifest

    m = shared_track(tmp_path)
    data = yaml.safe_load(m.read_text())
    for i, p in enumerate(data["pairs"][:4], start=1):
        _png(tmp_path / f"own{i}.png", 50 + i)
        p["content"] = f"own{i}.png"
    m.write_text(yaml.safe_dump(data))
    assert shared_note(load_manifest(m), load_protocol()) is None


# ---- (5) bad cluster declarations --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, rule",
    [
        ("", "is not a name"),
        ("  ", "is not a name"),
        (3, "is not a name"),
        (["a"], "is not a name"),
        (None, "is not a name"),
    ],
)
def test_bad_cluster_values_are_one_line_errors(tmp_path, value, rule):
    from pytest_pstbench.paired.tracks import load_manifest

    m = shared_track(tmp_path, ["x", "x", value, "x", "y", "z"])
    with pytest.raises(UserError) as exc:
        load_manifest(m)
    msg = str(exc.value)
    assert "\n" not in msg and str(m) in msg and "pair p3" in msg and rule in msg and "fix:" in msg


def test_partial_cluster_declaration_is_refused(tmp_path):
    from pytest_pstbench.paired.tracks import load_manifest

    m = shared_track(tmp_path)
    data = yaml.safe_load(m.read_text())
    data["pairs"][0]["cluster"] = "x"
    m.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match="pair p2 has no cluster but other pairs declare one") as exc:
        load_manifest(m)
    assert "\n" not in str(exc.value)


# ---- end to end: a run scored under the variant records its clusters and validates ------------------------
def test_score_compare_and_table_under_the_variant(tmp_path, capsys):
    from helpers.protocols import protocol_without_lpips
    from helpers.tracks import make_outputs

    from pytest_pstbench import api
    from pytest_pstbench.cli import main

    base = protocol_without_lpips(tmp_path / "nolpips.yaml")
    m = shared_track(tmp_path / "t", ["x", "x", "x", "x", "y", "z"])
    make_outputs(m, tmp_path / "oa", 0.3)
    make_outputs(m, tmp_path / "ob", 0.6)
    spec = f"{base}+clustered"
    for name in ("a", "b"):
        api.score(m, tmp_path / f"o{name}", name=name, results=tmp_path / "res", protocol=spec, use_cache=False)
    api.score(m, "identity", results=tmp_path / "res", protocol=spec, use_cache=False)
    run = json.loads((tmp_path / "res/shared/a/run.json").read_text())
    assert run["protocol"]["id"] == "pstbench+clustered"  # the copy keeps the id pstbench; --protocol finds its file
    why = "no interval: 3 clusters, fewer than the 10 a cluster bootstrap needs (bootstrap.min_clusters)"
    assert run["clusters"] == {
        "source": "declared",
        "n": 3,
        "pairs": {"p1": "x", "p2": "x", "p3": "x", "p4": "x", "p5": "y", "p6": "z"},
        "no_interval": why,  # issue #54 (10): 3 clusters are fewer than the variant's min_clusters (10)
    }
    summary = json.loads((tmp_path / "res/shared/a/summary.json").read_text())
    entry = summary["metrics"]["psnr"]
    assert entry["interval"] == "cluster bootstrap" and entry["clusters"] == 3 and entry["no_interval"] == why
    assert (entry["ci_low"], entry["ci_high"], entry["pm"]) == (None, None, None)
    scores = [float(r["psnr"]) for r in csv.DictReader(open(tmp_path / "res/shared/a/metrics.csv"))]
    assert entry["mean"] == pytest.approx(np.mean(scores), rel=1e-12)  # the mean stands
    from pytest_pstbench.paired.tables import run_table

    table = run_table(load_protocol(spec), [("a", summary)])
    assert f"{entry['mean']:.2f} (no CI: 3 clusters)" in table and "±" not in table
    capsys.readouterr()
    code = main(["compare", str(tmp_path / "res/shared/a"), str(tmp_path / "res/shared/b"), "--protocol", spec])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0 and "95% cluster CI" in out and "T (cluster mean)" in out and "(no CI: 3 clusters)" in out
    assert "with 3 clusters (6 pairs) per test the smallest p-value a test can give is 0.25" in captured.err + out
    code = main(["table", str(tmp_path / "res/shared/a"), str(tmp_path / "res/shared/b"), "--protocol", spec])
    out = capsys.readouterr().out
    flat = " ".join(out.split()).replace("\\_", "_")  # the notes are wrapped Markdown
    assert (
        code == 0 and "95% cluster bootstrap CI over 3 clusters (declared)" in flat and f"A mean alone: {why}" in flat
    )
    code = main(
        [
            "report",
            str(tmp_path / "res/shared/a"),
            str(tmp_path / "res/shared/b"),
            "--out",
            str(tmp_path / "page"),
            "--protocol",
            spec,
        ]
    )
    page = (tmp_path / "page" / "index.html").read_text()
    assert code == 0 and "half the width of the 95% cluster bootstrap CI over 3 clusters" in page and why in page
    # the gate: b (the better run) as the baseline of a: the sign-flip test over 3 clusters cannot reach alpha
    from pytest_pstbench.core.compare import gate_against_baselines
    from pytest_pstbench.core.gate import GateResult

    result = GateResult()
    gate_against_baselines(
        result, tmp_path / "res/shared/a", [tmp_path / "res/shared/b"], load_protocol(spec), ["psnr"]
    )
    row = result.comparison.rows[0]
    assert row.clusters == 3 and row.pvalue == 0.25  # all 3 clusters worse: 2 of the 2^3 sign patterns as extreme


def test_scoring_warns_once_on_stderr_and_writes_no_cluster_field(tmp_path, capsys):
    """Scored under the default protocol (here without LPIPS), a track with shared content files gets the warning on
    stderr, and its run files have no trace of clusters."""
    from helpers.protocols import protocol_without_lpips
    from helpers.tracks import make_outputs

    from pytest_pstbench import api
    from pytest_pstbench.paired import clusters
    from pytest_pstbench.paired.tracks import load_manifest

    base = protocol_without_lpips(tmp_path / "nolpips.yaml")
    m = shared_track(tmp_path / "t")
    track = load_manifest(m)
    clusters._WARNED.discard((track.id, track.revision))
    make_outputs(m, tmp_path / "oa", 0.3)
    capsys.readouterr()
    api.score(m, tmp_path / "oa", name="a", results=tmp_path / "res", protocol=str(base), use_cache=False)
    err = capsys.readouterr().err
    assert err.count("pstbench: warning: track shared: pairs share input images (content a.png (4 pairs") == 1
    run = json.loads((tmp_path / "res/shared/a/run.json").read_text())
    summary = (tmp_path / "res/shared/a/summary.json").read_text()
    assert "clusters" not in run and "cluster" not in summary


# ---- issue #54 (10): an interval over too few clusters is refused, with the protocol's reason ----------------
def test_min_clusters_is_the_variants_data_and_its_reason_holds():
    """The floor is read from the variant file (never code), and it is what its description argues: the smallest K
    at which the nominal 95% percentile cluster bootstrap of normal cluster means covers at least 90%, i.e.
    P(|t_(K-1)| < z sqrt((K-1)/K)) >= 0.90 (computed here with scipy)."""
    raw = yaml.safe_load(Path(CLUSTERED.path).read_text())["changes"]
    floor = raw["aggregation"]["bootstrap"]["min_clusters"]
    assert raw["comparison"]["bootstrap"]["min_clusters"] == floor
    assert CLUSTERED.aggregation.bootstrap.min_clusters == floor == CLUSTERED.comparison.bootstrap.min_clusters
    z = scipy.stats.norm.ppf(0.975)

    def coverage(k):
        return 2 * scipy.stats.t.cdf(z * np.sqrt((k - 1) / k), k - 1) - 1

    assert coverage(floor) >= 0.90 > coverage(floor - 1)
    assert load_protocol().aggregation.bootstrap.min_clusters is None  # the base protocol resamples pairs


def _protocol_with_floor(floor):
    from dataclasses import replace

    boot = replace(CLUSTERED.aggregation.bootstrap, min_clusters=floor)
    return SimpleNamespace(
        aggregation=SimpleNamespace(bootstrap=boot, statistic_of=CLUSTERED.aggregation.statistic_of),
        metrics=CLUSTERED.metrics,
    )


@pytest.mark.parametrize("k", [1, 2, 3, 9, 10, 12])
def test_summary_entry_gives_no_interval_over_fewer_clusters_than_the_floor(k):
    """One cluster used to give `19.98 ± 0.00` (a zero-width interval, exit 0, no word): now below the protocol's
    floor the entry keeps the mean and says why instead of an interval; at or above it, the cluster bootstrap."""
    from pytest_pstbench.paired.aggregation import summary_entry
    from pytest_pstbench.paired.tables import run_table

    floor = CLUSTERED.aggregation.bootstrap.min_clusters
    rng = np.random.default_rng(k)
    values = 19.98 + rng.normal(0, 1, 3 * k)
    labels = [f"c{i % k}" for i in range(3 * k)]
    entry = summary_entry(values, CLUSTERED, "psnr", labels)
    assert entry["mean"] == pytest.approx(values.mean(), rel=1e-12) and entry["clusters"] == k
    if k < floor:
        assert (entry["ci_low"], entry["ci_high"], entry["pm"]) == (None, None, None)
        assert entry["no_interval"] == (
            f"no interval: {k} cluster{'s' if k > 1 else ''}, fewer than the {floor} a cluster bootstrap needs "
            "(bootstrap.min_clusters)"
        )
        summary = {"metrics": {"psnr": entry}}
        assert f"(no CI: {k} cluster{'s' if k > 1 else ''})" in run_table(CLUSTERED, [("m", summary)])
        # the floor is the protocol's: a protocol with a lower one gives the interval
        lower = summary_entry(values, _protocol_with_floor(k), "psnr", labels)
        assert "no_interval" not in lower and lower["pm"] is not None
    else:
        ci = cluster_bootstrap_mean_ci(values, labels, **CLUSTERED.aggregation.bootstrap.kwargs())
        assert (entry["ci_low"], entry["ci_high"]) == (ci.ci_low, ci.ci_high) and "no_interval" not in entry


def test_compare_gives_no_difference_interval_over_too_few_clusters():
    from pytest_pstbench.paired.compare import compare_two

    ids = [f"p{i}" for i in range(8)]
    labels = {p: "one" for p in ids}  # every pair in one declared cluster

    def mk(name, vals):
        return SimpleNamespace(
            name=name,
            path=Path(name),
            run={"clusters": {"pairs": labels}},
            scores={p: {"psnr": v} for p, v in zip(ids, vals)},
        )

    a = np.linspace(19, 21, 8)
    row = compare_two(mk("base", a), mk("cand", a + 0.5), CLUSTERED, ["psnr"])[0]
    assert (row.diff_ci_low, row.diff_ci_high) == (None, None) and row.mean_diff == pytest.approx(0.5)
    assert row.clusters == 1


@pytest.mark.parametrize(
    "boot, rule",
    [
        ({"unit": "pair", "min_clusters": 5}, "aggregation.bootstrap.min_clusters applies only with"),
        ({"unit": "cluster", "min_clusters": 0}, "aggregation.bootstrap.min_clusters must be an integer >= 1"),
        ({"unit": "cluster", "min_clusters": "10"}, "aggregation.bootstrap.min_clusters must be an integer"),
    ],
)
def test_bad_min_clusters_is_refused(tmp_path, boot, rule):
    data = yaml.safe_load(load_protocol().path.read_text())
    data["aggregation"]["bootstrap"].update(boot)
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError, match=rule) as exc:
        load_protocol(p)
    assert "\n" not in str(exc.value)


def test_a_singleton_cluster_named_like_its_pair_keeps_the_declaration(tmp_path):
    """A pair alone in a cluster named after itself (`cluster: p5` on pair p5) is a declaration like any other: the
    track's clusters are the declared ones, not those of its shared input files (which would join p1..p4 and split
    p3 from x: a plausible bug that reads `cluster == id` as `no cluster`)."""
    from pytest_pstbench.paired import clusters
    from pytest_pstbench.paired.tracks import load_manifest

    declared = ["x", "x", "y", "y", "p5", "z"]
    track = load_manifest(shared_track(tmp_path, declared))
    labels, source = clusters.track_clusters(track)
    assert (labels, source) == ({f"p{i}": c for i, c in enumerate(declared, start=1)}, clusters.DECLARED)
    assert clusters.run_clusters(track, CLUSTERED)["n"] == 4
    assert clusters.scored_clusters(track, CLUSTERED, ["p1", "p3", "p5"]) == ["x", "y", "p5"]
    assert clusters.shared_note(track, load_protocol()) is None  # declared: no warning about shared files

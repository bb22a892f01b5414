"""Issue #32 item 17: every numeric protocol field has a documented range, checked at load. Sizes that
would make scoring allocate gigabytes (an `evaluate` size of 40000x40000, `bins: 2e9`, a bootstrap of
2e9 resamples) are one-line errors naming the file and the key; no numeric field takes NaN; each numeric
key of the shipped protocols and variants is listed in docs/protocol.md's "Ranges" table.
Found by the third audit (#32)."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import pytest
import yaml

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol, protocols_dir

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pstbench", "vab", "vab-lenient")
HUGE = 2_000_000_000


def _base(pid: str) -> dict:
    return yaml.safe_load(load_protocol(pid).path.read_text(encoding="utf-8"))


def _load(tmp_path: Path, data: dict):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return load_protocol(path)


def _numeric_leaves(node, path=()):
    """(path, value) of every number in a protocol (bools are not numbers); mapping keys that are numbers
    (consensus.thresholds' k) are paths too."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _numeric_leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numeric_leaves(v, (*path, i))
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        yield path, node


def _set(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return data


def _documented_key(pid_kind: str, path: tuple) -> str:
    """The key as docs/protocol.md's Ranges table names it: metric entries as metrics.*.KEY, list
    positions and numeric mapping keys dropped, per-metric and
    per-prompt-type keys as *."""
    parts = [str(p) for p in path if not isinstance(p, int)]
    if (pid_kind == "paired" and parts[0] == "metrics") or parts[0] == "prompt_types":
        parts[1] = "*"
    if parts[:2] == ["comparison", "tie_threshold"]:
        parts[2] = "*"
    return ".".join(parts)


def _variant_protocols():
    from pytest_pstbench.paired.variants import load_variant

    base = load_protocol()
    for path in sorted((protocols_dir() / "variants").glob("*.yaml")):
        yield path.stem, load_variant(path, base).protocol.data


def _all_shipped():
    for pid in SHIPPED:
        yield pid, ("selection" if _base(pid).get("kind") == "selection" else "paired"), _base(pid)
    for vid, data in _variant_protocols():
        yield vid, "paired", data


# ---- the cases --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, value, rule",
    [
        (
            "resolution.evaluate",
            {"mode": "fixed", "width": 40000, "height": 40000, "filter": "bicubic"},
            "resolution.evaluate is 40000 x 40000 = 1600000000 pixels, over the 64000000 pixels",
        ),
        (
            "resolution.evaluate",
            {"mode": "fixed", "width": 10**6, "height": 1, "filter": "bicubic"},
            "resolution.evaluate.width must be an integer >= 1 and <= 65535",
        ),
        (
            "resolution.evaluate",
            {"mode": "short_side", "pixels": HUGE, "filter": "bicubic"},
            "resolution.evaluate.pixels must be an integer >= 1 and <= 65535",
        ),
        ("metrics.hcorr_gt.bins", HUGE, "metrics.hcorr_gt.bins must be a positive integer of at most 65536"),
        ("metrics.hcorr_gt.bins", 2e9, "metrics.hcorr_gt.bins must be a positive integer"),
        ("metrics.ssim.sigma", 1e9, "metrics.ssim.sigma must be a finite number > 0 and <= 100"),
        (
            "metrics.ssim.win_size",
            HUGE + 1,
            "metrics.ssim.win_size must be an odd integer of at least 3 and at most 1001",
        ),
        ("metrics.lpips.resize", [40000, 40000], "metrics.lpips.resize [40000, 40000] is over the 64000000 pixels"),
        ("io.max_pixels", HUGE, "io.max_pixels must be an integer >= 1 and <= 64000000"),
        (
            "aggregation.bootstrap.resamples",
            HUGE,
            "aggregation.bootstrap.resamples must be an integer >= 1 and <= 10000000",
        ),
        (
            "aggregation.bootstrap.seed",
            2**70,
            "aggregation.bootstrap.seed must be an integer >= 0 and <= 18446744073709551615",
        ),
        ("version", 1.5, "version must be an integer >= 1"),
    ],
)
def test_paired_sizes_out_of_range_are_refused_at_load(tmp_path, key, value, rule):
    data = _set(_base("pstbench"), tuple(key.split(".")), value)
    if key == "metrics.lpips.resize":
        data["metrics"]["lpips"]["resize_filter"] = "bicubic"
    if key == "metrics.ssim.win_size":
        data["metrics"]["ssim"]["gaussian_weights"] = False
    with pytest.raises(UserError) as err:
        _load(tmp_path, data)
    text = str(err.value)
    assert ": invalid protocol: " in text and rule in text and "\n" not in text and "fix:" in text, text


@pytest.mark.parametrize(
    "key, value, rule",
    [
        (
            "aggregation.bootstrap.resamples",
            HUGE,
            "aggregation.bootstrap.resamples must be an integer >= 1 and <= 10000000",
        ),
        ("aggregation.bootstrap.confidence", 2, "aggregation.bootstrap.confidence must be a finite number > 0 and < 1"),
        ("aggregation.bootstrap.seed", "zero", "aggregation.bootstrap.seed must be an integer"),
        ("trials.count", HUGE, "trials.count must be an integer >= 1 and <= 100"),
        ("trials.count", 7, "trials.count 7 needs distinct orders, but k = 3 has only 6"),
        (
            "trials.permutation.max_redraws",
            10**12,
            "trials.permutation.max_redraws must be an integer >= 1 and <= 1000000",
        ),
        ("candidates.max", 27, "candidates.min and candidates.max must be integers with 2 <= min <= max <= 26"),
        ("answers.attempts.max", HUGE, "answers.attempts.max must be a positive integer of at most 100"),
        (
            "answers.attempts.delays_s",
            [2, 1e300],
            "answers.attempts.delays_s must be a list of seconds >= 0 and <= 3600",
        ),
        ("answers.attempts.http.retries", HUGE, "answers.attempts.http.retries must be an integer >= 0 and <= 100"),
        (
            "answers.attempts.http.retry_after_max_s",
            float("inf"),
            "answers.attempts.http.retry_after_max_s must be a finite number",
        ),
        ("sampling.temperature", float("nan"), "sampling.temperature must be a finite number >= 0 and <= 100"),
        ("sampling.max_tokens", 10**12, "sampling.max_tokens must be a positive integer of at most 10000000"),
        ("judge.num_trials", HUGE, "judge.num_trials must be a positive integer of at most 1000"),
        ("consensus.n_judges", HUGE, "consensus.n_judges must be a positive integer of at most 1000"),
        ("consensus.monte_carlo.seed", -1, "consensus.monte_carlo.seed must be an integer >= 0"),
        (
            "consensus.monte_carlo.confidence",
            1.0,
            "consensus.monte_carlo.confidence must be a finite number > 0 and < 1",
        ),
        ("consensus.paper_thresholds", [9], "consensus.paper_thresholds must list k values of consensus.thresholds"),
    ],
)
def test_selection_counts_out_of_range_are_refused_at_load(tmp_path, key, value, rule):
    data = _set(_base("vab"), tuple(key.split(".")), value)
    with pytest.raises(UserError) as err:
        _load(tmp_path, data)
    text = str(err.value)
    assert ": invalid selection protocol: " in text and rule in text and "\n" not in text, text


# ---- every numeric field: finite, and documented --------------------------------------------------------------


def test_the_shipped_protocols_and_variants_load():
    for pid in SHIPPED:
        assert load_protocol(pid).id == pid
    assert len(list(_variant_protocols())) >= 10


def test_no_numeric_field_of_a_shipped_protocol_takes_nan(tmp_path):
    checked = 0
    for pid in SHIPPED:
        base = _base(pid)
        for path, _value in _numeric_leaves(base):
            with pytest.raises(UserError):
                _load(tmp_path, _set(base, path, math.nan))
            checked += 1
    assert checked > 40


def test_every_numeric_key_has_a_documented_range():
    doc = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = doc.split("## Ranges", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([^`]+)`", section, flags=re.M))
    missing = sorted(
        {
            f"{kind}: {_documented_key(kind, path)}"
            for pid, kind, data in _all_shipped()
            for path, _ in _numeric_leaves(data)
            if _documented_key(kind, path) not in documented
        }
    )
    assert missing == []

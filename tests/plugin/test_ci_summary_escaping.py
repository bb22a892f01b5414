"""A published baseline's name and fields reach the CI job summary, the JUnit properties and the pytest
terminal summary only escaped: issue #44 cases 8 (terminal) and 10 (Markdown, XML)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from helpers.tracks import make_outputs

FAILED = pytest.ExitCode.TESTS_FAILED
HOSTILE = "<img src=x onerror=alert(1)> | `x` \\ $a$ % & **b** \x1b]0;pwned\x07\x1b[2J\u202e"
CONTROL = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\n\t"] + ["\u202e"]


def _hostile_baseline(baseline):
    for f in ("summary.json", "run.json"):
        data = json.loads((baseline / f).read_text())
        data["name"] = HOSTILE
        (baseline / f).write_text(json.dumps(data))


def test_a_baseline_name_is_escaped_in_the_summary_junit_and_terminal(pytester, gated_track, monkeypatch):
    s = gated_track
    _hostile_baseline(s.baseline)
    worse = make_outputs(s.manifest, pytester.path / "worse", strength=0.3)
    step = pytester.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={worse}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "--junitxml=junit.xml",
    )
    assert r.ret == FAILED, r.stdout.str()
    text = step.read_text()
    assert "baseline" in text and "**Gate: FAILED**" in text
    # case 10: no HTML, no control character; the name is there, escaped (a table cell and the gate's reasons)
    assert "<img" not in text and "<" not in text.replace("<ins>", "") and not any(c in text for c in CONTROL), text
    assert "&lt;img src=x onerror=alert(1)&gt; \\| \\`x\\` \\\\ \\$a\\$ % &amp; \\*\\*b\\*\\*" in text
    for line in text.splitlines():  # every table row keeps its cells: no `|` of the name splits one
        if line.startswith("|") and "onerror" in line:
            assert line.count(" | ") == line.replace("\\|", "").count(" | ")
    # the JUnit XML parses, and its properties show the name without control characters
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "junit.xml").iter("property")}
    names = [n for n in props if n.startswith("pstbench_verdict[")]
    assert names and all("onerror" in n and not any(c in n for c in CONTROL) for n in names)
    assert not any(c in v for v in props.values() for c in CONTROL)
    # case 8: the terminal summary shows it escaped
    out = r.stdout.str()
    assert "onerror" in out and not any(c in out for c in CONTROL if c not in "\r"), out[-2000:]
    assert "\\x1b]0;pwned\\x07" in out

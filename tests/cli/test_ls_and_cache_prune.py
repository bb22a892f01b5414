"""`pstbench --version`, `pstbench ls ...` and `pstbench cache prune` (issue #24)."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from pytest_pstbench import __version__
from pytest_pstbench.cli import main
from pytest_pstbench.core.protocol import protocols_dir
from pytest_pstbench.paired import scorecache as cache_mod


def _out(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's --version / usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_version(capsys):
    code, out, _ = _out(capsys, "--version")
    assert code == 0 and out == f"pstbench {__version__} (pytest-pstbench)\n"


def _first_column(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "} and line) + 1
    return [line.split()[0] for line in lines[start:] if line.strip() and not line.startswith(("or ", "use:"))]


def test_ls_lists_what_the_yaml_files_define(capsys):
    code, out, _ = _out(capsys, "ls", "protocols")
    assert code == 0
    assert sorted(_first_column(out)) == sorted(
        yaml.safe_load(p.read_text())["id"] for p in protocols_dir().glob("*.yaml")
    )
    code, out, _ = _out(capsys, "ls", "variants")
    assert _first_column(out) == sorted(p.stem for p in (protocols_dir() / "variants").glob("*.yaml"))
    code, out, _ = _out(capsys, "ls", "tracks")
    remote = [
        tid
        for p in (protocols_dir() / "tracks").glob("*.yaml")
        for tid in (yaml.safe_load(p.read_text()).get("tracks") or {})
    ]
    assert sorted(_first_column(out)) == sorted(["demo", "vab-demo", *remote]) and "pst50-paired" in remote


def test_ls_metrics_shows_direction_and_ranked(capsys):
    code, out, _ = _out(capsys, "ls", "metrics")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[3:]}
    assert list(rows) == ["psnr", "ssim", "lpips", "delta_e00", "hcorr_gt", "hcorr_style"]
    assert rows["lpips"].split()[-2:] == ["lower", "yes"]
    assert rows["hcorr_style"].split()[3:] == ["style", "higher", "no", "(reported)"]
    code, out, err = _out(capsys, "ls", "metrics", "--protocol", "nope")
    assert code == 2 and err == (
        "pstbench: error: --protocol nope: no such protocol; fix: use one of "
        f"{', '.join(sorted(p.stem for p in protocols_dir().glob('*.yaml')))}, or the path of a protocol YAML\n"
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path))
    c = cache_mod.ScoreCache()
    keys = {name: cache_mod.hashlib.sha256(name.encode()).hexdigest() for name in ("now", "other", "legacy", "damaged")}
    for k in keys.values():
        c.put(k, {"psnr": 30.0}, {})
    other = json.loads(c.path(keys["other"]).read_text())
    other["made_by"]["engine"] -= 1  # written by the previous metric engine
    c.path(keys["other"]).write_text(json.dumps(other))
    legacy = json.loads(c.path(keys["legacy"]).read_text())
    del legacy["made_by"]  # written before entries recorded what made them
    c.path(keys["legacy"]).write_text(json.dumps(legacy))
    c.path(keys["damaged"]).write_text("{not json")
    tmp = c.path(keys["now"]).parent / ".abcd.x.tmp"
    tmp.write_text("half")
    old = time.time() - 40 * 86400
    os.utime(c.path(keys["legacy"]), (old, old))
    os.utime(tmp, (old, old))
    return c, keys, tmp


def test_cache_prune_dry_run_then_prune(cache, capsys):
    c, keys, tmp = cache
    code, out, _ = _out(capsys, "cache", "prune", "--dry-run")
    assert code == 0
    assert out.splitlines() == [
        f"score cache {c.root}: would remove 3 of 4 entries ({0:.1f} MiB); kept 2",
        "  1: leftover temporary file",
        "  1: made by another engine or package versions",
        "  1: unreadable or damaged",
        "  kept 1 entries written before entries recorded their engine (removed by --older-than DAYS or --all)",
    ]
    assert all(c.path(k).is_file() for k in keys.values()) and tmp.is_file()  # nothing removed
    code, out, _ = _out(capsys, "cache", "prune")
    assert out.startswith(f"score cache {c.root}: removed 3 of 4 entries")
    assert [k for k, v in keys.items() if c.path(v).is_file()] == ["now", "legacy"] and not tmp.exists()
    assert c.get(keys["now"], ["psnr"]) == {"metrics": {"psnr": 30.0}, "notes": {}}  # the current entry still hits
    code, out, _ = _out(capsys, "cache", "prune", "--older-than", "30")
    assert [k for k, v in keys.items() if c.path(v).is_file()] == ["now"]
    code, out, _ = _out(capsys, "cache", "prune", "--all")
    assert out.startswith(f"score cache {c.root}: removed 1 of 1 entries") and not any(c.root.rglob("*.json"))


def test_cache_prune_bad_days_is_one_line(cache, capsys):
    code, out, err = _out(capsys, "cache", "prune", "--older-than", "-1")
    assert (
        code == 2
        and err == "pstbench: error: --older-than -1: expected a number of days >= 0; fix: e.g. --older-than 30\n"
    )

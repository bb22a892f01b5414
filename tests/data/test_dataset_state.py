"""Issue #32 item 8: `pstbench ls tracks` and `pstbench data list` tell a dataset's state with one function
(data.verify.dataset_state): a damaged lock file, which `data list` flags and scoring refuses, is not
"fetched: yes". Found by the third audit (#32)."""

from __future__ import annotations

import json

from pytest_pstbench.cli import main
from pytest_pstbench.data.dataset_lock import LOCK_FORMAT, lock_path


def _out(capsys, *argv):
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _fetched_column(out: str, track: str) -> str:
    line = next(line for line in out.splitlines() if line.split() and line.split()[0] == track)
    return line.split("(dataset pst50)", 1)[1].strip()


def _write_lock(tmp_path, monkeypatch, lock: dict) -> None:
    monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
    path = lock_path("pst50")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(lock))


def test_damaged_lock_is_not_fetched_yes(tmp_path, monkeypatch, capsys):
    _write_lock(
        tmp_path,
        monkeypatch,
        {
            "format": LOCK_FORMAT,
            "dataset": "pst50",
            "repo_id": "x/y",
            "revision": "a" * 40,
            "files": {"a.png": {"size": "big", "sha256": "0" * 64}},
        },
    )
    code, out, _ = _out(capsys, "data", "list")
    assert code == 0 and "bad lock file" in out
    code, out, _ = _out(capsys, "ls", "tracks")
    assert code == 0
    fetched = _fetched_column(out, "pst50-paired")
    assert not fetched.startswith("yes"), fetched
    assert fetched.startswith("no: bad lock file") and "pstbench data fetch pst50" in fetched


def test_missing_files_are_not_fetched_yes(tmp_path, monkeypatch, capsys):
    _write_lock(
        tmp_path,
        monkeypatch,
        {
            "format": LOCK_FORMAT,
            "dataset": "pst50",
            "repo_id": "x/y",
            "revision": "a" * 40,
            "files": {"a.png": {"size": 3, "sha256": "0" * 64}},
        },
    )
    code, out, _ = _out(capsys, "ls", "tracks")
    fetched = _fetched_column(out, "pst50-paired")
    assert fetched.startswith("no: incomplete: 1 missing or truncated"), fetched


def test_not_fetched_and_fetched(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
    code, out, _ = _out(capsys, "ls", "tracks")
    assert _fetched_column(out, "pst50-paired") == "no: pstbench data fetch pst50"
    root = tmp_path / "data" / "pst50"
    root.mkdir(parents=True)
    (root / "a.png").write_bytes(b"abc")
    lock_path("pst50").write_text(
        json.dumps(
            {
                "format": LOCK_FORMAT,
                "dataset": "pst50",
                "repo_id": "x/y",
                "revision": "a" * 40,
                "files": {"a.png": {"size": 3, "sha256": "0" * 64}},
            }
        )
    )
    code, out, _ = _out(capsys, "ls", "tracks")
    assert _fetched_column(out, "pst50-paired") == "yes"

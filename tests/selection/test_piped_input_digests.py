"""An input read from a pipe (`/dev/stdin`, `<(...)`) is recorded with the sha256 of the bytes read, not of the
nothing a second read finds (issue #44 case 19)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from helpers.damaged_world import _selection_track

from pytest_pstbench.cli import main
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.human import human_reference
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import load_selection_manifest

EMPTY = hashlib.sha256(b"").hexdigest()


def piped(data: bytes) -> tuple[str, threading.Thread]:
    """A path that reads `data` once, as `<(cat FILE)` gives it (a pipe; the writer in a thread)."""
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as fh:
            fh.write(data)

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return f"/dev/fd/{r}", t


def test_study_records_the_digest_of_the_annotations_it_read_from_a_pipe(tmp_path, capsys):
    """Issue #44 case 19: `vab study <(cat annotations.csv)` records the sha256 of those bytes."""
    data = (Path(__file__).resolve().parents[2] / "examples" / "study" / "annotations.csv").read_bytes()
    path, writer = piped(data)
    assert main(["vab", "study", path, "--out", str(tmp_path / "study")]) == 0, capsys.readouterr().err
    writer.join(5)
    recorded = json.loads((tmp_path / "study" / "study.json").read_text())["annotations"]["sha256"]
    assert recorded == hashlib.sha256(data).hexdigest() != EMPTY


def test_the_human_row_records_the_digest_of_the_votes_it_read_from_a_pipe(tmp_path):
    """Issue #44 case 19: the human row's votes_sha256 (run.json `human.sha256`) is of the bytes read."""
    track = load_selection_manifest(_selection_track(tmp_path / "track"))
    rows = [
        f"t{t:02d},{k},j{i},{k - 1 if i < 9 else 0},{('0' if i < 9 else '1') if k == 3 else ''}\n"
        for t, k in ((1, 2), (2, 3), (3, 2), (4, 3))
        for i in range(10)
    ]
    data = ("task_id,k,judge,best,worst\n" + "".join(rows)).encode()
    path, writer = piped(data)
    human = human_reference(track, Path(path), SelectionParams.of(load_protocol("vab")))
    writer.join(5)
    assert human["experts"] == 10
    assert human["votes_sha256"] == hashlib.sha256(data).hexdigest() != EMPTY

"""Issue #45 item 4: every track-manifest error names the file and line, the key, and an example of
what is expected (a manifest without `reference` said only `invalid track manifest: pairs[0] lacks
reference`)."""

from __future__ import annotations

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.yamlfile import yaml_line
from pytest_pstbench.paired.tracks import load_manifest
from pytest_pstbench.selection.tracks import load_selection_manifest

PAIRED = """\
id: mine
pairs:
  - id: a
    content: c.png
    style: c.png
    reference: c.png
  - id: b
    content: c.png
    style: c.png
"""


def _refused(load, path) -> str:
    with pytest.raises(UserError) as e:
        load(path)
    message = str(e.value)
    assert "\n" not in message
    return message


def test_a_pair_without_reference_names_line_key_fix_and_example(tmp_path):
    (tmp_path / "c.png").write_bytes(b"")
    path = tmp_path / "track.yaml"
    path.write_text(PAIRED)
    message = _refused(load_manifest, path)
    assert message.startswith(
        f"{path}:7: invalid track manifest: pairs[1] lacks reference; "
        "fix: give every pair id, content, style, reference; expected e.g. `{id: my-track, pairs: [{id: p01,"
    )


def test_a_missing_file_names_the_line_of_its_key(tmp_path):
    (tmp_path / "c.png").write_bytes(b"")
    path = tmp_path / "track.yaml"
    path.write_text(
        PAIRED.replace("    style: c.png\n    reference: c.png", "    style: nowhere.png\n    reference: c.png")
    )
    assert _refused(load_manifest, path).startswith(f"{path}:5: invalid track manifest: pair a: style file ")


def test_a_selection_label_out_of_range_names_the_line_of_best(tmp_path):
    path = tmp_path / "track.yaml"
    for name in "abc":
        (tmp_path / f"{name}.png").write_bytes(b"")
    path.write_text(
        "kind: selection\nid: mine\ntasks:\n  - id: t1\n    candidates: [a.png, b.png, c.png]\n    best: 7\n    worst: 0\n"
    )
    message = _refused(load_selection_manifest, path)
    assert message.startswith(
        f"{path}:6: invalid selection track manifest: task t1: `best` must be a candidate index 0..2"
    )
    assert message.endswith(
        "expected e.g. `{kind: selection, id: my-track, tasks: [{id: t01, candidates: "
        "[t01/a.png, t01/b.png, t01/c.png], best: 0, worst: 2}]}`"
    )


def test_yaml_line_walks_keys_and_indices_and_stops_at_the_deepest_found(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text(PAIRED)
    assert yaml_line(path, ()) == 1
    assert yaml_line(path, ("pairs",)) == 3
    assert yaml_line(path, ("pairs", 1)) == 7
    assert yaml_line(path, ("pairs", 1, "style")) == 9
    assert yaml_line(path, ("pairs", 1, "reference")) == 7  # not there: the entry's line
    assert yaml_line(path, ("pairs", 9)) == 3
    path.write_text("a: [unclosed")
    assert yaml_line(path, ("a",)) is None

"""Issue #54 "Find the class, not the case": a property-based test (Hypothesis, the profile of tests/conftest.py) of
the reader of paired track manifests with clusters (paired/tracks.py load_manifest, paired/clusters.py), text a
stranger writes. Manifests are generated with arbitrary unicode and control characters in ids, paths and cluster
names, numbers, nulls and lists where names belong, duplicated pair ids, a cluster on some pairs only, and
clusters named like their own pair. The contract: a one-line UserError naming the manifest, or a track whose
clusters are exactly the declared ones (every pair declares) or the shared-input ones (none does)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import yaml
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.paired import clusters
from pytest_pstbench.paired.tracks import load_manifest

IDS = st.one_of(
    st.sampled_from(["p1", "p2", "p3", "x", "1"]),
    st.text(st.characters(codec="utf-8"), max_size=5),
    st.sampled_from(["\x00", "\x1f", "a/b", "..", " ", "é", "\u2028"]),
)
FILES = st.one_of(st.sampled_from(["a.png", "b.png", "c.png", "a_copy.png"]), IDS)
CLUSTER = st.one_of(
    st.sampled_from(["SELF", "SELF", "g1", "g2"]),  # SELF: the pair's own id
    IDS,
    st.sampled_from([None, 0, -1, 10**30, float("nan"), float("inf"), [], {}, True, ""]),
)


@st.composite
def manifests(draw) -> tuple[dict, dict[str, object] | None]:
    pairs = []
    declare = draw(st.sampled_from(["all", "all", "none", "some"]))
    for _ in range(draw(st.integers(1, 5))):
        pid = draw(IDS)
        pair = {"id": pid, "content": draw(FILES), "style": draw(FILES), "reference": draw(FILES)}
        if declare == "all" or (declare == "some" and draw(st.booleans())):
            c = draw(CLUSTER)
            pair["cluster"] = pid if c == "SELF" else c
        pairs.append(pair)
    return {"id": draw(st.sampled_from(["t", "my-track"])), "pairs": pairs}


def _images(folder: Path) -> None:
    for i, name in enumerate(["a.png", "b.png", "c.png"]):
        arr = np.full((8, 8, 3), 40 * i, dtype=np.uint8)
        Image.fromarray(arr).save(folder / name)
    (folder / "a_copy.png").write_bytes((folder / "a.png").read_bytes())


@given(data=manifests())
def test_track_manifest_with_clusters_property(data):
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        _images(folder)
        path = folder / "track.yaml"
        path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        try:
            track = load_manifest(path)
        except UserError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc), str(exc)
            return
        labels, source = clusters.track_clusters(track)
        assert clusters.run_clusters(track)["n"] == len(set(labels.values())) >= 1
    written = data["pairs"]
    assert [p.id for p in track.pairs] == [str(p["id"]) for p in written]
    assert len(set(labels)) == len(written)  # ids are unique: one cluster per pair
    if all("cluster" in p for p in written):
        # every pair declares: the declaration is the clusters, a singleton named like its pair included
        assert source == clusters.DECLARED
        assert labels == {str(p["id"]): p["cluster"] for p in written}
        assert all(isinstance(p["cluster"], str) and p["cluster"].strip() for p in written)
    else:
        assert not any("cluster" in p for p in written)  # some but not all: refused
        assert source == clusters.SHARED_INPUTS and set(labels.values()) <= set(labels)

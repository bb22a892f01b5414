"""Issue #32, items 1-3: the score cache holds everything that produced a value, and the Identity row goes
through the same session and cache rules as every other run (no cache of its own).
Found by the third audit (#32)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main as cli_main


@pytest.fixture
def cache(tmp_path, monkeypatch, _isolated_cache):
    """A score cache of this test's own (the session's LPIPS weights copied in)."""
    root = tmp_path / "cache"
    if (_isolated_cache / "weights").is_dir():
        shutil.copytree(_isolated_cache / "weights", root / "weights")
    monkeypatch.setenv("PSTBENCH_CACHE", str(root))
    return root


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "scores").rglob("*.json"))


def _score(manifest, outputs, proto, results, *extra) -> int:
    return cli_main(
        [
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(outputs),
            "--results",
            str(results),
            "--protocol",
            str(proto),
            *extra,
        ]
    )


def _identity_psnr(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("Identity")).split()[1]


# ---- 1. the Identity row under --no-cache and a declared revision ------------------------------------
def test_no_cache_neither_reads_nor_writes_the_identity_rows_entries(tmp_path, cache, capsys):
    from pytest_pstbench.paired.scorecache import entry_digest

    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "out")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    assert _score(manifest, outputs, proto, tmp_path / "r0", "--no-cache") == 0
    fresh = _identity_psnr(capsys.readouterr().out)
    assert _entries(cache) == []  # --no-cache writes no entry, the Identity row's neither
    assert _score(manifest, outputs, proto, tmp_path / "r1") == 0  # fills the cache (the method's and Identity's)
    capsys.readouterr()
    for path in _entries(cache):  # forged by someone who can write the cache: a valid digest, PSNR 99.5
        entry = json.loads(path.read_text())
        entry["metrics"]["psnr"] = 99.5
        entry["digest"] = entry_digest(entry["key"], entry["metrics"], entry["notes"])
        path.write_text(json.dumps(entry))
    assert _score(manifest, outputs, proto, tmp_path / "r2", "--no-cache") == 0
    out = capsys.readouterr().out
    assert _identity_psnr(out) == fresh != "99.50"
    assert "99.50" not in out


def test_identity_row_follows_a_changed_reference_under_a_declared_revision(tmp_path, cache, capsys):
    manifest = make_track(tmp_path / "track")
    data = yaml.safe_load(manifest.read_text())
    manifest.write_text(yaml.safe_dump({**data, "revision": "v1"}, sort_keys=False))  # a declared label
    outputs = make_outputs(manifest, tmp_path / "out")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    for extra in ((), ("--no-cache",)):
        results = tmp_path / f"r{len(extra)}"
        assert _score(manifest, outputs, proto, results, *extra) == 0
        before = _identity_psnr(capsys.readouterr().out)
        ref = manifest.parent / "p01_reference.png"
        arr = np.asarray(Image.open(ref)).copy()
        arr[:, :, 0] = 255 - arr[:, :, 0]
        Image.fromarray(arr).save(ref)  # the label still says v1
        assert _score(manifest, outputs, proto, results, *extra) == 0
        shown = _identity_psnr(capsys.readouterr().out)
        assert _score(manifest, outputs, proto, tmp_path / f"fresh{len(extra)}", "--no-cache") == 0
        assert shown == _identity_psnr(capsys.readouterr().out) != before, extra
        run = json.loads((results / "small" / "identity" / "run.json").read_text())
        with open(results / "small" / "identity" / "metrics.csv") as fh:
            rows = list(csv.DictReader(fh))
        assert run["complete"] and len(rows) == 4  # the Identity run folder holds what the row shows


# ---- 2. the LPIPS weights are part of the key ----------------------------------------------------------
def test_a_cached_score_does_not_survive_a_change_of_the_lpips_weights(tmp_path, cache, monkeypatch):
    from pytest_pstbench.data.weights import cachefile, checks, resolve
    from pytest_pstbench.metrics import lpips_metric

    monkeypatch.setattr(lpips_metric, "_MODELS", {})  # this test's models only
    manifest = make_track(tmp_path / "track", n=2)
    outputs = make_outputs(manifest, tmp_path / "out")

    def lpips_of(results):
        with open(results / "small" / "out" / "metrics.csv") as fh:
            values = [row["lpips"] for row in csv.DictReader(fh)]
        run = json.loads((results / "small" / "out" / "run.json").read_text())
        return values, run["environment"]["lpips_weights"]["digest"]

    assert (
        cli_main(["score", "--track", str(manifest), "--outputs", str(outputs), "--results", str(tmp_path / "a")]) == 0
    )
    old, old_digest = lpips_of(tmp_path / "a")
    weights, _ = resolve.resolve_features("alexnet")
    changed = {k: (v * 1.25 if k == "features.0.weight" else v).numpy() for k, v in weights.items()}
    digest = checks.weights_digest(changed)
    cachefile.store(
        changed, "torchvision-cache", digest
    )  # other weights in the cache (as `weights fetch --force` could)
    lpips_metric._MODELS.clear()  # a new process would build the model from them
    assert (
        cli_main(["score", "--track", str(manifest), "--outputs", str(outputs), "--results", str(tmp_path / "b")]) == 0
    )
    new, new_digest = lpips_of(tmp_path / "b")
    assert (old_digest, new_digest) != (digest, digest) and new_digest == digest
    lpips_metric._MODELS.clear()
    assert (
        cli_main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                str(outputs),
                "--results",
                str(tmp_path / "c"),
                "--no-cache",
            ]
        )
        == 0
    )
    fresh, _ = lpips_of(tmp_path / "c")
    assert new == fresh != old  # the new weights' values, not the cached ones of the old weights


def test_an_entry_is_stored_under_the_weights_it_was_computed_with(tmp_path, cache, monkeypatch):
    """No weights cached when the key is made (they are fetched on first use): the entry goes under the digest of
    the weights the values were computed with, and the next run (which reads that digest) hits it."""
    from pytest_pstbench.metrics.scorer import PairScorer
    from pytest_pstbench.paired import engine

    manifest = make_track(tmp_path / "track", n=2)
    outputs = make_outputs(manifest, tmp_path / "out")
    real_digests, real_score = engine.weights_digests, PairScorer.score
    calls = []
    monkeypatch.setattr(PairScorer, "score", lambda self, *a, **k: calls.append(1) or real_score(self, *a, **k))
    monkeypatch.setattr(engine, "weights_digests", lambda protocol: {b: None for b in real_digests(protocol)})
    args = ["score", "--track", str(manifest), "--outputs", str(outputs), "--results", str(tmp_path / "r")]
    assert cli_main(args) == 0 and len(calls) == 4  # the method's 2 pairs and Identity's 2
    monkeypatch.setattr(engine, "weights_digests", real_digests)
    calls.clear()
    assert cli_main(args) == 0 and calls == []


def test_the_key_holds_the_weights_and_the_rules_a_file_was_read_under(tmp_path):
    from pytest_pstbench.paired.scorecache import ScoreCache

    c = ScoreCache(tmp_path)
    base = dict(
        output_sha256="a" * 64,
        read_as="output",
        dataset_id="d",
        revision="r",
        pair_id="p",
        protocol_sha256="b" * 64,
        allow_resize=False,
        device="cpu",
        reference_sha256="1" * 64,
        style_sha256="2" * 64,
        weights={"alexnet": "c" * 64},
    )
    k = c.key(**base)
    for field, other in [("read_as", "dataset"), ("weights", {"alexnet": "d" * 64}), ("weights", {})]:
        assert c.key(**{**base, field: other}) != k, field


# ---- 3. a cache hit does not skip the I/O rules --------------------------------------------------------
def test_jpeg_bytes_named_png_stay_refused_after_identity_cached_the_same_bytes(tmp_path, cache, capsys):
    manifest = make_track(tmp_path / "track")
    data = yaml.safe_load(manifest.read_text())
    outputs = tmp_path / "out"
    outputs.mkdir()
    for p in data["pairs"]:  # the dataset publishes JPEG content (dataset rules accept it)
        jpg = Path(p["content"]).with_suffix(".jpg").name
        Image.open(manifest.parent / p["content"]).convert("RGB").save(manifest.parent / jpg, quality=95)
        p["content"] = jpg
        shutil.copyfile(manifest.parent / jpg, outputs / f"{p['id']}.png")  # a method's output: JPEG named .png
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    for attempt in range(2):  # cold (Identity fills the cache in the same pass), then with Identity's entries
        assert _score(manifest, outputs, proto, tmp_path / "r") == 1, attempt
        err = capsys.readouterr().err
        assert "4 of 4 pairs failed" in err and "is a JPEG file, not a PNG" in err, attempt
        run = json.loads((tmp_path / "r" / "small" / "out" / "run.json").read_text())
        assert run["complete"] is False and run["n_scored"] == 0
    ident = json.loads((tmp_path / "r" / "small" / "identity" / "run.json").read_text())
    assert ident["complete"] is True  # the same bytes as the track's content are fine under the dataset's rules

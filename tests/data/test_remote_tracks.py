"""Remote tracks (PST50, AceTone-Bench) against a local stand-in for the Hub (tests/helpers/hub_server.py).

The shipped manifests (protocols/tracks/*.yaml) are used as they are, except for AceTone-Bench,
whose revision is not pinned: its fetch is tested with a manifest pinned to the fake commit.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.hub_server import FakeHub, make_acetone_files, make_pst50_files
from PIL import Image

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError

PST50 = "zrgong/PST50"
PST50_SHA = "6ed86e3" + hashlib.sha1(b"pst50").hexdigest()[:33]  # the pinned short revision 6ed86e3
OTHER_SHA = hashlib.sha1(b"pst50 other").hexdigest()  # another commit, files named {n}.png
ACETONE = "Vivre/AceTone-Bench-Transfer"
ACETONE_SHA = hashlib.sha1(b"acetone").hexdigest()
DEFAULT = ("content_709", "paired_style", "paired_gt")


@pytest.fixture(scope="module")
def repo_files():
    return {
        "pinned": make_pst50_files(naming="prefixed"),
        "other": make_pst50_files(naming="numbers", seed=5),
        "acetone": make_acetone_files(),
    }


@pytest.fixture(scope="module")
def hub(repo_files):
    hub = FakeHub(page_size=40).start()  # 50 files per folder: tree listings come in two pages
    hub.add_commit(PST50, PST50_SHA, repo_files["pinned"], refs=["main"])
    hub.add_commit(PST50, OTHER_SHA, repo_files["other"], refs=["v2"])
    hub.add_commit(ACETONE, ACETONE_SHA, repo_files["acetone"], refs=["main"])
    yield hub
    hub.stop()


def _env(mp, hub, root: Path) -> None:
    mp.setenv("HF_ENDPOINT", hub.url)
    mp.setenv("PSTBENCH_DATA", str(root / "data"))
    mp.setenv("HF_HOME", str(root / "hf"))
    mp.delenv("HF_HUB_OFFLINE", raising=False)
    mp.delenv("PSTBENCH_REMOTE_MANIFESTS", raising=False)


@pytest.fixture(scope="module")
def fetched(hub, tmp_path_factory):
    """A data folder with all four PST50 splits fetched once at the pinned revision (copied per test)."""
    root = tmp_path_factory.mktemp("fetched")
    with pytest.MonkeyPatch.context() as mp:
        _env(mp, hub, root)
        assert (
            main(["data", "fetch", "pst50", "--splits", "content_709", "content_log", "paired_style", "paired_gt"]) == 0
        )
    return root / "data"


@pytest.fixture
def env(hub, tmp_path, monkeypatch):
    _env(monkeypatch, hub, tmp_path)
    hub.log.clear()
    hub.cut_once.clear()
    hub.fail_get.clear()
    hub.corrupt.clear()
    return tmp_path


def _data(env) -> Path:
    return env / "data"


def _copy_fetched(fetched, env) -> Path:
    shutil.copytree(fetched, _data(env), dirs_exist_ok=True)
    return _data(env) / "pst50"


def _lock(env) -> dict:
    return json.loads((_data(env) / "pst50" / "pstbench-lock.json").read_text())


def _sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# ---- fetch -------------------------------------------------------------------------------------
def test_fresh_fetch_of_chosen_splits(env, hub, repo_files, capsys):
    assert main(["data", "fetch", "pst50", "--splits", "content_log", "paired_gt"]) == 0
    root = _data(env) / "pst50"
    got = hub.downloads()
    assert len(got) == 100 and all(p.startswith(("content_log/", "paired_gt/")) for p in got)
    lock = _lock(env)
    assert lock["revision"] == PST50_SHA and lock["pinned_revision"] == "6ed86e3" and lock["revision_override"] is None
    assert sorted(lock["pairs"]) == ["content_log", "paired_gt"]
    assert lock["pairs"]["content_log"]["pst50-001"] == "content_log/in1.png"
    assert list(lock["pairs"]["paired_gt"])[-1] == "pst50-050"
    for path, entry in lock["files"].items():  # expected hashes are the Hub's LFS sha256, and the bytes match
        assert entry["sha256"] == _sha256(repo_files["pinned"][path]) == _sha256((root / path).read_bytes())
    assert lock["verified"]["ok"] is True
    assert not (root / "unpaired_style").exists() and not (root / "content_709").exists()

    # the log track needs paired_style too: fail fast with the exact command
    with pytest.raises(
        UserError, match=r"paired_style .*pstbench data fetch pst50 --splits content_log paired_style paired_gt"
    ):
        _resolve("pst50-paired-log")

    # the default splits are added to the same lock; files already there are not downloaded again
    hub.log.clear()
    assert main(["data", "fetch", "pst50"]) == 0
    assert sorted(set(p.split("/")[0] for p in hub.downloads())) == ["content_709", "paired_style"]
    assert sorted(_lock(env)["pairs"]) == ["content_709", "content_log", "paired_gt", "paired_style"]
    capsys.readouterr()
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("pst50"))
    assert "6ed86e31a4e8" in line and "200" in line and "verified" in line
    assert "not fetched" in next(x for x in out.splitlines() if x.startswith("acetone"))
    assert main(["data", "verify", "pst50"]) == 0
    track = _resolve("pst50-paired-log")
    assert track.pairs[0].content == (root / "content_log" / "in1.png").resolve()


def _resolve(spec):
    from pytest_pstbench.paired.tracks import resolve_track

    return resolve_track(spec)


def test_cut_transfer_is_resumed_with_a_range_request(env, hub, monkeypatch):
    import huggingface_hub.constants as hf_constants

    # huggingface_hub writes in DOWNLOAD_CHUNK_SIZE (10 MB) pieces and resumes from the last one
    # written; with small files that is byte 0, so shrink the piece size to see a real resume.
    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 64)
    hub.cut_once.add("content_709/in3.png")
    assert main(["data", "fetch", "pst50"]) == 0
    ranges = [(p, r) for m, p, r in hub.log if m == "GET" and r]
    assert len(ranges) == 1 and ranges[0][0].endswith("/content_709/in3.png")
    start = int(ranges[0][1].removeprefix("bytes=").rstrip("-"))
    assert start > 0
    assert main(["data", "verify", "pst50"]) == 0


def test_interrupted_fetch_resumes_with_what_is_missing(env, hub, capsys):
    hub.fail_get.update({"paired_gt/gt7.png", "content_709/in20.png"})
    assert main(["data", "fetch", "pst50"]) == 2
    err = capsys.readouterr().err
    assert "2 of 150 files could not be fetched" in err and "paired_gt/gt7.png" in err and "content_709/in20.png" in err
    root = _data(env) / "pst50"
    assert not (root / "paired_gt" / "gt7.png").exists() and (root / "paired_gt" / "gt8.png").is_file()
    with pytest.raises(UserError, match=r"2 of 150 files .*content_709/in20.png: missing.*pstbench data fetch pst50`"):
        _resolve("pst50-paired")

    hub.fail_get.clear()
    hub.log.clear()
    assert main(["data", "fetch", "pst50"]) == 0
    assert sorted(hub.downloads()) == ["content_709/in20.png", "paired_gt/gt7.png"]
    assert len(_resolve("pst50-paired").pairs) == 50


def test_corrupted_and_truncated_files_are_caught_and_refetched(env, hub, fetched, capsys):
    root = _copy_fetched(fetched, env)
    victim = root / "content_709" / "in5.png"
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # same size, one byte changed
    victim.write_bytes(bytes(raw))
    _resolve("pst50-paired")  # the cheap check (presence, size) does not hash

    assert main(["data", "verify", "pst50"]) == 1
    err = capsys.readouterr().err
    assert "content_709/in5.png: sha256" in err and "corrupted" in err and "1 of 200 files" in err
    assert _lock(env)["verified"]["bad"] == ["content_709/in5.png"]
    with pytest.raises(UserError, match=r"content_709/in5.png: failed sha256 verification.*pstbench data fetch pst50`"):
        _resolve("pst50-paired")

    truncated = root / "paired_gt" / "gt2.png"
    truncated.write_bytes(truncated.read_bytes()[:100])
    with pytest.raises(UserError, match=r"paired_gt/gt2.png: size 100 bytes, expected \d+ \(truncated\)"):
        _resolve("pst50-paired")

    hub.log.clear()
    assert main(["data", "fetch", "pst50"]) == 0
    out, err = capsys.readouterr()
    assert sorted(hub.downloads()) == ["content_709/in5.png", "paired_gt/gt2.png"]
    assert "content_709/in5.png: sha256" in err and "fetching it again" in err
    assert "re-fetched (content_709/in5.png, paired_gt/gt2.png)" in out
    assert main(["data", "verify", "pst50"]) == 0
    assert _lock(env)["verified"] == {**_lock(env)["verified"], "ok": True, "bad": []}


def test_bytes_that_differ_from_the_hubs_metadata_are_refused(env, hub, repo_files, capsys):
    good = repo_files["pinned"]["paired_style/tar4.png"]
    hub.corrupt["paired_style/tar4.png"] = bytes(len(good))  # right size, wrong bytes
    assert main(["data", "fetch", "pst50"]) == 2
    err = capsys.readouterr().err
    assert "paired_style/tar4.png: downloaded, but sha256" in err and "removed" in err
    assert not (_data(env) / "pst50" / "paired_style" / "tar4.png").exists()
    hub.corrupt.clear()
    hub.log.clear()
    assert main(["data", "fetch", "pst50"]) == 0
    assert hub.downloads() == ["paired_style/tar4.png"]


# ---- revisions ---------------------------------------------------------------------------------
def test_other_revision_refused_unless_overridden_then_recorded(env, hub, tmp_path, capsys):
    assert main(["data", "fetch", "pst50", "--revision", "v2"]) == 2
    assert "--revision v2: pst50.yaml pins 6ed86e3" in capsys.readouterr().err and hub.log == []
    assert (
        main(["data", "fetch", "pst50", "--revision", "main"]) == 2
    )  # a branch is not the pin, even if it points there
    assert hub.log == []

    assert main(["data", "fetch", "pst50", "--revision", "v2", "--allow-other-revision"]) == 0
    lock = _lock(env)
    assert lock["revision"] == OTHER_SHA
    detail = f"dataset revision: {OTHER_SHA} (resolved from v2; the kit pins 6ed86e3)"
    assert lock["revision_override"] == {
        "pinned": "6ed86e3",
        "requested": "v2",
        "fetched": OTHER_SHA,
        "flag": "--allow-other-revision",
        "detail": detail,
    }
    assert lock["pairs"]["content_709"]["pst50-001"] == "content_709/1.png"  # the other file_patterns entry
    track = _resolve("pst50-paired")
    assert track.revision == OTHER_SHA and track.info["revision_override"]["fetched"] == OTHER_SHA

    capsys.readouterr()
    code = main(["score", "--track", "pst50-paired", "--outputs", "identity", "--results", str(tmp_path / "results")])
    assert code == 0
    run = json.loads((tmp_path / "results" / "pst50-paired" / "identity" / "run.json").read_text())
    assert run["dataset"] == {"id": PST50, "revision": OTHER_SHA, "source": "remote"}
    assert {
        "kind": "revision_override",
        "pinned": "6ed86e3",
        "requested": "v2",
        "fetched": OTHER_SHA,
        "flag": "--allow-other-revision",
        "detail": detail,
    } in run["deviations"]

    # fetching the pinned revision again replaces the data and drops the deviation
    assert main(["data", "fetch", "pst50"]) == 0
    assert _lock(env)["revision"] == PST50_SHA and _lock(env)["revision_override"] is None
    assert "revision_override" not in _resolve("pst50-paired").info


def test_pinned_revision_resolving_to_another_commit_is_refused(env, hub, capsys):
    refs = hub.repos[PST50].refs
    refs["6ed86e3"] = OTHER_SHA  # e.g. a branch named like the pinned commit
    try:
        assert main(["data", "fetch", "pst50"]) == 2
    finally:
        del refs["6ed86e3"]
    err = capsys.readouterr().err
    assert f"resolved the pinned revision 6ed86e3 to commit {OTHER_SHA}, which is not that commit" in err
    assert hub.downloads() == [] and not (_data(env) / "pst50" / "pstbench-lock.json").exists()


# ---- offline -----------------------------------------------------------------------------------
def test_offline_with_and_without_data(env, hub, fetched, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    assert main(["score", "--track", "pst50-paired", "--outputs", "identity"]) == 2
    assert "fix: run `pstbench data fetch pst50`" in capsys.readouterr().err
    assert main(["data", "fetch", "pst50"]) == 2
    assert "HF_HUB_OFFLINE=1" in capsys.readouterr().err

    _copy_fetched(fetched, env)
    assert len(_resolve("pst50-paired").pairs) == 50
    assert main(["data", "fetch", "pst50"]) == 0
    assert "offline; all 150 files present and verified, nothing to download" in capsys.readouterr().err
    assert main(["data", "verify", "pst50"]) == 0
    assert hub.log == []


# ---- --from DIR --------------------------------------------------------------------------------
def _write_copy(files: dict[str, bytes], dest: Path) -> Path:
    for path, data in files.items():
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(data)
    return dest


def test_register_a_copy_from_dir(env, hub, repo_files, fetched, monkeypatch, capsys):
    copy = _write_copy(repo_files["pinned"], env / "my-copy")
    bad = copy / "paired_gt" / "gt1.png"
    good = bad.read_bytes()
    bad.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    assert main(["data", "fetch", "pst50", "--from", str(copy)]) == 2
    err = capsys.readouterr().err
    assert "gt1.png: sha256" in err and "nothing was registered" in err
    assert not (_data(env) / "pst50" / "pstbench-lock.json").exists()

    bad.write_bytes(good)
    assert main(["data", "fetch", "pst50", "--from", str(copy)]) == 0
    assert hub.downloads() == [] and hub.downloads("HEAD") == []  # only the metadata API was asked
    lock = _lock(env)
    assert lock["source"] == f"from:{copy.resolve()}" and lock["revision"] == PST50_SHA
    assert len(_resolve("pst50-paired").pairs) == 50

    # offline: a copy that carries a pstbench lock file is verified against it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PSTBENCH_DATA", str(env / "data2"))
    assert main(["data", "fetch", "pst50", "--from", str(copy)]) == 2
    assert "HF_HUB_OFFLINE=1 forbids asking" in capsys.readouterr().err
    assert (
        main(
            [
                "data",
                "fetch",
                "pst50",
                "--splits",
                "content_log",
                "paired_style",
                "paired_gt",
                "--from",
                str(fetched / "pst50"),
            ]
        )
        == 0
    )
    assert len(_resolve("pst50-paired-log").pairs) == 50


# ---- scoring -----------------------------------------------------------------------------------
def test_score_pst50_paired_end_to_end(env, hub, fetched, monkeypatch, capsys):
    root = _copy_fetched(fetched, env)
    lock = _lock(env)
    out = env / "outputs"
    out.mkdir()
    for pid in lock["pairs"]["content_709"]:
        c = np.asarray(Image.open(root / lock["pairs"]["content_709"][pid]), dtype=np.float64)
        g = np.asarray(Image.open(root / lock["pairs"]["paired_gt"][pid]), dtype=np.float64)
        Image.fromarray(np.clip(np.rint((c + g) / 2), 0, 255).astype(np.uint8)).save(out / f"{pid}.png")
    results = env / "results"
    capsys.readouterr()
    assert (
        main(["score", "--track", "pst50-paired", "--outputs", str(out), "--results", str(results), "--name", "half"])
        == 0
    )
    stdout = capsys.readouterr().out
    assert f"track: pst50-paired   protocol: pstbench   dataset: {PST50}@{PST50_SHA}   n=50" in stdout
    assert "Identity" in stdout and "half" in stdout
    run = json.loads((results / "pst50-paired" / "half" / "run.json").read_text())
    assert run["complete"] is True and run["n_pairs"] == 50
    assert run["dataset"] == {"id": PST50, "revision": PST50_SHA, "source": "remote"}
    assert not [d for d in run["deviations"] if d["kind"] == "revision_override"]
    rows = (results / "pst50-paired" / "half" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 51 and rows[1].startswith("pst50-001,") and rows[-1].startswith("pst50-050,")
    half = json.loads((results / "pst50-paired" / "half" / "summary.json").read_text())["metrics"]
    ident = json.loads((results / "pst50-paired" / "identity" / "summary.json").read_text())["metrics"]
    assert half["psnr"]["mean"] > ident["psnr"]["mean"]  # halfway to the ground truth beats the content

    # the log track: Identity reads content_log (`log:identity`); the prefix must match the track
    assert main(["score", "--track", "pst50-paired-log", "--outputs", "log:identity", "--results", str(results)]) == 0
    run = json.loads((results / "pst50-paired-log" / "identity" / "run.json").read_text())
    assert run["outputs"][0]["path"] == str((root / "content_log" / "in1.png").resolve())
    assert run["method"]["method"] == "identity" and run["outputs_dir"] is None
    capsys.readouterr()
    assert main(["score", "--track", "pst50-paired", "--outputs", "log:identity", "--results", str(results)]) == 2
    assert "track pst50-paired's content is content_709, not log" in capsys.readouterr().err
    monkeypatch.chdir(env)
    (env / "identity").mkdir()  # a folder of that name: `identity` is ambiguous, `./identity` is the folder
    assert main(["score", "--track", "pst50-paired", "--outputs", "identity", "--results", str(results)]) == 2
    assert "ambiguous" in capsys.readouterr().err


# ---- AceTone-Bench -----------------------------------------------------------------------------
def test_sensitivity_reads_log_content_with_log_identity(env, hub, fetched, tmp_path, capsys):
    """`pstbench sensitivity --track pst50-paired-log identity_log=log:identity ...` scores PST50's log content."""
    from helpers.protocols import protocol_without_lpips

    root = _copy_fetched(fetched, env)
    lock = _lock(env)
    out = env / "half"
    out.mkdir()
    for pid in lock["pairs"]["content_log"]:
        c = np.asarray(Image.open(root / lock["pairs"]["content_log"][pid]), dtype=np.float64)
        g = np.asarray(Image.open(root / lock["pairs"]["paired_gt"][pid]), dtype=np.float64)
        Image.fromarray(np.clip(np.rint((c + g) / 2), 0, 255).astype(np.uint8)).save(out / f"{pid}.png")
    proto = protocol_without_lpips(tmp_path / "nolpips.yaml")
    sens = env / "sens"
    assert (
        main(
            [
                "sensitivity",
                "--track",
                "pst50-paired-log",
                "identity_log=log:identity",
                f"half={out}",
                "--variants",
                "hcorr-64bins",
                "--protocol",
                str(proto),
                "--out",
                str(sens),
            ]
        )
        == 0
    )
    rows = list(csv.DictReader((sens / "scores.csv").open()))
    got = {
        r["pair"]: float(r["value"])
        for r in rows
        if r["method"] == "identity_log" and r["variant"] == "protocol" and r["metric"] == "psnr"
    }
    assert len(got) == 50
    # independent: PSNR of the log content itself against the ground truth
    c = np.asarray(Image.open(root / lock["pairs"]["content_log"]["pst50-007"]), dtype=np.float64)
    g = np.asarray(Image.open(root / lock["pairs"]["paired_gt"]["pst50-007"]), dtype=np.float64)
    assert got["pst50-007"] == pytest.approx(10 * np.log10(255.0**2 / np.mean((c - g) ** 2)), abs=1e-9)
    capsys.readouterr()
    assert (
        main(
            [
                "sensitivity",
                "--track",
                "pst50-paired",
                "identity_log=log:identity",
                f"half={out}",
                "--variants",
                "hcorr-64bins",
                "--protocol",
                str(proto),
                "--out",
                str(env / "sens2"),
            ]
        )
        == 2
    )
    assert "not log" in capsys.readouterr().err


def test_acetone_unpinned_is_refused_and_a_pinned_manifest_fetches(env, hub, monkeypatch, capsys):
    assert main(["data", "fetch", "acetone"]) == 2
    assert "has no pinned revision" in capsys.readouterr().err and hub.log == []
    # naming a revision gets past the missing pin, and the shipped layout (1024 pairs) is checked
    assert main(["data", "fetch", "acetone", "--revision", ACETONE_SHA]) == 2
    err = capsys.readouterr().err
    assert "acetone.yaml: split raw_image: 6 files" in err and "expected 1024" in err
    assert hub.downloads() == []

    from pytest_pstbench.core.protocol import protocols_dir

    manifest = yaml.safe_load((protocols_dir() / "tracks" / "acetone.yaml").read_text())
    manifest["revision"] = ACETONE_SHA
    manifest["pairs"]["sorted"]["count"] = 6
    extra = env / "manifests"
    extra.mkdir()
    (extra / "acetone.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("PSTBENCH_REMOTE_MANIFESTS", str(extra))
    assert main(["data", "fetch", "acetone"]) == 0
    track = _resolve("acetone-transfer")
    assert track.pair_ids == [f"acetone-{i:04d}" for i in range(6)]
    assert track.dataset_id == ACETONE and track.revision == ACETONE_SHA
    root = _data(env) / "acetone"
    assert (track.pairs[2].content, track.pairs[2].style, track.pairs[2].reference) == tuple(
        (root / f"{s}/00002.png").resolve() for s in ("raw_image", "ref_image", "gt_image")
    )


# ---- manifests and layout ----------------------------------------------------------------------
def test_shipped_manifests_and_layout_rules(tmp_path, monkeypatch):
    from pytest_pstbench.data import manifest

    monkeypatch.delenv("PSTBENCH_REMOTE_MANIFESTS", raising=False)
    manifests = manifest.load_manifests()
    assert manifests["pst50"].repo_id == PST50 and manifests["pst50"].revision == "6ed86e3"
    assert manifests["acetone"].revision is None  # unpinned: could not be checked from here
    assert sorted(manifest.remote_track_ids()) == ["acetone-transfer", "pst50-paired", "pst50-paired-log"]

    m = manifests["pst50"]
    listing = {f"content_709/{n}.png": {} for n in range(1, 51)}
    layout = manifest.resolve_layout(m, listing, ["content_709"])
    assert layout["content_709"]["pst50-050"] == "content_709/50.png"
    listing["content_709/in7.png"] = {}
    with pytest.raises(UserError, match=r"pst50.yaml: split content_709: image 7 matches several files"):
        manifest.resolve_layout(m, listing, ["content_709"])
    del listing["content_709/in7.png"], listing["content_709/12.png"]
    with pytest.raises(
        UserError, match=r"no file at this revision for image 12 \(tried content_709/12.png, content_709/in12.png\)"
    ):
        manifest.resolve_layout(m, listing, ["content_709"])

    bad = tmp_path / "x.yaml"
    bad.write_text(
        yaml.safe_dump({**m.data, "name": "x", "revision": "main", "tracks": {"x-t": m.data["tracks"]["pst50-paired"]}})
    )
    monkeypatch.setenv("PSTBENCH_REMOTE_MANIFESTS", str(tmp_path))
    with pytest.raises(UserError, match=r"x.yaml: .*`revision` 'main' is not a commit"):
        manifest.load_manifests()


def test_remote_track_lookup_does_not_import_huggingface_hub(tmp_path):
    code = (
        "import sys\n"
        "from pytest_pstbench.paired.tracks import resolve_track\n"
        "from pytest_pstbench.core.errors import UserError\n"
        "try:\n    resolve_track('pst50-paired')\nexcept UserError as e:\n    print(e)\n"
        "assert 'huggingface_hub' not in sys.modules\n"
    )
    env = {**os.environ, "PSTBENCH_DATA": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "pstbench data fetch pst50" in proc.stdout

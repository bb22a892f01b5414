"""`pstbench baseline`: each reference baseline against a direct call of its pinned package.

The packages are called here the way their documentation shows (color-matcher's ColorMatcher,
skimage's match_histograms, python-color-transfer's ColorTransfer with OpenCV's own RGB<->BGR
conversion), independently of pstbench's wrappers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_track
from PIL import Image

import pytest_pstbench
from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.data import pinned_packages as pp
from pytest_pstbench.paired.baselines import REFERENCE_METHODS, prepare_reference_baseline

PCT = pp.PYTHON_COLOR_TRANSFER
# issue #45 item 6: the extra added to the installation in use (the tests run from a source tree, editable)
FIX = f"pip install -e '{Path(__import__('pytest_pstbench').__file__).resolve().parents[1]}[baselines]'"


def _rgb(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        assert im.mode == "RGB" and im.format == "PNG"
        return np.asarray(im)


def _pairs(manifest: Path):
    data = yaml.safe_load(manifest.read_text())
    for p in data["pairs"]:
        yield p["id"], _rgb(manifest.parent / p["content"]), _rgb(manifest.parent / p["style"])


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _pct_keys():
    return [k for k in sys.modules if k.split(".")[0] == PCT.import_name]


@pytest.fixture
def pct_modules():
    """Restore the python_color_transfer entries of sys.modules after a test that imports it."""
    saved = {k: sys.modules[k] for k in _pct_keys()}
    yield
    for k in _pct_keys():
        del sys.modules[k]
    sys.modules.update(saved)


@pytest.fixture
def track(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return make_track(tmp_path / "track", n=3)


@pytest.fixture(scope="module")
def pct_folder():
    """The verified python-color-transfer folder of the session cache (fetched once if missing)."""
    return pp.ensure_cached(PCT)


def _direct_idt(folder: Path, content: np.ndarray, style: np.ndarray) -> np.ndarray:
    """The pinned package imported plainly from its folder (sys.path), with cv2's colour conversions."""
    import cv2

    sys.path.insert(0, str(folder))
    try:
        for k in _pct_keys():
            del sys.modules[k]
        from python_color_transfer.color_transfer import ColorTransfer
    finally:
        sys.path.remove(str(folder))
    assert Path(sys.modules["python_color_transfer.color_transfer"].__file__).is_relative_to(folder)
    out = ColorTransfer().pdf_transfer(
        img_arr_in=cv2.cvtColor(content, cv2.COLOR_RGB2BGR),
        img_arr_ref=cv2.cvtColor(style, cv2.COLOR_RGB2BGR),
        regrain=False,
    )
    return cv2.cvtColor(out, cv2.COLOR_BGR2RGB)


# --- each method against its package ----------------------------------------------------------


@pytest.mark.parametrize("method", ["reinhard", "mkl"])
def test_color_matcher_methods_match_a_direct_call(track, tmp_path, method):
    from color_matcher import ColorMatcher

    assert main(["baseline", method, "--track", str(track), "--out", "out"]) == 0
    for pid, content, style in _pairs(track):
        raw = ColorMatcher().transfer(src=content / 255.0, ref=style / 255.0, method=method)
        expected = np.rint(np.clip(raw, 0, 1) * 255).astype(np.uint8)
        got = _rgb(tmp_path / "out" / f"{pid}.png")
        np.testing.assert_array_equal(got, expected)
        assert not np.array_equal(got, content)


def test_histmatch_matches_skimage(track, tmp_path):
    from skimage.exposure import match_histograms

    assert main(["baseline", "histmatch", "--track", str(track), "--out", "out"]) == 0
    for pid, content, style in _pairs(track):
        expected = np.rint(np.clip(match_histograms(content / 255.0, style / 255.0, channel_axis=-1), 0, 1) * 255)
        got = _rgb(tmp_path / "out" / f"{pid}.png")
        np.testing.assert_array_equal(got, expected.astype(np.uint8))
        for ch in range(3):  # the output lies in the style's range; the content's top value maps to the style's
            assert style[..., ch].min() <= got[..., ch].min() and got[..., ch].max() == style[..., ch].max()


def test_histmatch_of_an_image_to_itself_is_the_image():
    from skimage import data

    fn = prepare_reference_baseline("histmatch").fn
    img = np.asarray(Image.fromarray(data.chelsea()).resize((40, 30)))
    np.testing.assert_array_equal(fn(img, img), img)


def test_idt_matches_a_direct_call(track, tmp_path, pct_folder, pct_modules):
    assert main(["baseline", "idt", "--track", str(track), "--out", "out"]) == 0
    for pid, content, style in _pairs(track):
        got = _rgb(tmp_path / "out" / f"{pid}.png")
        np.testing.assert_array_equal(got, _direct_idt(pct_folder, content, style))
        assert not np.array_equal(got, content)
    meta = yaml.safe_load((tmp_path / "out" / "method.yaml").read_text())
    assert meta["implementation"]["source"] == "pstbench cache"
    assert meta["implementation"]["path"] == str(pct_folder)


def test_identity_equals_the_content(track, tmp_path):
    assert main(["baseline", "identity", "--track", str(track), "--out", "out"]) == 0
    for pid, content, _ in _pairs(track):
        np.testing.assert_array_equal(_rgb(tmp_path / "out" / f"{pid}.png"), content)


def test_idt_draws_no_random_numbers(pct_folder):
    """The idt call neither reads nor advances numpy's global generator: its output does not depend
    on the seed and the generator's state is unchanged (so no seed is needed)."""
    fn = prepare_reference_baseline("idt").fn
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    b = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    outs = []
    for seed in (0, 12345):
        np.random.seed(seed)
        before = np.random.get_state()
        outs.append(fn(a, b))
        after = np.random.get_state()
        assert before[0] == after[0] and np.array_equal(before[1], after[1]) and before[2:] == after[2:]
    np.testing.assert_array_equal(outs[0], outs[1])


# --- folders, provenance, determinism ---------------------------------------------------------


def test_all_writes_one_folder_per_method_deterministically(track, tmp_path, capsys):
    assert main(["baseline", "all", "--track", str(track), "--out", "a"]) == 0
    assert main(["baseline", "all", "--track", str(track), "--out", "b"]) == 0
    err = capsys.readouterr().err
    assert "baseline idt: [3/3] p03" in err and "baseline reinhard: [1/3] p01" in err
    for m in REFERENCE_METHODS:
        a, b = tmp_path / "a" / m, tmp_path / "b" / m
        assert sorted(p.name for p in a.iterdir()) == ["method.yaml", "p01.png", "p02.png", "p03.png"]
        for pid in ("p01", "p02", "p03"):
            assert (a / f"{pid}.png").read_bytes() == (b / f"{pid}.png").read_bytes()
        ya, yb = yaml.safe_load((a / "method.yaml").read_text()), yaml.safe_load((b / "method.yaml").read_text())
        assert ya["command"].endswith("--out a") and yb["command"].endswith("--out b")
        ya.pop("command"), yb.pop("command")
        assert ya == yb
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_several_methods_in_the_given_order(track, tmp_path, capsys):
    assert main(["baseline", "mkl", "identity", "mkl", "--track", str(track), "--out", "o"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in out] == ["mkl", "identity"]
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["identity", "mkl"]


def test_method_yaml_lands_in_run_json(track, tmp_path):
    from pytest_pstbench.paired.tracks import load_manifest

    assert main(["baseline", "mkl", "--track", str(track), "--out", "mkl"]) == 0
    meta = yaml.safe_load((tmp_path / "mkl" / "method.yaml").read_text())
    t = load_manifest(track)
    assert meta["method"] == "mkl"
    assert meta["implementation"]["package"] == "color-matcher" and meta["implementation"]["version"] == "0.6.0"
    assert meta["implementation"]["call"] == 'ColorMatcher().transfer(src=src, ref=ref, method="mkl")'
    assert meta["track"] == {"id": "small", "dataset": "small", "revision": t.revision, "source": "local", "n_pairs": 3}
    assert meta["pstbench_version"] == pytest_pstbench.__version__
    assert meta["command"] == f"pstbench baseline mkl --track {track} --out mkl"
    proto = protocol_without_lpips(tmp_path / "p.yaml")
    assert main(["score", "--track", str(track), "--outputs", "mkl", "--protocol", str(proto)]) == 0
    run = json.loads((tmp_path / "results" / "small" / "mkl" / "run.json").read_text())
    assert run["method"] == meta and run["complete"] is True
    assert not [d for d in run["deviations"] if d["kind"] == "outputs_made_for_other_track"]

    # outputs whose method.yaml names another revision of the track: scored, but recorded as a deviation
    meta["track"]["revision"] = "0" * 12
    (tmp_path / "mkl" / "method.yaml").write_text(yaml.safe_dump(meta))
    assert main(["score", "--track", str(track), "--outputs", "mkl", "--name", "mkl2", "--protocol", str(proto)]) == 0
    run = json.loads((tmp_path / "results" / "small" / "mkl2" / "run.json").read_text())
    assert {
        "kind": "outputs_made_for_other_track",
        "method_yaml": {"track": "small", "revision": "0" * 12},
        "scored": {"track": "small", "revision": t.revision},
    } in run["deviations"]


# --- bad input --------------------------------------------------------------------------------


def test_unknown_method_is_a_one_line_error(track, tmp_path, capsys):
    assert main(["baseline", "reinhard", "nope", "--track", str(track), "--out", "x"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "'nope': unknown method" in line and "identity, reinhard, mkl, idt, histmatch or all" in line
    assert not (tmp_path / "x").exists()


def test_missing_track_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["baseline", "identity", "--track", "nowhere/track.yaml", "--out", "x"]) == 2
    assert "nowhere/track.yaml" in _one_error_line(capsys.readouterr().err)
    assert main(["baseline", "identity", "--out", "x"]) == 2
    assert "--track required" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "x").exists()


def test_existing_out_refused_unless_overwrite(track, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "p01.png").write_bytes(b"old")
    assert main(["baseline", "identity", "--track", str(track), "--out", "out"]) == 2
    assert "folder exists and is not empty" in _one_error_line(capsys.readouterr().err)
    assert (out / "p01.png").read_bytes() == b"old"
    assert main(["baseline", "identity", "--track", str(track), "--out", "out", "--overwrite"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["method.yaml", "p01.png", "p02.png", "p03.png"]
    (out / "notes.txt").write_text("mine")  # not something this command writes: never deleted
    assert main(["baseline", "identity", "--track", str(track), "--out", "out", "--overwrite"]) == 2
    assert "notes.txt" in _one_error_line(capsys.readouterr().err)
    assert (out / "notes.txt").read_text() == "mine"
    # several methods: every target is checked before anything is written
    (tmp_path / "multi" / "mkl").mkdir(parents=True)
    (tmp_path / "multi" / "mkl" / "x.png").write_bytes(b"x")
    assert main(["baseline", "identity", "mkl", "--track", str(track), "--out", "multi"]) == 2
    assert not (tmp_path / "multi" / "identity").exists()


def test_a_failing_pair_is_named_and_nothing_is_written(track, tmp_path, monkeypatch, capsys):
    import pytest_pstbench.paired.baselines as bl

    real = bl._prepare_histmatch

    def broken():
        prepared = real()
        calls = []

        def fn(content, style):
            calls.append(1)
            if len(calls) == 2:
                raise np.linalg.LinAlgError("SVD did not converge")
            return prepared.fn(content, style)

        return dataclasses.replace(prepared, fn=fn)

    monkeypatch.setattr(bl, "_prepare_histmatch", broken)
    assert main(["baseline", "histmatch", "--track", str(track), "--out", "out"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "baseline histmatch failed on pair p02" in line and "LinAlgError: SVD did not converge" in line
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_unreadable_content_is_a_one_line_error(track, tmp_path, capsys):
    (track.parent / "p02_content.png").write_bytes(b"not a png")
    assert main(["baseline", "identity", "--track", str(track), "--out", "out"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "p02_content.png" in line and "content of p02" in line
    assert not (tmp_path / "out").exists()


def test_wrong_color_matcher_version_is_refused(monkeypatch):
    import pytest_pstbench.paired.baselines as bl

    monkeypatch.setattr(bl, "_dist_version", lambda dist: "0.5.0" if dist == "color-matcher" else None)
    with pytest.raises(UserError, match=r"pinned to color-matcher 0\.6\.0, but 0\.5\.0 is installed"):
        prepare_reference_baseline("reinhard")


def test_missing_cv2_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cv2", None)  # import cv2 now fails, find_spec says absent
    monkeypatch.setattr(pp, "_LOADED", {})
    assert main(["baseline", "idt", "--fetch-only"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "needs the module cv2" in line and FIX in line


# --- fetching python-color-transfer into the cache --------------------------------------------


def _fake_wheel(src_folder: Path, path: Path) -> str:
    """A wheel zip with the real module files (so the file pins hold); returns its sha256."""
    with zipfile.ZipFile(path, "w") as zf:
        for rel in PCT.files:
            zf.write(src_folder / rel, rel)
        zf.writestr("python_color_transfer-0.1.2a0.dist-info/METADATA", "Name: python-color-transfer\n")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _no_subprocess(*a, **k):
    raise AssertionError("pip must not run")


def test_idt_fetches_the_pinned_wheel_once_into_the_cache(tmp_path, monkeypatch, pct_folder, pct_modules, capsys):
    """First use: pip download with the wheel's sha256 pinned, unzip into the cache, import from there;
    later uses: no pip."""
    wheel = tmp_path / "src.whl"
    fake = dataclasses.replace(PCT, sha256=_fake_wheel(pct_folder, wheel))
    monkeypatch.setattr(pp, "PYTHON_COLOR_TRANSFER", fake)
    monkeypatch.setattr(pp, "_LOADED", {})
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    seen = {}

    def fake_pip(cmd, *a, **k):
        seen["cmd"] = cmd
        assert cmd[1:4] == ["-m", "pip", "download"]
        for flag in ("--no-deps", "--require-hashes"):
            assert flag in cmd
        assert cmd[cmd.index("--only-binary") + 1] == ":all:"
        seen["req"] = Path(cmd[cmd.index("-r") + 1]).read_text()
        dest = Path(cmd[cmd.index("-d") + 1])
        dest.mkdir(parents=True, exist_ok=True)
        (dest / PCT.filename).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_pip)
    make_track(tmp_path / "track", n=2)
    monkeypatch.chdir(tmp_path)
    assert main(["baseline", "idt", "--track", "track", "--out", "out"]) == 0
    assert seen["req"] == f"python-color-transfer==0.1.2a0 --hash=sha256:{fake.sha256}\n"
    folder = tmp_path / "cache" / "packages" / "python-color-transfer-0.1.2a0"
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]  # no temporary folder left
    assert json.loads((folder / pp.MARKER).read_text())["sha256"] == fake.sha256
    assert "fetching the pinned wheel" in capsys.readouterr().err
    for pid, content, style in _pairs(tmp_path / "track" / "track.yaml"):
        np.testing.assert_array_equal(_rgb(tmp_path / "out" / f"{pid}.png"), _direct_idt(pct_folder, content, style))
    assert not _pct_keys() or all(sys.modules[k] is not None for k in _pct_keys())
    # second use: from the cache, pip not run
    monkeypatch.setattr(subprocess, "run", _no_subprocess)
    monkeypatch.setattr(pp, "_LOADED", {})
    assert main(["baseline", "idt", "--fetch-only"]) == 0
    assert f"pstbench cache: {folder}" in capsys.readouterr().out


def test_import_from_the_cache_leaves_sys_modules_alone(pct_folder, pct_modules, monkeypatch):
    monkeypatch.setattr(pp, "_LOADED", {})
    for k in _pct_keys():
        del sys.modules[k]
    mod, info = pp.load_pinned(PCT, "python_color_transfer.color_transfer", use_installed=False)
    assert info["source"] == "pstbench cache" and Path(mod.__file__).is_relative_to(pct_folder)
    assert _pct_keys() == []
    assert mod.ColorTransfer().rotation_matrices[1].shape == (3, 3)


def test_a_wheel_with_another_sha256_is_refused(tmp_path, pct_folder, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    wheel = tmp_path / PCT.filename
    _fake_wheel(pct_folder, wheel)
    with pytest.raises(UserError, match="is not the pinned 04ff213d"):
        pp.unpack_wheel(wheel, PCT)
    assert not (tmp_path / "cache" / "packages" / "python-color-transfer-0.1.2a0").exists()


def test_a_modified_cache_is_refused(tmp_path, pct_folder, monkeypatch):
    import shutil

    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    shutil.copytree(pct_folder, PCT.folder())
    (PCT.folder() / "python_color_transfer" / "utils.py").write_text("# edited\n")
    with pytest.raises(UserError, match="utils.py has sha256 .* does not match its pins|does not match its pins"):
        pp.ensure_cached(PCT)


def test_pip_failure_is_one_line_with_the_manual_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pp, "_LOADED", {})
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda cmd, *a, **k: subprocess.CompletedProcess(
            cmd, 1, "", "WARNING: retrying\nERROR: No matching distribution found for python-color-transfer==0.1.2a0\n"
        ),
    )
    assert main(["baseline", "idt", "--fetch-only"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "ERROR: No matching distribution found" in line
    assert "pip install --no-deps python-color-transfer==0.1.2a0" in line


def test_an_installed_pinned_copy_is_used_without_fetching(tmp_path, pct_folder, pct_modules, monkeypatch):
    import shutil

    site = tmp_path / "site"
    shutil.copytree(pct_folder / "python_color_transfer", site / "python_color_transfer")
    info_dir = site / "python_color_transfer-0.1.2a0.dist-info"
    info_dir.mkdir()
    (info_dir / "METADATA").write_text("Metadata-Version: 2.1\nName: python-color-transfer\nVersion: 0.1.2a0\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(pp, "_LOADED", {})
    monkeypatch.setattr(subprocess, "run", _no_subprocess)
    for k in _pct_keys():
        del sys.modules[k]
    mod, info = pp.load_pinned(PCT, "python_color_transfer.color_transfer")
    assert info["source"] == "installed" and Path(info["path"]) == site
    assert Path(mod.__file__).is_relative_to(site)
    assert not (tmp_path / "empty-cache").exists()


# --- the other kinds of track -----------------------------------------------------------------


def test_demo_track(tmp_path, monkeypatch):
    from pytest_pstbench.paired.tracks import resolve_track

    monkeypatch.chdir(tmp_path)
    assert main(["baseline", "identity", "--track", "demo", "--out", "demo-id"]) == 0
    track = resolve_track("demo")
    meta = yaml.safe_load((tmp_path / "demo-id" / "method.yaml").read_text())
    assert meta["track"] == {
        "id": "demo",
        "dataset": track.dataset_id,
        "revision": track.revision,
        "source": "demo",
        "n_pairs": len(track.pairs),
    }
    for pair in track.pairs:
        np.testing.assert_array_equal(_rgb(tmp_path / "demo-id" / f"{pair.id}.png"), _rgb(pair.content))


def test_remote_track_reads_its_content_split(tmp_path, monkeypatch):
    """pst50-paired-log from a stand-in Hub: the baseline runs on the Log content (content_log)."""
    from helpers.hub_server import FakeHub, make_pst50_files
    from skimage.exposure import match_histograms

    sha = "6ed86e3" + hashlib.sha1(b"pst50").hexdigest()[:33]  # resolves the manifest's pinned short revision
    files = make_pst50_files()
    hub = FakeHub().start()
    try:
        hub.add_commit("zrgong/PST50", sha, files, refs=["main"])
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("PSTBENCH_REMOTE_MANIFESTS", raising=False)
        monkeypatch.chdir(tmp_path)
        assert main(["data", "fetch", "pst50", "--splits", "content_log", "paired_style", "paired_gt"]) == 0
    finally:
        hub.stop()
    assert main(["baseline", "histmatch", "--track", "pst50-paired-log", "--out", "hm"]) == 0
    meta = yaml.safe_load((tmp_path / "hm" / "method.yaml").read_text())
    assert meta["track"]["id"] == "pst50-paired-log" and meta["track"]["source"] == "remote"
    assert meta["track"]["revision"] == sha and meta["track"]["n_pairs"] == 50
    content = np.asarray(Image.open(io.BytesIO(files["content_log/in7.png"])))
    style = np.asarray(Image.open(io.BytesIO(files["paired_style/tar7.png"])))
    expected = np.rint(np.clip(match_histograms(content / 255.0, style / 255.0, channel_axis=-1), 0, 1) * 255)
    np.testing.assert_array_equal(_rgb(tmp_path / "hm" / "pst50-007.png"), expected.astype(np.uint8))

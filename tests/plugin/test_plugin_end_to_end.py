"""End-to-end tests of the pytest plugin with pytester (each run in a subprocess, as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main as cli_main

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
def setup(pytester):
    manifest = make_track(pytester.path / "track")
    outputs = make_outputs(
        manifest, pytester.path / "mine" / "outputs"
    )  # run name: mine (a folder `outputs` names no method)
    return manifest, outputs


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_plugin_import_is_cheap():
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pytest_pstbench.plugin"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert "pytest_pstbench" in imported  # the measurement saw the plugin itself
    for heavy in ("numpy", "torch", "lpips", "skimage", "PIL", "scipy", "yaml", "pyiqa"):
        assert heavy not in imported, f"importing the plugin imported {heavy}"


def test_no_options_adds_nothing(pytester):
    pytester.makepyfile(
        test_user="""
        import sys
        def test_light():
            assert not {'numpy', 'torch', 'lpips', 'skimage'} & set(sys.modules)
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    assert "pstbench" not in result.stdout.str().replace("plugins:", "").split("collected")[1]
    assert not (pytester.path / "results").exists()


def test_no_options_empty_folder_collects_nothing(pytester):
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_empty_folder_one_item_per_pair_same_numbers_as_cli(pytester, setup, monkeypatch, capsys):
    manifest, outputs = setup
    result = _run(pytester, f"--pstbench-track={manifest}", f"--pstbench-outputs={outputs}", "-v")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4)
    for pid in ("p01", "p02", "p03", "p04"):
        result.stdout.fnmatch_lines([f"*pstbench-small::{pid} PASSED*"])
    result.stdout.fnmatch_lines(
        ["*track: small   protocol: pstbench   dataset: small@*   n=4*", "method*PSNR↑*SSIM↑*LPIPS↓*ΔE00↓*", "mine *±*"]
    )
    run_dir = pytester.path / "results" / "small" / "mine"
    monkeypatch.chdir(pytester.path)
    assert cli_main(["score", "--track", str(manifest), "--outputs", str(outputs), "--results", "cli-results"]) == 0
    cli_dir = pytester.path / "cli-results" / "small" / "mine"
    assert (run_dir / "metrics.csv").read_bytes() == (cli_dir / "metrics.csv").read_bytes()
    assert (run_dir / "summary.json").read_bytes() == (cli_dir / "summary.json").read_bytes()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["n_pairs"] == 4
    assert run["command"].startswith("pytest ")


def test_beside_user_tests(pytester, setup):
    manifest, outputs = setup
    pytester.makepyfile(test_user="def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    result = _run(pytester, f"--pstbench-track={manifest}", f"--pstbench-outputs={outputs}")
    result.assert_outcomes(passed=6)


def test_ini_options(pytester, setup):
    manifest, outputs = setup
    pytester.makeini(
        f"[pytest]\npstbench_track = {manifest.relative_to(pytester.path)}\n"
        f"pstbench_outputs = {outputs.relative_to(pytester.path)}\npstbench_name = from-ini\n"
    )
    result = _run(pytester)
    result.assert_outcomes(passed=4)
    assert (pytester.path / "results" / "small" / "from-ini" / "summary.json").is_file()


def test_xdist_gives_byte_identical_run_files(pytester, setup):
    manifest, outputs = setup
    common = (
        f"--pstbench-track={manifest}",
        f"--pstbench-outputs={outputs}",
        "--pstbench-name=serial",
        "--pstbench-no-cache",
    )
    r1 = _run(pytester, *common)
    r2 = _run(pytester, *common, "--pstbench-results=xdist", "-n", "2")
    r1.assert_outcomes(passed=4)
    r2.assert_outcomes(passed=4)
    a = pytester.path / "results" / "small" / "serial"
    b = pytester.path / "xdist" / "small" / "serial"
    for name in ("metrics.csv", "summary.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert json.loads((b / "run.json").read_text())["complete"] is True


def test_bad_output_fails_that_item_with_the_io_message(pytester, setup):
    manifest, outputs = setup
    gray = np.asarray(Image.open(outputs / "p02.png").convert("L"))
    Image.fromarray(gray).save(outputs / "p02.png")
    (outputs / "p03.png").unlink()
    result = _run(pytester, f"--pstbench-track={manifest}", f"--pstbench-outputs={outputs}")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert "p02.png (output): is 8-bit grayscale (Pillow mode L), but protocol pstbench requires 8-bit RGB" in out
    assert "p03.png (output): missing output for pair p03" in out
    assert "Traceback" not in out
    run = json.loads((pytester.path / "results" / "small" / "mine" / "run.json").read_text())
    assert run["complete"] is False
    assert [f["pair"] for f in run["failures"]] == ["p02", "p03"]
    assert "run incomplete: 2 of 4 pairs scored, 2 failed" in out


def test_stray_png_is_a_usage_error(pytester, setup):
    manifest, outputs = setup
    Image.new("RGB", (4, 4)).save(outputs / "p99.png")
    (outputs / "notes.txt").write_text("ignored")
    result = _run(pytester, f"--pstbench-track={manifest}", f"--pstbench-outputs={outputs}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*PNG files not named after a pair of track small: p99.png; fix: name outputs <pair_id>.png*"]
    )
    assert not (pytester.path / "results").exists()


def test_unknown_track_is_a_usage_error(pytester):
    result = _run(pytester, "--pstbench-track=nonesuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--track nonesuch: unknown track*"])
    assert "Traceback" not in result.stderr.str()


def test_user_test_with_pstbench_score(pytester, setup):
    manifest, outputs = setup
    pytester.makepyfile(
        test_method="""
        import numpy as np
        from PIL import Image

        def test_my_method(pstbench_pair, pstbench_score):
            content = np.asarray(Image.open(pstbench_pair.content).convert("RGB"))
            metrics = pstbench_score(content)  # identity, in memory
            assert set(metrics) == {"psnr", "ssim", "lpips", "delta_e00", "hcorr_gt", "hcorr_style"}
        """
    )
    result = _run(pytester, f"--pstbench-track={manifest}", "--pstbench-name=inproc", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_my_method[[]p01[]] PASSED*"])
    run_dir = pytester.path / "results" / "small" / "inproc"
    ident = pytester.path / "results" / "small" / "identity"
    # the in-memory identity scores equal the CLI's Identity run (content files as outputs)
    assert (
        cli_main(
            ["score", "--track", str(manifest), "--outputs", str(outputs), "--results", str(pytester.path / "results")]
        )
        == 0
    )
    assert (run_dir / "metrics.csv").read_text() == (ident / "metrics.csv").read_text()


def test_pstbench_pair_without_track_is_a_clear_error(pytester):
    pytester.makepyfile(test_x="def test_x(pstbench_pair):\n    pass\n")
    result = _run(pytester)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*uses pstbench_pair but no track is set; fix: pass --pstbench-track*"])


def test_identity_outputs_in_pytest_equal_cli_identity(pytester, setup):
    manifest, outputs = setup
    result = _run(pytester, f"--pstbench-track={manifest}", "--pstbench-outputs=identity", "--pstbench-results=py")
    result.assert_outcomes(passed=4)
    assert (
        cli_main(
            ["score", "--track", str(manifest), "--outputs", str(outputs), "--results", str(pytester.path / "cli")]
        )
        == 0
    )
    for f in ("metrics.csv", "summary.json"):
        assert (pytester.path / "py/small/identity" / f).read_bytes() == (
            pytester.path / "cli/small/identity" / f
        ).read_bytes()


def test_pstbench_images_reads_the_pair_as_the_protocol_does(pytester, setup):
    # issue #24: a content image with EXIF orientation 6 is given rotated, as the scorer reads it
    import yaml

    manifest, _ = setup
    data = yaml.safe_load(manifest.read_text())
    src = manifest.parent / "p01_content.png"
    exif = Image.Exif()
    exif[0x0112] = 6  # display needs 90 degrees clockwise
    Image.open(src).save(manifest.parent / "p01_content.jpg", exif=exif.tobytes())
    data["pairs"][0]["content"] = "p01_content.jpg"
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    pytester.makepyfile(
        test_images="""
        import numpy as np
        from PIL import Image

        def test_images(pstbench_pair, pstbench_images, pstbench_score):
            raw = np.asarray(Image.open(pstbench_pair.content).convert("RGB"))
            got = pstbench_images.content
            if pstbench_pair.id == "p01":
                assert got.shape == (raw.shape[1], raw.shape[0], 3) and np.array_equal(got, np.rot90(raw, -1))
            else:
                assert np.array_equal(got, raw)
            assert pstbench_images.inputs == (pstbench_images.content, pstbench_images.style)
            assert np.array_equal(pstbench_images.reference, np.asarray(Image.open(pstbench_pair.reference).convert("RGB")))
            pstbench_score(pstbench_images.reference)
        """
    )
    result = _run(pytester, f"--pstbench-track={manifest}", "--pstbench-name=img", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_images[[]p01[]] PASSED*"])

"""Issue #44 cases 4 and 7: every spelling of the plugin's options gives one configuration, and a
pytest-xdist mode that runs every item on every worker is refused.

Case 4: pytest picks its rootdir and ini file before any plugin's options are known, so the value of
`--pstbench-track PATH` (space form) was taken for a test path; with PATH outside the project pytest read
no pytest.ini at all: its pstbench_min lines (even two for one metric) were never read, exit 0 and no gate.
The space form is now refused when it changed the ini file pytest read (one line, the `=` form as the fix);
otherwise the space form, the `=` form, ini lines, ini addopts and PYTEST_ADDOPTS give the same gate
outcome, and ini lines that give one metric two bounds are refused as on the command line, naming the ini
file and the key.
Case 7: `-n 2 --dist each` scored every pair twice (8 items for 4 pairs) and wrote a complete run; it is
refused before any worker starts, as is `--tx ... --dist each`."""

from __future__ import annotations

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

TEST_FILE = "def test_plain():\n    pass\n"


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A track, its outputs and a protocol in a folder outside the pytester project."""
    root = tmp_path_factory.mktemp("outside")
    manifest = make_track(root / "track", n=4)
    return manifest, make_outputs(manifest, root / "out"), protocol_without_lpips(root / "proto.yaml")


def _inside(pytester):
    manifest = make_track(pytester.path / "track", n=4)
    make_outputs(manifest, pytester.path / "out")
    protocol_without_lpips(pytester.path / "proto.yaml")
    pytester.makepyfile(TEST_FILE)


OPTIONS = (("track", "track/track.yaml"), ("outputs", "out"), ("protocol", "proto.yaml"), ("name", "m"))


def _spell(pytester, monkeypatch, spelling: str, bound: str) -> list[str]:
    """The options of OPTIONS and `--pstbench-min BOUND` in one spelling; returns the command line's args."""
    pairs = [*OPTIONS, ("min", bound)]
    space = [w for name, value in pairs for w in (f"--pstbench-{name}", value)]
    if spelling == "space":
        return space
    if spelling == "equals":
        return [f"--pstbench-{name}={value}" for name, value in pairs]
    if spelling == "override":
        return [w for name, value in pairs for w in ("-o", f"pstbench_{name}={value}")]
    if spelling == "ini":
        pytester.makeini("[pytest]\n" + "".join(f"pstbench_{name} = {value}\n" for name, value in pairs))
    elif spelling == "addopts":
        pytester.makeini("[pytest]\naddopts = " + " ".join(space) + "\n")
    elif spelling == "env":
        monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(space))
    return []


@pytest.mark.parametrize("spelling", ["space", "equals", "override", "ini", "addopts", "env"])
@pytest.mark.parametrize("bound, passes", [("psnr=1", True), ("psnr=1000", False)])
def test_every_spelling_gives_the_same_gate_outcome(pytester, monkeypatch, spelling, bound, passes):
    """issue #44 case 4: the same options in every spelling, the same gate outcome."""
    _inside(pytester)
    args = _spell(pytester, monkeypatch, spelling, bound)
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
    out = "\n".join(r.outlines + r.errlines)
    assert r.ret == (pytest.ExitCode.OK if passes else pytest.ExitCode.TESTS_FAILED), out
    assert ("pstbench gate passed" if passes else "pstbench gate FAILED: PSNR↑ (psnr) mean") in out
    assert (pytester.path / "results" / "small" / "m" / "run.json").is_file()


def test_space_form_path_that_moves_the_ini_file_is_refused(pytester, outside):
    """issue #44 case 4: `--pstbench-track PATH` outside the project made pytest read no pytest.ini (its
    bounds unread, exit 0): now one line naming the option and the `=` form; nothing is written."""
    manifest, outputs, proto = outside
    pytester.makeini(f"[pytest]\npstbench_min = psnr=1000\npstbench_protocol = {proto}\npstbench_outputs = {outputs}\n")
    pytester.makepyfile(TEST_FILE)
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--pstbench-track", str(manifest))
    err = [line for line in r.errlines if line.strip()]
    assert r.ret == pytest.ExitCode.USAGE_ERROR, "\n".join(r.outlines + r.errlines)
    assert len(err) == 1 and "Traceback" not in "\n".join(r.outlines + r.errlines)
    assert err[0].startswith(f"ERROR: pstbench: --pstbench-track {manifest}: ")
    assert str(pytester.path / "tox.ini") in err[0]  # the ini file it would have skipped
    assert f"fix: give it as --pstbench-track={manifest}" in err[0]
    assert not (pytester.path / "results").exists()
    # the `=` form reads the ini file: its bound fails the gate
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--pstbench-track={manifest}")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*pstbench gate FAILED: PSNR↑ (psnr) mean * is below the minimum 1000*"])


def test_space_form_path_that_keeps_the_ini_file_is_accepted(pytester, outside):
    """issue #44 case 4: the space form is refused only where it changed pytest's configuration (here
    `-c` names the ini file, so the value cannot move it)."""
    manifest, outputs, proto = outside
    ini = pytester.makeini(
        f"[pytest]\npstbench_min = psnr=1000\npstbench_protocol = {proto}\npstbench_outputs = {outputs}\n"
    )
    pytester.makepyfile(TEST_FILE)
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-c", str(ini), "--pstbench-track", str(manifest))
    assert r.ret == pytest.ExitCode.TESTS_FAILED, "\n".join(r.outlines + r.errlines)
    r.stdout.fnmatch_lines(["*pstbench gate FAILED: PSNR↑ (psnr) mean * is below the minimum 1000*"])


@pytest.mark.parametrize(
    "key, lines",
    [
        ("pstbench_min", ("psnr=1000", "psnr=10")),
        ("pstbench_max", ("psnr=10", "psnr=50")),
        ("pstbench_gate_margin", ("psnr=0.1", "psnr=0.2")),
    ],
)
def test_a_metric_given_twice_in_the_ini_file_names_the_file_and_key(pytester, outside, key, lines):
    """issue #44 case 4: two ini lines for one metric are refused as on the command line, the one line naming
    the ini file and the key (not --pstbench-min, which was not given)."""
    manifest, outputs, proto = outside
    ini = pytester.makeini(f"[pytest]\n{key} =\n    {lines[0]}\n    {lines[1]}\n")
    pytester.makepyfile(TEST_FILE)
    r = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-outputs={outputs}",
        f"--pstbench-protocol={proto}",
    )
    err = [line for line in r.errlines if line.strip()]
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert len(err) == 1, err
    a, b = (line.partition("=")[2] for line in lines)
    assert (
        err[0]
        == f"ERROR: pstbench: {ini}: {key}: two {'margins' if 'margin' in key else 'values'} for psnr ({a} and {b}); fix: give one"
    )
    # the same lines on the command line: the same refusal, naming the option
    option = "--pstbench-" + key[len("pstbench_") :].replace("_", "-")
    pytester.makeini("[pytest]\n")
    r = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-outputs={outputs}",
        f"--pstbench-protocol={proto}",
        f"{option}={lines[0]}",
        f"{option}={lines[1]}",
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{option}: two " in "\n".join(r.errlines)


@pytest.mark.parametrize("dist_args", [("-n", "2", "--dist", "each"), ("--dist=each", "--tx=2*popen")])
def test_dist_each_is_refused(pytester, outside, dist_args):
    """issue #44 case 7: xdist's `each` runs every item on every worker (each pair scored twice, then counted
    once as if the run were plain): refused before any worker starts, one line naming the option and the fix."""
    pytest.importorskip("xdist")
    manifest, outputs, proto = outside
    pytester.makepyfile(TEST_FILE)
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-outputs={outputs}",
        f"--pstbench-protocol={proto}",
        *dist_args,
    )
    out = r.stdout.str() + r.stderr.str()
    err = [line for line in r.stderr.str().splitlines() if line.strip()]
    assert r.ret == pytest.ExitCode.USAGE_ERROR, out
    assert len(err) == 1 and "Traceback" not in out, out
    assert err[0].startswith("ERROR: pstbench: --dist each: ")
    assert "fix: " in err[0] and "--dist load" in err[0]
    assert "created:" not in out  # no worker was started
    assert not (pytester.path / "results").exists()

"""Issue #32 items 14 and 20: every output file the kit writes goes through one atomic writer
(core/files/write.py). A folder given where a file belongs, or a full disk, is one line naming the file
and the fix (exit 2, no traceback), and the previous output stays byte-identical, with no
temporary file left beside it.

The full disk is real: the test process's RLIMIT_FSIZE is lowered around the command (Python ignores
SIGXFSZ, so a write past the limit fails with EFBIG, as on a full disk with ENOSPC).
Found by the third audit (#32)."""

from __future__ import annotations

import ast
import errno
from pathlib import Path

import pytest
from helpers.disk import full_disk
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main


def disk_full(limit: int = 16):
    """Writes past `limit` bytes of any file fail (OSError EFBIG) while inside."""
    return full_disk(limit)


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under `path` (or `path` itself) -> its bytes."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def one_error_line(capsys, *fragments: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    err = [line for line in err if line.startswith("pstbench: error:") or "Traceback" in line]
    assert len(err) == 1, err
    assert "fix:" in err[0]
    for f in fragments:
        assert f in err[0], (f, err[0])
    return err[0]


def no_temporaries(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")], list(folder.iterdir())


def _score(manifest: Path, outputs: Path, name: str, results: Path, proto: Path) -> str:
    argv = [
        "score",
        "--track",
        str(manifest),
        "--outputs",
        str(outputs),
        "--name",
        name,
        "--results",
        str(results),
        "--protocol",
        str(proto),
        "--no-cache",
    ]
    assert main(argv) == 0
    return str(results / "small" / name)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Two scored runs of a 4-pair track (outputs 30% and 70% of the way to the reference) and a votes file."""
    root = tmp_path_factory.mktemp("writes")
    manifest = make_track(root / "track", n=4)
    proto = protocol_without_lpips(root / "proto.yaml")
    outs = {
        name: make_outputs(manifest, root / "outs" / name, strength=s) for name, s in (("alpha", 0.3), ("beta", 0.7))
    }
    runs = [_score(manifest, folder, name, root / "results", proto) for name, folder in outs.items()]
    votes = root / "votes.csv"
    votes.write_text(
        "task_id,k,judge,best,worst\n" + "".join(f"t,2,j{i},{'a' if i < 8 else 'b'},\n" for i in range(10))
    )
    return {"root": root, "manifest": manifest, "proto": proto, "outs": outs, "votes": votes, "runs": runs}


def full_disk_keeps(capsys, argv: list[str], folder: Path, named: str, *, keep_beside: Path | None = None) -> None:
    """`argv` writes `folder`; run again on a full disk: exit 2, one line naming `named`, `folder` as it was,
    and no temporary file beside it (in `keep_beside`, default `folder`)."""
    assert main(argv) == 0
    old = snapshot(folder)
    capsys.readouterr()
    with disk_full(64):
        assert main(argv) == 2
    one_error_line(capsys, named)
    assert snapshot(folder) == old
    no_temporaries(keep_beside or folder)


# ---- an output path that is a folder ------------------------------------------------------------------
def test_table_out_a_folder_is_one_line(setup, tmp_path, capsys):
    assert main(["table", *setup["runs"], "--out", str(tmp_path)]) == 2
    one_error_line(capsys, str(tmp_path), "is a folder")
    assert list(tmp_path.iterdir()) == []


def test_consensus_out_a_folder_is_one_line(setup, tmp_path, capsys):
    assert main(["vab", "consensus", str(setup["votes"]), "--out", str(tmp_path)]) == 2
    one_error_line(capsys, str(tmp_path), "is a folder")
    assert list(tmp_path.iterdir()) == []


# ---- a full disk: the previous output stays -----------------------------------------------------------
def test_table_out_on_a_full_disk_keeps_the_old_table(setup, tmp_path, capsys):
    out = tmp_path / "table.md"
    assert main(["table", *setup["runs"], "--out", str(out), "--format", "csv"]) == 0
    old = snapshot(tmp_path)
    capsys.readouterr()
    with disk_full():
        assert main(["table", *setup["runs"], "--out", str(out)]) == 2
    one_error_line(capsys, str(out), "File too large")
    assert snapshot(tmp_path) == old


def test_consensus_out_on_a_full_disk_keeps_the_old_file(setup, tmp_path, capsys):
    out = tmp_path / "accepted.csv"
    out.write_text("previous\n")
    with disk_full(4):
        assert main(["vab", "consensus", str(setup["votes"]), "--out", str(out)]) == 2
    one_error_line(capsys, str(out))
    assert snapshot(tmp_path) == {"accepted.csv": b"previous\n"}


def test_sensitivity_on_a_full_disk_keeps_the_previous_analysis(setup, tmp_path, capsys):
    """Item 14: analysis.json was deleted before the new files were written, then a traceback."""
    out = tmp_path / "sens"
    argv = [
        "sensitivity",
        "--track",
        str(setup["manifest"]),
        f"a={setup['outs']['alpha']}",
        f"b={setup['outs']['beta']}",
        "--variants",
        "aggregation-median",
        "--out",
        str(out),
        "--protocol",
        str(setup["proto"]),
    ]
    full_disk_keeps(capsys, argv, out, str(out))
    assert {"analysis.json", "analysis.md", "scores.csv"} <= set(snapshot(out))


def test_report_on_a_full_disk_keeps_the_previous_report(setup, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "report"
    argv = ["report", *setup["runs"], "--out", str(out), "--track", str(setup["manifest"])]
    full_disk_keeps(capsys, argv, out, str(out), keep_beside=tmp_path)


def test_baseline_on_a_full_disk_keeps_the_previous_outputs(setup, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["baseline", "identity", "--track", str(setup["manifest"]), "--out", "out", "--overwrite"]
    full_disk_keeps(capsys, argv, tmp_path / "out", "out: cannot write the baseline outputs", keep_beside=tmp_path)
    assert "method.yaml" in snapshot(tmp_path / "out")


def test_score_on_a_full_disk_keeps_the_previous_run(setup, tmp_path, capsys):
    results = tmp_path / "results"
    argv = [
        "score",
        "--track",
        str(setup["manifest"]),
        "--outputs",
        str(setup["outs"]["alpha"]),
        "--name",
        "alpha",
        "--results",
        str(results),
        "--protocol",
        str(setup["proto"]),
        "--no-cache",
    ]
    full_disk_keeps(
        capsys, argv, results / "small" / "alpha", str(results / "small" / "alpha"), keep_beside=results / "small"
    )


# ---- the writer itself ------------------------------------------------------------------------------------
def test_the_writer_keeps_the_old_file_on_enospc(tmp_path, monkeypatch):
    """The writer's one os-level write raising ENOSPC: the old file stays, one UserError naming the file."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.files import write as outputs

    target = tmp_path / "a.txt"
    target.write_text("old\n")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs, "_os_write", full)
    with pytest.raises(UserError) as info:
        outputs.write_atomic(target, "new text\n")
    msg = str(info.value)
    assert "\n" not in msg and str(target) in msg and "No space left on device" in msg and "fix:" in msg
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_several_files_replace_the_sealing_file_last(tmp_path, monkeypatch):
    """write_files: nothing is replaced until every new file is written; the last file named (the seal,
    e.g. analysis.json) is never left old beside new others."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.files import write as outputs

    for name in ("a.csv", "b.md", "seal.json"):
        (tmp_path / name).write_text(f"old {name}\n")
    real, calls = outputs._os_write, []

    def full_on_third(fd, data):
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(outputs, "_os_write", full_on_third)
    with pytest.raises(UserError, match="seal.json"):
        outputs.write_files(tmp_path, {"a.csv": "new a\n", "b.md": "new b\n", "seal.json": "new seal\n"})
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        n: f"old {n}\n" for n in ("a.csv", "b.md", "seal.json")
    }
    monkeypatch.setattr(outputs, "_os_write", real)
    outputs.write_files(tmp_path, {"a.csv": "new a\n", "b.md": "new b\n", "seal.json": "new seal\n"})
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "a.csv": "new a\n",
        "b.md": "new b\n",
        "seal.json": "new seal\n",
    }


# ---- item 21: labels are shown literally in the report's figures -----------------------------------------
def test_report_on_a_run_named_like_math_text(setup, tmp_path, capsys):
    """`v$^{$` was parsed by matplotlib as math text (ValueError traceback); the label is shown as written."""
    pytest.importorskip("matplotlib")
    results = tmp_path / "results"
    name = "v$^{$"
    assert (
        main(
            [
                "score",
                "--track",
                str(setup["manifest"]),
                "--outputs",
                str(setup["outs"]["alpha"]),
                "--name",
                name,
                "--results",
                str(results),
                "--protocol",
                str(setup["proto"]),
                "--no-cache",
            ]
        )
        == 0
    )
    out = tmp_path / "report"
    sens = tmp_path / "sens"
    assert (
        main(
            [
                "sensitivity",
                "--track",
                str(setup["manifest"]),
                f"{name}={setup['outs']['alpha']}",
                f"b={setup['outs']['beta']}",
                "--variants",
                "aggregation-median",
                "--out",
                str(sens),
                "--protocol",
                str(setup["proto"]),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "report",
                str(results / "small" / name),
                setup["runs"][1],
                "--out",
                str(out),
                "--track",
                str(setup["manifest"]),
                "--sensitivity",
                str(sens),
            ]
        )
        == 0
    )
    assert name in (out / "index.html").read_text(encoding="utf-8").replace("&#x27;", "'")
    from pytest_pstbench.paired.report import figures, sensitivity

    texts = []
    real = figures.save_figure

    def spy(fig, path):
        texts.extend(
            t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_parse_math"))
        )
        real(fig, path)

    import unittest.mock as mock

    with mock.patch.object(figures, "save_figure", spy), mock.patch.object(sensitivity, "save_figure", spy):
        assert (
            main(
                [
                    "report",
                    str(results / "small" / name),
                    setup["runs"][1],
                    "--out",
                    str(tmp_path / "r2"),
                    "--track",
                    str(setup["manifest"]),
                    "--sensitivity",
                    str(sens),
                ]
            )
            == 0
        )
    assert name in texts


# ---- one writer: nothing else in the package writes or renames files into place ---------------------
PACKAGE = Path(__file__).resolve().parents[2] / "pytest_pstbench"
_FILE_CALLS = (
    {("os", n) for n in ("replace", "rename", "fdopen", "write", "link")}
    | {("tempfile", n) for n in ("mkstemp", "NamedTemporaryFile")}
    | {("shutil", n) for n in ("copyfile", "copy", "copy2", "move")}
)

# Where a file is written other than through core/files/write.py, and why that is not a second writer.
# A module that starts writing files joins this list only with a reason; a stale entry fails the test.
OTHER_WRITES = {
    "core/files/write.py": "the one atomic writer (write_atomic, write_files, write_new)",
    "core/hub/client.py": "a Hub download streamed into a temporary file beside the target and renamed into place "
    "once complete (what huggingface_hub's own download did); a dataset's files are then verified",
    "core/store/folder.py": "the run store's hard-linked copies of a replaced run folder's other entries",
    "core/store/versions.py": "`pstbench history`: a run folder's files at one commit, read from git's objects into a "
    "temporary folder (the work tree is never touched)",
    "data/fetch.py": "dataset files placed by hard link or copy of verified files, renamed into place",
    "data/pinned_packages.py": "a wheel unpacked into a staging_dir folder, renamed into place",
    "data/pipfetch.py": "pip's requirements file in a temporary folder",
    "data/remote_selection.py": "a selection track extracted into a staging_dir folder",
    "data/weights/pyiqa_fetch.py": "a pyiqa weight file streamed into a hidden part file beside its place, checked "
    "(length, sha256) and only then renamed into place; the part file removed on failure",
    "data/weights/sources.py": "a download into a temporary folder, and torchvision's own cache file",
    "plugin/verdict.py": "appends to $GITHUB_STEP_SUMMARY, a file GitHub owns",
    "report/history.py": "`pstbench history --plot`: the plots written into a staging_dir folder, renamed into place",
    "selection/answerfile.py": "the answers file: an append-only log under its writer lock",
    "selection/ask/export.py": "an export folder built in a staging_dir folder, renamed into place",
}


def direct_writes(tree: ast.AST) -> list[int]:
    """Line numbers of os.replace/rename/write, tempfile.mkstemp, shutil.copy*, .write_text/.write_bytes and
    open(..., "w"/"a"/"x"/"+")."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Attribute):
            if (
                isinstance(fn.value, ast.Name)
                and (fn.value.id, fn.attr) in _FILE_CALLS
                or fn.attr in ("write_text", "write_bytes")
            ):
                lines.append(node.lineno)
        elif isinstance(fn, ast.Name) and fn.id == "open":
            mode = (
                node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            )
            if mode is not None and (not isinstance(mode, ast.Constant) or any(c in str(mode.value) for c in "wax+")):
                lines.append(node.lineno)
    return lines


def test_files_are_written_only_through_the_one_writer():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = direct_writes(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    unexplained = {rel: lines for rel, lines in found.items() if rel not in OTHER_WRITES}
    assert unexplained == {}, (
        "write output files with core.files.write.write_atomic/write_files (or explain in OTHER_WRITES)"
    )
    assert sorted(set(OTHER_WRITES) - set(found)) == [], "stale OTHER_WRITES entries"


def test_the_write_guard_sees_each_form():
    for src in (
        "import os\nos.replace('a', 'b')",
        "from pathlib import Path\nPath('a').write_text('x')",
        "open('a', 'w')",
        "open('a', mode='ab')",
        "import tempfile\ntempfile.mkstemp()",
        "import shutil\nshutil.copyfile('a','b')",
    ):
        assert direct_writes(ast.parse(src)), src
    assert direct_writes(ast.parse("open('a')\nopen('a', 'rb')\nimport os\nos.path.join('a')")) == []

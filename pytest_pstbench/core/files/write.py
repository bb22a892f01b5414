"""Writing output files, for every command and both front doors: the one atomic writer.

`write_atomic(path, text)` writes one file, `write_files(folder, files)` several that belong together
(`pstbench sensitivity`'s scores.csv, analysis.md and analysis.json). Each new file is written in full
to a temporary name beside its target (`.<name>.XXXX.tmp`, mode 0666 less the umask) and fsynced; only
when every one is on disk are they renamed into place, in the order given. So a full disk, a folder
where a file belongs or an unwritable place leaves every previous file as it was, no temporary file
behind, and raises one UserError: `<path>: cannot write <what> (<reason>); fix: <fix>; the previous
file (if any) is unchanged`. When several files are written, the last one named seals the others (it
is what readers trust): the old one is removed before the first rename, so an old seal never sits
beside new files even if the process is killed between the renames.

Whole folders (run folders, reports, baseline outputs) are built in a staging folder and swapped into
place (`staging_dir`, `swap_dir_into_place`, below); their files are written with `write_new`, the same os-level write.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_pstbench.core.errors import UserError

_os_write = os.write  # the one os-level write of an output file (a full disk fails here)

DEFAULT_FIX = "free some space or write to another place"


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fill(fd: int, data: bytes, durable: bool = True) -> None:
    """Write all of `data` to the open file `fd` and (when `durable`) fsync it; OSError propagates."""
    view = memoryview(data)
    while view:
        n = _os_write(fd, view)
        view = view[n:]
    if durable:
        os.fsync(fd)


def _encode(text: str | bytes, path) -> bytes:
    """UTF-8 bytes of `text`; text that holds a byte of a file-system name that is not UTF-8 (a lone surrogate)
    cannot be written as UTF-8: one UserError naming the file (the commands refuse such arguments first)."""
    if isinstance(text, bytes):
        return text
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        from pytest_pstbench.core.paths import shown

        bad = shown(exc.object[max(0, exc.start - 40) : exc.end + 10])
        raise UserError(
            f"{shown(path)}: not written: its text holds a byte that is not UTF-8 (...{bad}..., e.g. a path "
            "as the OS gives it); fix: rename that file or folder to a UTF-8 name"
        ) from None


def write_new(path: Path, text: str | bytes) -> None:
    """Create the new file `path` (it must not exist; mode 0666 less the umask) holding `text` (UTF-8),
    fsynced. OSError propagates: for files inside a staging folder, which is discarded whole."""
    data = _encode(text, path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        _fill(fd, data)
    finally:
        os.close(fd)


def os_reason(exc: OSError) -> str:
    """An OSError as a few words on one line ("No space left on device"; the caller names the file)."""
    return " ".join(str(exc.strerror or exc).split())


def write_files(
    folder: Path,
    files: dict[str, str | bytes],
    *,
    what: str | None = None,
    fix: str = DEFAULT_FIX,
    durable: bool = True,
) -> None:
    """Replace the files `files` (name -> text or bytes) in `folder` (created if missing), all or none
    (see the module docstring). `what` names the output in the error (default: the file's name).
    `durable=False` skips the fsync (cache entries: a lost one after a power cut is a miss, and a run
    writes thousands), never the atomic rename."""
    folder = Path(folder)
    staged: list[tuple[str, Path, Path]] = []  # (name, temporary, target)
    current = None
    try:
        for name, text in files.items():
            current = folder / name
            if current.is_dir():
                raise UserError(
                    f"{current}: cannot write {what or 'the file'} (it is a folder); fix: give a file "
                    f"name, e.g. {current / 'out.txt'}"
                )
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except FileExistsError:  # a file where the folder belongs (or above it)
                raise NotADirectoryError(errno.ENOTDIR, f"{folder} is not a folder") from None
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            staged.append((name, Path(tmp), current))
            try:
                os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes it 0600; an output follows the umask
                _fill(fd, _encode(text, current), durable)
            finally:
                os.close(fd)
        if len(staged) > 1 and staged[-1][2].exists():
            current = staged[-1][2]
            os.unlink(current)  # the old seal must not vouch for the new files while they are renamed in
        for _name, tmp, target in staged:
            current = target
            os.replace(tmp, target)
    except OSError as exc:
        kept = (
            "the previous files (if any) are unchanged" if len(files) > 1 else "the previous file (if any) is unchanged"
        )
        raise UserError(
            f"{current}: cannot write {what or 'the file'} ({os_reason(exc)}); fix: {fix}; {kept}"
        ) from None
    finally:
        for _name, tmp, _target in staged:
            if tmp.exists():
                tmp.unlink()


def write_atomic(
    path: Path, text: str | bytes, *, what: str | None = None, fix: str = DEFAULT_FIX, durable: bool = True
) -> None:
    """Replace the file `path` by one holding `text` (UTF-8 when a str), atomically: on failure the old
    file is unchanged and UserError names `path`, the reason and `fix`."""
    path = Path(path)
    write_files(path.parent, {path.name: text}, what=what, fix=fix, durable=durable)


# ---- folders: built beside their place, swapped in whole ------------------------------------------------
@contextmanager
def staging_dir(target: Path, *, what: str, fix: str, tag: str = "build") -> Iterator[Path]:
    """A new empty folder (mode 0755) next to `target`, named `.<target name>.<tag>-XXXX`, in which
    to build what is then renamed to `target` (same file system, so the rename is atomic). Creates
    `target`'s parent first. When either fails: UserError `<parent>: cannot <what> here (<OSError>);
    fix: <fix>`. An OSError raised while building (a full disk) becomes one UserError naming `target`
    too. On exit the folder is removed if it is still there (the build failed or was not moved into
    place)."""
    parent = Path(os.path.abspath(target)).parent  # lexical: "." or "x/.." still get their real parent
    tmp = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{Path(target).name}.{tag}-", dir=parent))
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; what is built is an ordinary folder
    except OSError as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"{parent}: cannot {what} here ({exc}); fix: {fix}") from None
    try:
        yield tmp
    except OSError as exc:  # a full disk while building: the folder is discarded, `target` is unchanged
        raise UserError(
            f"{target}: cannot {what} ({os_reason(exc)}); fix: free some space, or {fix}; "
            f"{Path(target).name} is unchanged"
        ) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def swap_dir_into_place(new: Path, target: Path) -> None:
    """Rename the folder `new` to `target`. An existing `target` (which the caller has checked may be
    replaced) is first moved aside, and deleted only after the rename; if the rename fails it is moved
    back, so `target` is either the old folder or the new one. OSError propagates."""
    target = Path(os.path.abspath(target))
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
    try:
        os.rename(new, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def replace_stale_dir(
    new: Path, target: Path, *, what: str, current: Callable[[], bool] | None = None, attempts: int = 5
) -> bool:
    """Rename the finished folder `new` to `target`, a cache folder that concurrent builders (xdist
    workers, other processes) may be replacing too. Returns True when `new` was moved in, False when
    `current()` says the `target` already there is a finished, usable build (another builder won; `new`
    is left for the caller to remove). Otherwise an existing `target` is stale: it is moved aside
    atomically, deleted, and the rename tried again. `current` may raise UserError for a `target` that
    must not be replaced. After `attempts` tries: UserError `<target>: could not move the <what> into
    place (another process keeps replacing it); retry`."""
    target = Path(os.path.abspath(target))
    for _attempt in range(attempts):
        try:
            os.rename(new, target)  # atomic; fails when target exists and is not an empty folder
            return True
        except OSError:
            pass
        if current is not None and current():
            return False
        trash = target.parent / f".{target.name}.stale-{uuid.uuid4().hex[:8]}"
        try:
            os.rename(target, trash)  # move the stale folder aside atomically
        except OSError:  # gone or replaced meanwhile: try again
            continue
        shutil.rmtree(trash, ignore_errors=True)
    if current is not None and current():
        return False
    raise UserError(f"{target}: could not move the {what} into place (another process keeps replacing it); retry")


def dumps_json(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


def link_or_copy(src, dst) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def refuse_overwriting_inputs(option: str, outputs, *, files=(), folders=()) -> None:
    """Refuse, before any work, an output that would replace what the command reads: `outputs` are the paths
    it writes (files, or folders replaced whole), `files` (label, path) the input files it reads and
    `folders` (label, path) the folders it reads every file of (a run folder, an outputs folder). An output
    that is an input file or holds one, or that is, holds or lies inside an input folder, is one UserError
    naming `option`, the input and the fix. Paths are compared as real paths (links and `..` resolved)."""

    def real(p) -> str:
        return os.path.realpath(os.fspath(p))

    def inside(a: str, b: str) -> bool:  # a lies inside folder b
        return a.startswith(b.rstrip(os.sep) + os.sep)

    for out in outputs:
        o = real(out)
        for kinds, entries in ((False, files), (True, folders)):
            for label, path in entries:
                if path is None:
                    continue
                i = real(path)
                how = "is" if o == i else "holds" if inside(i, o) else "lies inside" if kinds and inside(o, i) else None
                if how:
                    raise UserError(
                        f"{option} {out}: {how} {label} {path}, which this command reads; writing there "
                        f"would replace what it reads; fix: give {option} another path"
                    )

"""A run's name: the rules a name must follow to become a folder name (`check_run_name`), the one rule for
names that read as a reserved one (`is_reserved_name`: the Identity run, a table's Random row), and the
checks made before anything is scored (the results folder is writable, a gate's baseline is not the folder
the run writes)."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_pstbench.core.errors import UserError

NAME_MAX_BYTES = 200  # a run folder's name; the staging, lock and moved-aside names add a few bytes to it


def control_char(text: str) -> str | None:
    for ch in text:
        if ord(ch) < 32 or ord(ch) == 127:
            return repr(ch)[1:-1]
    return None


def name_key(name: str) -> str:
    """How run names are compared with reserved ones: Unicode NFKC normalisation (fullwidth `ＩＤＥＮＴＩＴＹ`
    is `IDENTITY`), case folding, NFKC again (what folding may decompose), then only the ASCII letters and
    digits (spaces, punctuation, zero-width and other characters dropped)."""
    import re
    import unicodedata

    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return re.sub(r"[^0-9a-z]", "", folded)


def is_reserved_name(name, *reserved: str) -> bool:
    """`name` reads as one of the `reserved` names (the Identity run, a table's Random row) under `name_key`:
    the one rule for every check of a reserved name (scoring refuses it, a table refuses a run taking a
    reference row's name)."""
    return isinstance(name, str) and name_key(name) in {name_key(r) for r in reserved}


def check_run_name(name, option: str = "--name") -> None:
    """A run name becomes a folder name: plain, printable, at most NAME_MAX_BYTES bytes (UTF-8)."""
    fix = f"fix: give {option} a short plain name such as my-method"
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name.startswith("."):
        raise UserError(
            f"{option} {name!r}: a run name must be a plain folder name (no '/', not starting with '.'); {fix}"
        )
    bad = control_char(name)
    if bad:
        raise UserError(f"{option} {name!r}: contains a control character ({bad}); {fix}")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > NAME_MAX_BYTES:
        raise UserError(f"{option} {name!r}: is {size} bytes long; a run name may have at most {NAME_MAX_BYTES}; {fix}")


def check_results_writable(
    run_dir: Path, results_dir: Path, option: str = "--results", what: str = "run files"
) -> None:
    """Before anything is scored: the run folder can be created (its nearest existing ancestor is a
    writable folder). One-line UserError otherwise; nothing is created here."""
    run_dir = Path(run_dir)
    p = Path(os.path.abspath(run_dir))
    while not p.exists():
        if p.is_symlink():  # a dangling link
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        raise UserError(
            f"{option} {results_dir}: {'is' if p == Path(os.path.abspath(results_dir)) else f'{p} is'} a file, not a folder "
            f"({what} go to {run_dir}); fix: give {option} a folder (or a path that does not exist yet)"
        )
    if not os.access(p, os.W_OK | os.X_OK):
        raise UserError(
            f"{option} {results_dir}: cannot create the {'run folder' if what == 'run files' else 'folder'} {run_dir} ({p} is not writable); "
            f"fix: give {option} a writable folder"
        )


def refuse_baseline_is_run_dir(baselines, run_dir: Path, option: str = "--pstbench-baseline") -> None:
    """A gate baseline that is the folder the run is about to write would be replaced by the run and then
    compared with itself (a gate that always passes): refused before anything is scored."""
    target = os.path.realpath(run_dir)
    for b in baselines or []:
        if os.path.realpath(b) == target:
            raise UserError(
                f"{option} {b}: is the folder this run writes ({run_dir}); the run would replace its own baseline; "
                f"fix: give the run another {option.replace('baseline', 'name')} or compare with another baseline"
            )

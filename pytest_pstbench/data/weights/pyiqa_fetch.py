"""`pstbench weights fetch|verify|list pyiqa:NAME`: a pyiqa metric's weight files (`pyiqa_table`) put into the
folders pyiqa reads, each checked against a sha256: the kit's (shipped in the table), else the user's lock
($PSTBENCH_CACHE/weights/pyiqa-weights.lock.json), else one given with `--pin NAME=SHA256`, else, only with
`--trust-on-first-use`, the digest of what arrives now, recorded in the lock and checked from then on.

A file already in place whose digest matches is used as it is: no request is made. One that does not match is
refused (one line: the file, both digests, the fix), never replaced silently. A file in place with no digest to
check it against is never trusted for being there: `--trust-on-first-use` downloads what the source serves now and
records it only if the two are equal (else it refuses, keeping the file). A download is bounded (the table's
size, else $PSTBENCH_WEIGHTS_MAX_BYTES; each network wait $PSTBENCH_NETWORK_TIMEOUT seconds; the whole download
$PSTBENCH_WEIGHTS_DEADLINE seconds), streamed into a hidden `.NAME.PID.part` file beside its place, checked
(length and digest) and only then renamed into place; on any failure the part file is removed.
"""

from __future__ import annotations

import hashlib
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.envvars import env_number
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.paths import file_sha256
from pytest_pstbench.data.weights.pyiqa_table import (
    HEX64,
    MetricWeights,
    WeightFile,
    lock_path,
    metric_weights,
    read_lock,
    write_lock,
)

MAX_BYTES_ENV = "PSTBENCH_WEIGHTS_MAX_BYTES"
DEFAULT_MAX_BYTES = 4 << 30  # bytes: CLIP ViT-L/14, the largest file of the table, is about 0.9 GB
DEADLINE_ENV = "PSTBENCH_WEIGHTS_DEADLINE"
DEFAULT_DEADLINE = 3600.0  # seconds for one file's whole download
Progress = Callable[[str], None] | None


@dataclass(frozen=True)
class FileResult:
    spec: str
    file: WeightFile
    path: Path
    sha256: str
    checked_against: str  # "the kit's pin", "your lock", "--pin", "recorded now (trust on first use)"
    downloaded: bool


def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def parse_pins(pins: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in pins or ():
        name, _, digest = raw.partition("=")
        if not name or not HEX64.fullmatch(digest.strip().lower()):
            raise UserError(
                f"--pin {raw}: expected NAME=SHA256 (a file name and 64 hex digits); fix: e.g. "
                "--pin musiq_koniq_ckpt-e95806b9.pth=<sha256sum of the file you trust>"
            )
        out[name.strip()] = digest.strip().lower()
    return out


def _expected(f: WeightFile, spec: str, lock: dict, pins: dict) -> tuple[str | None, str]:
    pinned = pins.get(f.name) or pins.get(f.key)
    locked = (lock.get(f.key) or {}).get("sha256")
    if f.sha256 is not None:
        if pinned and pinned != f.sha256:
            raise UserError(
                f"--pin {f.name}={pinned}: the kit pins {f.name} ({spec}) to {f.sha256}; fix: drop the --pin"
            )
        return f.sha256, "the kit's pin"
    if pinned:
        if locked and locked != pinned:
            raise UserError(
                f"--pin {f.name}={pinned}: your lock {lock_path()} records {locked} for it; fix: drop the "
                f"--pin, or delete the entry {f.key} from the lock if the file changed on purpose"
            )
        return pinned, "--pin"
    if locked:
        return locked, f"your lock {lock_path()}"
    return None, "recorded now (trust on first use)"


def _network_line(exc: BaseException, url: str, f: WeightFile, timeout: float) -> tuple[str, str]:
    """(what happened, the fix) for a request to `url` that got no usable answer (core/hub/network's words)."""
    from pytest_pstbench.core.hub.client import NETWORK_TIMEOUT_ENV
    from pytest_pstbench.core.hub.network import cause, explain

    mirror = f"or set {f.host.url_env} to a mirror that serves {f.path}"
    if isinstance(exc, urllib.error.HTTPError):
        return f"{url} answered HTTP {exc.code}", f"check the URL's base ({f.host.base_url()}), {mirror}"
    c = cause(exc)
    if c is None:
        what = " ".join(str(exc).split())[:200] or type(exc).__name__
        return f"could not download {url} ({what})", f"check the network, {mirror}"
    what, fix = explain(c, url, timeout, NETWORK_TIMEOUT_ENV)
    if c.kind != "timeout":
        fix = f"check the network (a firewall, or a proxy: HTTPS_PROXY), {mirror}"
    return what, fix


def download(f: WeightFile, spec: str, expected: str | None, source: str, fix: str | None = None) -> tuple[str, int]:
    """`f` into its place (see the module's docstring); (sha256, size) of what was put there. `fix`: the advice of
    the line that refuses a file whose digest is not `expected` (else: check the mirror or the lock)."""
    from pytest_pstbench.core.hub.client import network_timeout

    url, dest = f.url(), f.dest()
    cap = (
        f.size
        if f.size is not None
        else int(env_number(MAX_BYTES_ENV, DEFAULT_MAX_BYTES, unit="bytes", example=DEFAULT_MAX_BYTES, whole=True))
    )
    deadline = env_number(DEADLINE_ENV, DEFAULT_DEADLINE, unit="seconds", example=DEFAULT_DEADLINE)
    timeout = network_timeout()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"{dest.parent}: cannot create the folder for {f.name} ({exc.strerror or exc}); fix: make it "
            "writable, or set TORCH_HOME to a writable folder"
        ) from None
    part = dest.parent / f".{dest.name}.{os.getpid()}.part"
    where = f"{spec}: {f.name}"
    try:
        got, total, length = _fetch_into(part, f, where, url, cap, deadline, timeout)
        if length is not None and total != length:
            raise UserError(
                f"{where}: {url} sent {total} of its {length} bytes (the connection was cut); nothing was "
                "written; fix: run the command again"
            )
        if expected is not None and got != expected:
            raise UserError(
                f"{where}: {url} sent a file with sha256 {got}, expected {expected} ({source}); refusing "
                f"it, nothing was written; fix: "
                + (
                    fix
                    or f"check {f.host.url_env} (a mirror serving another file?), or, if the file changed upstream "
                    "on purpose, delete its entry from the lock"
                )
            )
        os.replace(part, dest)
        return got, total
    finally:
        try:
            part.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            pass


def _fetch_into(part: Path, f: WeightFile, where: str, url: str, cap: int, deadline: float, timeout: float):
    """`url` written to `part` (flushed to disk), within `cap` bytes and `deadline` seconds -> (its sha256,
    bytes received, the length its answer announced or None); every failure one UserError naming `where`."""
    end = time.monotonic() + deadline
    try:
        req = urllib.request.Request(url, headers={"User-Agent": "pytest-pstbench"})
        with urllib.request.urlopen(req, timeout=timeout) as resp, open(part, "wb") as fh:
            length = resp.headers.get("Content-Length")
            length = int(length) if length and length.strip().isdigit() else None
            if length is not None and length > cap:
                raise UserError(
                    f"{where}: {url} announces {length} bytes, over the limit of {cap}; nothing was "
                    f"written; fix: check {f.host.url_env} (a mirror serving another file?), or raise "
                    f"{MAX_BYTES_ENV}"
                )
            got, total = _copy(resp, fh, f, where, url, cap, deadline, end)
            fh.flush()
            os.fsync(fh.fileno())
    except UserError:
        raise
    except (urllib.error.URLError, OSError, ValueError) as exc:
        if isinstance(exc, OSError) and exc.filename is not None and str(part) in str(exc.filename):
            raise UserError(
                f"{part.parent}: cannot write {f.name} ({exc.strerror or exc}); nothing was kept; fix: "
                "free some space, or set TORCH_HOME to a writable folder"
            ) from None
        what, fix = _network_line(exc, url, f, timeout)
        raise UserError(f"{where}: {what}; nothing was written; fix: {fix}") from None
    except Exception as exc:  # noqa: BLE001 - http.client's errors of a cut answer (IncompleteRead, ...)
        raise UserError(
            f"{where}: the connection to {url} was cut ({type(exc).__name__}); nothing was written; "
            "fix: run the command again"
        ) from None
    return got, total, length


def _copy(resp, fh, f: WeightFile, where: str, url: str, cap: int, deadline: float, end: float) -> tuple[str, int]:
    """The answer's body copied to `fh` in 1 MiB blocks, within `cap` bytes and the `deadline` seconds that end
    at `end` (monotonic clock) -> (its sha256, bytes)."""
    h, total = hashlib.sha256(), 0
    while True:
        block = resp.read(1 << 20)
        if not block:
            break
        total += len(block)
        if total > cap:
            raise UserError(
                f"{where}: {url} sent more than {cap} bytes; nothing was written; fix: check "
                f"{f.host.url_env}, or raise {MAX_BYTES_ENV}"
            )
        if time.monotonic() > end:
            raise UserError(
                f"{where}: the download of {url} took longer than {deadline:g} s; nothing was "
                f"written; fix: set {DEADLINE_ENV} (seconds) to wait longer"
            )
        h.update(block)
        fh.write(block)
    return h.hexdigest(), total


def _compare_with_source(f: WeightFile, spec: str, dest: Path, present: str, progress: Progress) -> str:
    """Trust on first use of a file already at `dest` (no digest to check it against): what the source serves now
    is downloaded and must equal it (issue #54: a file put there by anyone was recorded with no request); a
    different file is refused and the one in place kept. The digest to record."""
    _say(progress, f"{spec}: {f.name} present with no digest to check it against; downloading {f.url()} to compare")
    got, _ = download(
        f,
        spec,
        present,
        f"the file in place, {dest}",
        fix=f"the file in place is not what the source serves: delete {dest} and run `pstbench weights fetch "
        f"{spec} --trust-on-first-use` again, or --pin {f.name}=SHA256 with a digest you trust",
    )
    _say(progress, f"{spec}: {f.name} present, sha256 {got[:16]}... equals what {f.url()} serves: recorded now")
    return got


def fetch(
    specs: list[str],
    version: str | None,
    *,
    trust_first_use: bool = False,
    pins: dict | None = None,
    download_missing: bool = True,
    progress: Progress = print,
) -> list[FileResult]:
    """Make every file of the metrics `specs` present and checked; record new digests in the user's lock.
    `download_missing=False` (`weights verify`): a missing file is an error, nothing is asked of the network."""
    pins = pins or {}
    entries: list[MetricWeights] = [metric_weights(s, version) for s in specs]
    names = {f.name for e in entries for f in e.files} | {f.key for e in entries for f in e.files}
    unknown = sorted(set(pins) - names)
    if unknown:
        raise UserError(
            f"--pin {unknown[0]}=...: no file of {' '.join(specs)} has that name; fix: pin one of "
            f"{', '.join(sorted(f.name for e in entries for f in e.files)) or '(none: no files)'}"
        )
    lock = read_lock()
    plan: list[tuple[str, WeightFile, str | None, str]] = []
    seen: set[str] = set()
    for spec, entry in zip(specs, entries):
        for f in entry.files:
            if f.key in seen:
                continue
            seen.add(f.key)
            expected, source = _expected(f, spec, lock, pins)
            if expected is None and not trust_first_use and download_missing:
                raise UserError(
                    f"{spec}: the kit ships no sha256 for {f.name} (pyiqa {entry.version}) and your lock {lock_path()} "
                    f"has none; fix: run again with --trust-on-first-use to record the digest of what is fetched now, "
                    f"or --pin {f.name}=SHA256 with a digest you trust"
                )
            plan.append((spec, f, expected, source))
    results: list[FileResult] = []
    recorded: dict[str, dict] = {}
    for spec, f, expected, source in plan:
        dest = f.dest()
        if os.path.lexists(dest) and not (dest.is_file() and not dest.is_symlink()):
            raise UserError(
                f"{dest}: not a regular file (a folder or a link) where {spec}'s weight file belongs; "
                f"fix: remove it and run `pstbench weights fetch {spec}` again"
            )
        if dest.is_file():
            got = file_sha256(dest)
            if expected is not None and got != expected:
                raise UserError(
                    f"{dest}: sha256 {got}, expected {expected} ({source}); refusing it (changed, truncated or another "
                    f"file); fix: delete {dest} and run `pstbench weights fetch {spec}` again"
                )
            if expected is None and not download_missing:
                raise UserError(
                    f"{dest}: {spec}'s file has no digest to check it against (neither the kit's nor your "
                    f"lock {lock_path()}'s); fix: run `pstbench weights fetch {spec} --trust-on-first-use` to record it"
                )
            if expected is None:  # trust on first use: only what arrives now, never a file found in place
                got = _compare_with_source(f, spec, dest, got, progress)
                results.append(FileResult(spec, f, dest, got, source, True))
            else:
                _say(progress, f"{spec}: {f.name} present, sha256 {got[:16]}... matches {source}")
                results.append(FileResult(spec, f, dest, got, source, False))
        elif not download_missing:
            raise UserError(f"{dest}: {spec}'s file {f.name} is missing; fix: run `pstbench weights fetch {spec}`")
        else:
            _say(progress, f"{spec}: downloading {f.url()}")
            got, _ = download(f, spec, expected, source)
            _say(progress, f"{spec}: {f.name} -> {dest} (sha256 {got[:16]}..., checked against {source})")
            results.append(FileResult(spec, f, dest, got, source, True))
        if f.sha256 is None and (lock.get(f.key) or {}).get("sha256") != got:
            how = "--pin" if source == "--pin" else "trust on first use"
            recorded[f.key] = {"sha256": got, "size": dest.stat().st_size, "how": how, "url": f.url()}
    if recorded:
        write_lock({**lock, **recorded})
        _say(progress, f"recorded {len(recorded)} digest(s) in {lock_path()}")
    return results

"""Progress reporting of the `pstbench` commands, on stderr (stdout keeps the tables and results, so it can
be redirected): `stderr_line` for a command's messages, `terminal_progress` for the bar of `pstbench vab
run`, and the displays of `pstbench data fetch` / `verify` over many files (AceTone-Bench: 3,072 files,
3.3 GB).

One `Reporter` per command: `say` prints messages that always matter (what is asked, files re-fetched,
failures), `detail` prints per-file lines only under `-v`, and `progress(...)` opens one display for a
batch of files:

- on a terminal: one updating bar (huggingface_hub's tqdm, so HF_HUB_DISABLE_PROGRESS_BARS=1 turns it
  off) with bytes, files, rate and ETA; the bytes move while files download (huggingface_hub reports
  each chunk through `download_tqdm_class`, as its own snapshot_download does);
- on anything else (CI logs, a file): one line every `step` percent (by bytes), never one per file;
- closing it prints one summary line (files, bytes, seconds, rate).

The display never decides anything: callers count failures themselves.
"""

from __future__ import annotations

import sys
import threading
import time

from pytest_pstbench.core.text import for_terminal, raw


def stderr_line(msg: str) -> None:
    """One message of a command: a line on stderr, flushed at once."""
    print(msg, file=sys.stderr, flush=True)


def terminal_progress(done: int, total: int, width: int = 30) -> None:
    """A one-line progress bar on stderr (the official VAB toolkit's layout)."""
    filled = int(width * done / total) if total else width
    end = "\n" if done >= total else ""
    print(f"\r  [{'=' * filled}{' ' * (width - filled)}] {done}/{total}", end=end, file=raw(sys.stderr), flush=True)


def human(n: float) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"  # pragma: no cover


def _duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Reporter:
    """Where messages and progress go. `verbose`: per-file lines; `tty`: a bar instead of percent lines
    (default: whether `stream` is a terminal); `step`: percent between lines when not a terminal."""

    def __init__(
        self, stream=None, verbose: bool = False, tty: bool | None = None, step: float = 5.0, quiet: bool = False
    ):
        self.stream = stream if stream is not None else sys.stderr
        self.verbose = verbose
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.step = step
        self.quiet = quiet
        self._bar = None  # the open bar, if any: messages are written above it

    @classmethod
    def from_callable(cls, say) -> Reporter:
        """A Reporter for library callers that pass `progress=callable`: every message, per-file lines included,
        goes to the callable; no bar and no percent lines."""
        rep = cls(verbose=True, tty=False, quiet=True)
        rep._write = lambda msg: say(msg)  # type: ignore[method-assign]
        return rep

    def _write(self, msg: str) -> None:
        if self._bar is not None:
            self._bar.write(for_terminal(msg), file=raw(self.stream))  # the bar's own stream: it is cleared first
        else:
            print(msg, file=self.stream, flush=True)

    def say(self, msg: str) -> None:
        self._write(msg)

    __call__ = say  # a Reporter is also the plain `progress(msg)` callable the rest of the code takes

    def detail(self, msg: str) -> None:
        if self.verbose:
            self._write(msg)

    def progress(self, desc: str, files: int, nbytes: int) -> Progress:
        return Progress(self, desc, files, nbytes)


class Progress:
    """One batch of files: `file_done(nbytes)` after each; bytes in flight come through `download_tqdm_class`."""

    def __init__(self, reporter: Reporter, desc: str, files: int, nbytes: int):
        self.r = reporter
        self.desc = desc
        self.total_files = files
        self.total_bytes = nbytes
        self.files = 0
        self.completed = 0  # bytes of finished files
        self.inflight: dict[int, int] = {}  # thread id -> bytes streamed of its current file
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.next_pct = reporter.step
        self.bar = None
        self._shown = 0
        if reporter.tty and not reporter.quiet and files:
            from huggingface_hub.utils import tqdm as hf_tqdm

            self.bar = hf_tqdm(
                total=nbytes,
                unit="B",
                unit_scale=True,
                unit_divisor=1000,
                desc=for_terminal(desc),
                file=raw(reporter.stream),
                dynamic_ncols=True,
                leave=False,
                name="pstbench.data",
            )
            self.bar.set_postfix_str(f"0/{files} files", refresh=False)
            reporter._bar = self.bar

    # ---- counting (any thread) -----------------------------------------------------------------
    @property
    def done_bytes(self) -> int:
        return self.completed + sum(self.inflight.values())

    def _streamed(self, n: int) -> None:
        with self.lock:
            tid = threading.get_ident()
            self.inflight[tid] = max(0, self.inflight.get(tid, 0) + int(n))
            self._show()

    def file_done(self, nbytes: int, ok: bool = True) -> None:
        """A file finished (or failed: its bytes leave the count) in the calling thread."""
        with self.lock:
            self.inflight.pop(threading.get_ident(), None)
            self.files += 1
            if ok:
                self.completed += nbytes
            else:
                self.total_bytes = max(0, self.total_bytes - nbytes)
                if self.bar is not None:
                    self.bar.total = self.total_bytes
            self._show()

    def _show(self) -> None:
        done = min(self.done_bytes, self.total_bytes) if self.total_bytes else 0
        if self.bar is not None:
            self.bar.update(done - self._shown)
            self._shown = done
            self.bar.set_postfix_str(f"{self.files}/{self.total_files} files", refresh=False)
            return
        if self.r.quiet or self.r.tty:
            return
        pct = 100.0 * (done / self.total_bytes if self.total_bytes else self.files / max(1, self.total_files))
        if pct + 1e-9 < self.next_pct or self.files == self.total_files and pct >= 100 and self.next_pct > 100:
            return
        while self.next_pct <= pct + 1e-9:
            self.next_pct += self.r.step
        elapsed = max(time.monotonic() - self.t0, 1e-6)
        rate = done / elapsed
        eta = (self.total_bytes - done) / rate if rate > 0 and self.total_bytes else 0.0
        self.r._write(
            f"{self.desc}: {pct:3.0f}% ({self.files}/{self.total_files} files, {human(done)} of {human(self.total_bytes)}, "
            f"{human(rate)}/s, ETA {_duration(eta)})"
        )

    # ---- huggingface_hub's per-file bar, aggregated ---------------------------------------------
    @property
    def download_tqdm_class(self):
        """A tqdm stand-in for `hf_hub_download(tqdm_class=...)`: each file's chunks go into this display."""
        prog = self

        class _FileBar:
            def __init__(self, *args, **kwargs):
                initial = int(kwargs.get("initial") or 0)
                if initial:
                    prog._streamed(initial)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def close(self):
                pass

            def update(self, n=1):
                prog._streamed(int(n or 0))

            def update_transfer(self, n=1):
                pass

            def set_postfix_str(self, *a, **k):
                pass

            def set_transfer_postfix_str(self, *a, **k):
                pass

            def set_description(self, *a, **k):
                pass

            def refresh(self, *a, **k):
                pass

        return _FileBar

    # ---- end -----------------------------------------------------------------------------------
    def close(self, what: str = "done") -> str:
        """Close the display; return (and print unless quiet) one summary line."""
        elapsed = time.monotonic() - self.t0
        if self.bar is not None:
            self.bar.close()
            self.r._bar = None
        done = self.completed
        rate = f", {human(done / elapsed)}/s" if elapsed > 0 and done else ""
        line = f"{self.desc} done: {what} ({self.files} files, {human(done)} in {elapsed:.1f} s{rate})"
        if not self.r.quiet:
            self.r._write(line)
        return line


def shown(items: list[str], k: int = 5) -> str:
    """The first `k` items joined with "; ", and how many more there are."""
    return "; ".join(items[:k]) + (f"; and {len(items) - k} more" if len(items) > k else "")


def reporter(progress) -> Reporter:
    """`progress` as a Reporter: one already, a callable taking a message, or None (silent)."""
    if isinstance(progress, Reporter):
        return progress
    return Reporter.from_callable(progress or (lambda msg: None))

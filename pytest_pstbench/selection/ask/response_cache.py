"""A cache of model answers across runs (`pstbench vab run`): a second run of the same model and settings asks
nothing it asked before.

Key: sha256 of the endpoint's origin and path, every `--header` (name and value: a gateway may route on a header,
so another header is another backend; the values enter only the hash, never a file), the attempt's number within
its request, and the full request body (model, messages with every image's bytes, sampling, --extra-body fields):
a change of any of them is a miss, and a request's second attempt (the official pipeline asks again after an unparseable answer) finds the
second answer of the run that filled the cache, not the first one again. Only answered calls are kept (an API
error is never cached): the answer's message (secrets already redacted) and its usage.

Used only when sampling is deterministic (temperature 0) unless `--reuse-answers` asks for it (a temperature 1
run replayed from a cache is one sample, not a new one); `--no-cache` turns it off. Entries live under
`$PSTBENCH_CACHE/responses/<2 hex>/<key>.json`; a damaged entry is a miss (and is replaced); an answer that cannot
be kept (a full disk, an unwritable $PSTBENCH_CACHE) is still written to the answers file, and run.json says why it
was not cached. `pstbench cache prune --responses` removes entries.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json
from pytest_pstbench.core.files.write import dumps_json, write_atomic
from pytest_pstbench.core.paths import CACHE_ENTRY, cache_dir, files_within
from pytest_pstbench.selection.ask.usage import line_problem

FORMAT = 1


def responses_dir() -> Path:
    return cache_dir() / "responses"


class ResponseCache:
    def __init__(self, url: str, root: Path | None = None, headers=()):
        self.url = url
        # the --header pairs, in a form that cannot be confused (JSON) and in a fixed order: part of every key
        self._route = json.dumps(sorted([str(k).lower(), str(v)] for k, v in dict(headers).items()))
        self.root = Path(root) if root is not None else responses_dir()
        self.hits = 0
        self.stored = 0
        self.unwritable: str | None = None  # why an answer could not be kept (the run goes on: the cache is optional)
        self._lock = threading.Lock()

    def key(self, body: bytes, attempt: int) -> str:
        h = hashlib.sha256()
        h.update(f"pstbench-response/{FORMAT}\n{self.url}\n{attempt}\n".encode())
        if self._route != "[]":  # no --header: the key of earlier versions (their cache stays valid)
            h.update(f"headers {self._route}\n".encode())
        h.update(body)
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str):
        """The cached answer (`chat_api.Reply`), or None (not there, or damaged)."""
        from pytest_pstbench.selection.ask.chat_api import Reply

        path = self._path(key)
        if not path.is_file():
            return None
        try:
            entry = read_json(path)
        except Exception:  # noqa: BLE001 - a damaged entry is a miss; the next answer replaces it
            return None
        message = entry.get("message") if isinstance(entry, dict) else None
        usage = entry.get("usage") if isinstance(entry, dict) else None
        if (
            (entry.get("key") if isinstance(entry, dict) else None) != key
            or not isinstance(message, dict)
            or not isinstance(message.get("content"), str)
            or line_problem(usage)
        ):
            return None
        with self._lock:
            self.hits += 1
        return Reply(message, usage, entry.get("usage_problem"))

    def put(self, key: str, reply) -> None:
        entry = {
            "format": FORMAT,
            "key": key,
            "message": reply.message,
            "usage": reply.usage,
            "usage_problem": reply.usage_problem,
        }
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(
                path,
                dumps_json(entry),
                what="a cached model answer",
                fix="free some space, pass --no-cache, or set PSTBENCH_CACHE to a writable folder",
            )
        except (OSError, UserError) as exc:  # the answer is paid for and goes to the answers file all the same
            with self._lock:
                self.unwritable = self.unwritable or str(exc).splitlines()[0][:300]
            return
        with self._lock:
            self.stored += 1

    def provenance(self) -> dict:
        out = {"dir": str(self.root), "hits": self.hits, "stored": self.stored}
        if self.unwritable:
            out["not_stored"] = self.unwritable
        return out


def prune_responses(
    root: Path | None = None, older_than_days: float | None = None, dry_run: bool = False
) -> tuple[int, int]:
    """Remove cached answers (all, or those not written for `older_than_days` days): (removed, bytes)."""
    import time

    root = Path(root) if root is not None else responses_dir()
    removed = size = 0
    if not root.is_dir():
        return 0, 0
    cutoff = None if older_than_days is None else time.time() - older_than_days * 86400
    for path in (p for p in files_within(root, CACHE_ENTRY) if p.parent == root / p.name[:2]):  # no link followed
        try:
            st = path.stat()
        except OSError:
            continue
        if cutoff is not None and st.st_mtime >= cutoff:
            continue
        removed += 1
        size += st.st_size
        if not dry_run:
            path.unlink(missing_ok=True)
    return removed, size

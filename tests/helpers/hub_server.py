"""A small stand-in for the part of the Hugging Face Hub API that huggingface_hub uses to download.

Serves dataset repos held in memory at fixed commits, on 127.0.0.1 (port chosen by the OS), and takes writes to
them and to model repos (``model_repos``: pull requests, and ``GET /api/models/{repo}/revision/{rev}``; nothing else
of them is served):

- ``GET /api/datasets/{repo}/revision/{rev}`` (and without ``/revision/...``: ``main``): ``id``, ``sha``
  (the full commit the revision resolves to: a ref name, a full sha or an unambiguous >= 7-hex prefix),
  ``siblings``;
- ``GET /api/datasets/{repo}/commits/{rev}``: the commits reachable from ``rev`` (newest first: ``id``, ``title``,
  ``message``, ``authors``, ``date``), paginated with a ``Link`` header (``list_repo_commits``);
- ``GET /api/datasets/{repo}/refs``: ``branches``, ``tags``, ``converts`` with ``targetCommit`` (``list_repo_refs``);
- ``GET /api/datasets/{repo}/tree/{rev}[/{path}]?recursive=..``: files with ``size``, ``oid`` (git blob
  id) and ``lfs`` {``oid`` = sha256, ``size``, ``pointerSize``}, folders, paginated with a ``Link`` header;
- ``HEAD``/``GET /datasets/{repo}/resolve/{rev}/{path}``: ``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag`` and
  ``X-Linked-Size`` (LFS files), ``Content-Length``; ``Range: bytes=N-`` answered with 206.

Writes (what ``HfApi.create_commit`` / ``upload_folder`` / ``create_repo`` call; observed, see hub_server_notes.md),
each under ``/api/datasets/`` for a dataset repo and ``/api/models/`` for a model repo:

- ``POST /api/datasets/{repo}/preupload/{rev}``: ``{"files": [{path, sample, size}]}`` -> ``{"files": [{path,
  "uploadMode": "regular", "shouldIgnore": false, "oid": <blob id of the file at rev, or null>}]}`` (every file
  regular: no LFS or Xet upload follows);
- ``POST /api/datasets/{repo}/commit/{branch}``: NDJSON lines ``header`` (summary, description, parentCommit),
  ``file`` (base64 content), ``deletedFile``, ``deletedFolder``; a new commit on the branch, all or nothing;
  ``parentCommit`` other than the branch's head: 412; a branch that does not exist: 404 RevisionNotFound;
  ``lfsFile``: 400 (not emulated) -> ``{"commitUrl", "commitOid", "pullRequestUrl": null}``; with
  ``?create_pr=1`` the commit goes on a new ref ``refs/pr/N`` (N = 1, 2, ... per repo) whose parent is the branch's
  head (or ``parentCommit``), the branch is unchanged, and ``pullRequestUrl`` is ``{url}/[datasets/]{repo}/discussions/N``;
- ``POST /api/repos/create``: ``{"name", "organization", "type", "visibility"}`` (older clients: ``private``) -> a repo with one commit
  (``.gitattributes``) on ``main``; 409 when it exists.

Every write needs ``Authorization: Bearer <token>`` with a token in ``tokens`` (401 otherwise). Repos in
``private`` answer every request without a valid token with 401 ``RepoNotFound``, as the Hub does for a
private or missing repo. ``fail_commit``: the next commit POSTs answer 500 and change nothing (a push cut
half-way); ``echo_auth``: error messages repeat the request's Authorization header (a server that leaks it:
the kit must not print it).

Errors carry ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``) as the Hub does.
Faults for tests: ``cut_once`` (paths whose next GET is cut in the middle), ``fail_get`` (paths whose
GET answers 500), ``corrupt`` (path -> bytes served instead of the real ones, metadata unchanged).
``refuse_short_ids``: the revision endpoints answer a commit prefix (anything but a ref name or a full 40-hex
sha) with 404 ``RevisionNotFound``, as a Hub that does not resolve short ids would (``400``: with a plain
400 Bad Request instead, no error code).
Hostile answers (tests/core/test_published_hostile.py): ``drip`` (path -> seconds between the bytes of its GET body:
a download that never ends in time; a request path in ``replies`` too: that reply dripped), ``endless`` (repo ids whose tree listing never ends: each page one
made-up file and a link to the next), ``replies`` (request paths answered 200 with these bytes instead:
damaged JSON).
``hostile`` (one of HOSTILE, or None): every request answered as a lying, dripping, flooding, redirecting or
echoing server would (the damaged-input harness's server axis, issue #44; see `_Handler._hostile`); ``leaked``:
the Authorization headers that reached "another host" (``redirect-host``: localhost instead of 127.0.0.1).
``log`` records (method, path, Range header) of every request.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

import numpy as np
import pytest
from PIL import Image


class QuietServer(ThreadingHTTPServer):
    """A test server that never prints: a client that gives up mid-answer (reset by peer) is the client's business,
    and socketserver's default handle_error would print its traceback to sys.stderr, which a command run in-process
    has captured as its own output (the harness then sees "a Traceback" the command never printed)."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    sha: str
    files: dict[str, bytes]
    lfs: bool = True
    parent: str | None = None
    title: str = ""
    date: str = "2025-06-01T00:00:00.000Z"


@dataclass
class Repo:
    repo_id: str
    commits: dict[str, Commit] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    tags: set[str] = field(default_factory=set)  # names in `refs` listed as tags (the others are branches)

    def resolve(self, rev: str, short_ids: bool = True) -> Commit | None:
        if rev in self.refs:
            return self.commits[self.refs[rev]]
        if rev in self.commits:
            return self.commits[rev]
        if not short_ids:
            return None
        hits = [c for sha, c in self.commits.items() if len(rev) >= 7 and sha.startswith(rev.lower())]
        return hits[0] if len(hits) == 1 else None

    def history(self, head: Commit) -> list[Commit]:
        """`head` and its ancestors, newest first."""
        out, c = [], head
        while c is not None:
            out.append(c)
            c = self.commits.get(c.parent) if c.parent else None
        return out


#: A hostile server's behaviours (FakeHub.hostile), each applied to every request:
HOSTILE = {
    "lies-size": "the tree listing gives each file half its size",
    "lies-digest": "the tree listing gives each file another file's git blob id",
    "not-json": "every JSON answer is an HTML page (200)",
    "wrong-types": "every JSON answer has each value of the wrong type (text for numbers, numbers for text, ...)",
    "drips": "every body is sent one byte at a time (drip_interval apart), past any deadline",
    "floods-pages": "every listing (tree, commits) goes on page after page, each a new entry and a next link",
    "floods-body": "every body is what it should be followed by a gigabyte of spaces (JSON: still valid)",
    "redirect-loop": "every request is redirected to itself",
    "redirect-host": "every request is redirected to another host (localhost), which echoes the Authorization header",
    "echoes": "every request answered 400 with the Authorization header in its message",
    "echoes-fields": "every JSON answer has each text value replaced by the Authorization header",
    "throttles": "every request answered 429 with a Retry-After of a day",
}
FLOOD_BYTES = 1 << 30
TLS_CERT = str(Path(__file__).parent / "tls" / "cert.pem")  # self-signed, 127.0.0.1 and localhost, tests only
TLS_KEY = str(Path(__file__).parent / "tls" / "key.pem")


def _wrong(value):
    """`value` with every leaf of the wrong type (lists and mappings kept as such)."""
    if isinstance(value, dict):
        return {k: _wrong(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wrong(v) for v in value] or [{"unexpected": True}]
    if isinstance(value, bool) or value is None:
        return "yes"
    if isinstance(value, (int, float)):
        return str(value)
    return {"text": value} if len(value) % 2 else 40


def _echo(value, auth: str):
    if isinstance(value, dict):
        return {k: _echo(v, auth) for k, v in value.items()}
    if isinstance(value, list):
        return [_echo(v, auth) for v in value]
    return auth if isinstance(value, str) else value


class FakeHub:
    def __init__(self, page_size: int = 1000):
        self.repos: dict[str, Repo] = {}
        self.model_repos: dict[str, Repo] = {}  # model repos: commits and pull requests only (add_commit(repo_type=))
        self.page_size = page_size
        self.log: list[tuple[str, str, str | None]] = []
        self.cut_once: set[str] = set()
        self.fail_get: set[str] = set()
        self.corrupt: dict[str, bytes] = {}
        self.hang: set[str] = set()  # request paths containing one of these get no answer (until stop)
        self.drip: dict[
            str, float
        ] = {}  # repo path (or a request path in `replies`) -> seconds between the bytes of its body
        self.endless: set[str] = set()  # repo ids whose tree listing never ends
        self.replies: dict[str, bytes] = {}  # request path -> body answered (200, JSON content type) instead
        self._stop = threading.Event()
        # repo ids whose files need a token (as a gated repo whose terms were not accepted): file
        # downloads without an Authorization header get 403 with X-Error-Code GatedRepo
        self.gated: set[str] = set()
        self.refuse_short_ids = False
        self.private: set[str] = set()  # repo ids that answer 401 RepoNotFound without a valid token
        self.tokens: set[str] = set()  # tokens accepted for writes and private repos
        self.fail_commit = 0  # the next N commit POSTs answer 500 and change nothing
        self.echo_auth = False  # error messages repeat the Authorization header
        self.commits_made: list[str] = []  # shas of the commits made through the commit endpoint
        self.hostile: str | None = None  # one of HOSTILE: how every request is answered (None: as the Hub would)
        self.hostile_paths: set[str] = set()  # parts of the request paths `hostile` applies to (empty: every request)
        self.drip_interval = 0.05  # seconds between the bytes of a body, `hostile == "drips"`
        self.leaked: list[str] = []  # Authorization headers sent to the other host of `hostile == "redirect-host"`
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    # ---- content ---------------------------------------------------------------------------------
    def add_commit(
        self,
        repo_id: str,
        sha: str,
        files: dict[str, bytes],
        refs=(),
        lfs: bool = True,
        parent: str | None = None,
        tags=(),
        title: str = "",
        date: str | None = None,
        repo_type: str = "dataset",
    ) -> Commit:
        """Add a commit (child of `parent`, default none) and point the branches `refs` and tags `tags` at it
        (`date`: what the commit listing gives as its date; `repo_type` "model": to a repo of `model_repos`)."""
        assert len(sha) == 40
        repos = self.model_repos if repo_type == "model" else self.repos
        repo = repos.setdefault(repo_id, Repo(repo_id))
        repo.commits[sha] = Commit(
            sha, dict(files), lfs, parent, title or f"commit {sha[:7]}", *([date] if date else [])
        )
        for ref in (*refs, *tags):
            repo.refs[ref] = sha
        repo.tags.update(tags)
        return repo.commits[sha]

    def downloads(self, method: str = "GET") -> list[str]:
        """Repo paths of the resolve requests made with `method` (in order)."""
        out = []
        for m, path, _ in self.log:
            if m == method and "/resolve/" in path:
                out.append(path.split("/resolve/", 1)[1].split("/", 1)[1])
        return out

    # ---- server ----------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{'https' if getattr(self, 'tls', False) else 'http'}://{host}:{port}"

    def start(self, tls: bool = False) -> FakeHub:
        """Serve on 127.0.0.1; with `tls`, over HTTPS with the self-signed certificate TLS_CERT (a client trusts
        it only when told to: SSL_CERT_FILE=TLS_CERT)."""
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self.tls = tls
        self.server = QuietServer(("127.0.0.1", 0), Handler)
        if tls:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(TLS_CERT, TLS_KEY)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def point_at(hub: FakeHub, tmp_path, monkeypatch) -> None:
    """The environment of a test that fetches from `hub`: huggingface_hub and pstbench talk to it and
    keep their data under `tmp_path`; no offline mode, no extra manifests."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("PSTBENCH_REMOTE_MANIFESTS", raising=False)


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    @property
    def how(self) -> str | None:
        """`hub.hostile` where it applies to this request (`hub.hostile_paths`: parts of the paths it applies to)."""
        hub = self.hub
        if hub.hostile and (not hub.hostile_paths or any(part in self.path for part in hub.hostile_paths)):
            return hub.hostile
        return None

    # ---- helpers ---------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        headers = dict(headers or {})
        hostile = self.how if status < 300 and not head else None
        headers.setdefault("Content-Length", str(len(body) + (FLOOD_BYTES if hostile == "floods-body" else 0)))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if hostile == "drips":
            return self._drip(body, self.hub.drip_interval)
        if not head and body:
            self.wfile.write(body)
        if hostile == "floods-body":
            self._flood()

    def _flood(self) -> None:
        block = b" " * (1 << 20)
        for _ in range(FLOOD_BYTES // len(block)):
            if self.hub._stop.is_set():
                return
            try:
                self.wfile.write(block)
            except OSError:
                return

    def _hostile(self, head: bool) -> bool:
        """Answer this request as `self.how` says, where that replaces the answer (True); the others change the
        answer as it is made (`_send`, `_json`, `_tree`, `_commits`)."""
        hub, how = self.hub, self.how
        auth = self.headers.get("Authorization") or ""
        if how == "redirect-loop":
            self._send(302, b"", {"Location": self.path}, head=head)
        elif how == "redirect-host":
            if (self.headers.get("Host") or "").startswith("localhost"):
                if auth:
                    with hub._lock:
                        hub.leaked.append(auth)
                self._error(404, "RepoNotFound", f"moved away; you sent Authorization: {auth}", head=head)
            else:
                self._send(
                    302, b"", {"Location": f"http://localhost:{hub.server.server_address[1]}{self.path}"}, head=head
                )
        elif how == "echoes":
            self._error(400, "BadRequest", f"bad request; you sent Authorization: {auth}", head=head)
        elif how == "throttles":
            self._send(
                429,
                json.dumps({"error": f"slow down ({auth})"}).encode(),
                {"Content-Type": "application/json", "Retry-After": "86400"},
                head=head,
            )
        else:
            return False
        return True

    def _json(self, data, headers: dict | None = None) -> None:
        how = self.how
        if how == "not-json":
            return self._send(
                200,
                b"<!doctype html><title>Hugging Face</title><p>We are down for maintenance.</p>",
                {"Content-Type": "text/html", **(headers or {})},
            )
        if how == "wrong-types":
            data = _wrong(data)
        elif how == "echoes-fields":
            data = _echo(data, self.headers.get("Authorization") or "")
        body = json.dumps(data).encode()
        self._send(200, body, {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(
            status,
            body,
            {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message},
            head=head,
        )

    def _authorised(self) -> bool:
        auth = self.headers.get("Authorization") or ""
        return auth.startswith("Bearer ") and auth[len("Bearer ") :] in self.hub.tokens

    def _repo(self, owner: str, name: str, head: bool = False, repo_type: str = "dataset") -> Repo | None:
        repo = (self.hub.model_repos if repo_type == "model" else self.hub.repos).get(f"{owner}/{name}")
        if repo is not None and repo.repo_id in self.hub.private and not self._authorised():
            repo = None
        if repo is None:
            msg = f"Repository Not Found for url: {self.path}."
            if self.hub.echo_auth:
                msg += f" Authorization: {self.headers.get('Authorization')}"
            self._error(401 if f"{owner}/{name}" in self.hub.private else 404, "RepoNotFound", msg, head=head)
        return repo

    def _commit(self, repo: Repo, rev: str, head: bool = False) -> Commit | None:
        commit = repo.resolve(rev, short_ids=not self.hub.refuse_short_ids)
        if commit is None and self.hub.refuse_short_ids == 400 and repo.resolve(rev) is not None:
            self._send(
                400,
                json.dumps({"error": f"Invalid rev id: {rev}"}).encode(),
                {"Content-Type": "application/json"},
                head=head,
            )
            return None
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head=head)
        return commit

    # ---- routes ----------------------------------------------------------------------------------
    def do_HEAD(self):
        self._route(head=True)

    def do_GET(self):
        self._route(head=False)

    def do_POST(self):
        hub = self.hub
        parts = urlsplit(self.path)
        with hub._lock:
            hub.log.append(("POST", unquote(parts.path), None))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        segs = [unquote(s) for s in parts.path.split("/") if s]
        if self.how and self._hostile(False):
            return
        if not self._authorised():
            msg = "Invalid credentials in Authorization header"
            if hub.echo_auth:
                msg += f": {self.headers.get('Authorization')}"
            return self._error(401, "Unauthorized", msg)
        if segs == ["api", "repos", "create"]:
            return self._create_repo(json.loads(body or b"{}"))
        if (
            len(segs) == 6
            and segs[0] == "api"
            and segs[1] in ("datasets", "models")
            and segs[4] in ("preupload", "commit")
        ):
            repo = self._repo(segs[2], segs[3], repo_type=segs[1][:-1])
            if repo is None:
                return
            if segs[4] == "preupload":
                return self._preupload(repo, segs[5], json.loads(body or b"{}"))
            create_pr = parse_qs(parts.query).get("create_pr") == ["1"]
            return self._commit_post(repo, segs[5], body, create_pr, "" if segs[1] == "models" else "datasets/")
        self._error(404, "EntryNotFound", f"no route for POST {parts.path}")

    def _create_repo(self, data: dict) -> None:
        repo_id = f"{data.get('organization') or 'pstbench-test'}/{data['name']}"
        if data.get("type") != "dataset":
            return self._error(400, "BadRequest", "only dataset repos here")
        with self.hub._lock:
            if repo_id in self.hub.repos:
                return self._send(
                    409,
                    json.dumps(
                        {"error": "You already created this dataset repo", "url": f"{self.hub.url}/datasets/{repo_id}"}
                    ).encode(),
                    {"Content-Type": "application/json"},
                )
            sha = hashlib.sha1(f"init {repo_id}".encode()).hexdigest()
            self.hub.add_commit(
                repo_id,
                sha,
                {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"},
                refs=("main",),
                lfs=False,
                title="initial commit",
            )
            if data.get("private") or data.get("visibility") == "private":
                self.hub.private.add(repo_id)
        self._json({"url": f"{self.hub.url}/datasets/{repo_id}", "name": repo_id, "id": "0" * 24})

    def _preupload(self, repo: Repo, rev: str, data: dict) -> None:
        commit = self._commit(repo, rev)
        if commit is None:
            return
        files = [
            {
                "path": f["path"],
                "uploadMode": "regular",
                "shouldIgnore": False,
                "oid": git_blob_id(commit.files[f["path"]]) if f["path"] in commit.files else None,
            }
            for f in data.get("files", [])
        ]
        self._json({"files": files, "commitOid": commit.sha})

    def _commit_post(
        self, repo: Repo, rev: str, body: bytes, create_pr: bool = False, prefix: str = "datasets/"
    ) -> None:
        import base64

        hub = self.hub
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        with hub._lock:
            if hub.fail_commit:
                hub.fail_commit -= 1
                return self._error(500, "InternalError", "simulated failure while committing")
            if rev not in repo.refs or rev in repo.tags:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev} (not a branch)")
            head = repo.commits[repo.refs[rev]]
            header = next((x["value"] for x in lines if x["key"] == "header"), {})
            pr = None
            if create_pr:  # a new ref refs/pr/N from the branch's head (or parentCommit); the branch stays
                pr = 1 + sum(r.startswith("refs/pr/") for r in repo.refs)
                head = repo.commits.get(header.get("parentCommit") or head.sha, head)
                rev = f"refs/pr/{pr}"
            elif header.get("parentCommit") and header["parentCommit"] != head.sha:
                return self._error(
                    412,
                    "PreconditionFailed",
                    f"A commit has happened since. Please refresh and try again. ({head.sha})",
                )
            files = dict(head.files)
            for x in lines:
                key, value = x["key"], x["value"]
                if key == "file":
                    files[value["path"]] = (
                        base64.b64decode(value["content"])
                        if value.get("encoding") == "base64"
                        else value["content"].encode()
                    )
                elif key == "deletedFile":
                    files.pop(value["path"], None)
                elif key == "deletedFolder":
                    folder = value["path"].rstrip("/") + "/"
                    for p in [p for p in files if p.startswith(folder)]:
                        del files[p]
                elif key == "lfsFile":
                    return self._error(400, "BadRequest", "LFS files are not emulated by this server")
            digest = hashlib.sha1(
                head.sha.encode()
                + json.dumps(sorted((p, git_blob_id(d)) for p, d in files.items())).encode()
                + str(len(hub.commits_made)).encode()
            ).hexdigest()
            hub.add_commit(
                repo.repo_id,
                digest,
                files,
                refs=(rev,),
                lfs=False,
                parent=head.sha,
                title=header.get("summary", ""),
                repo_type="dataset" if prefix else "model",
            )
            hub.commits_made.append(digest)
        self._json(
            {
                "commitUrl": f"{hub.url}/{prefix}{repo.repo_id}/commit/{digest}",
                "commitOid": digest,
                "pullRequestUrl": f"{hub.url}/{prefix}{repo.repo_id}/discussions/{pr}" if pr else None,
            }
        )

    def _route(self, head: bool) -> None:
        hub = self.hub
        with hub._lock:
            hub.log.append(("HEAD" if head else "GET", unquote(urlsplit(self.path).path), self.headers.get("Range")))
        if self.how and self._hostile(head):
            return
        parts = urlsplit(self.path)
        if any(h in parts.path for h in hub.hang):
            hub._stop.wait(120)  # accepted, never answered
            return
        if unquote(parts.path) in hub.replies:
            body = hub.replies[unquote(parts.path)]
            if unquote(parts.path) in hub.drip and not head:  # the reply one byte at a time
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self._drip(body, hub.drip[unquote(parts.path)])
            return self._send(200, body, {"Content-Type": "application/json"}, head=head)
        segs = [unquote(s) for s in parts.path.split("/") if s]
        query = parse_qs(parts.query)
        if len(segs) == 6 and segs[:2] == ["api", "models"] and segs[4] == "revision":  # a model repo: its branch
            repo = self._repo(segs[2], segs[3], head, repo_type="model")
            return None if repo is None else self._info(repo, segs[5])
        if len(segs) >= 4 and segs[0] == "api" and segs[1] == "datasets":
            repo = self._repo(segs[2], segs[3], head)
            if repo is None:
                return
            rest = segs[4:]
            if not rest:
                return self._info(repo, "main")
            if rest[0] == "revision" and len(rest) == 2:
                return self._info(repo, rest[1])
            if rest[0] == "commits" and len(rest) == 2:
                return self._commits(repo, rest[1], query)
            if rest == ["refs"]:
                return self._refs(repo)
            if rest[0] == "tree" and len(rest) >= 2:
                return self._tree(repo, rest[1], "/".join(rest[2:]), query)
        if len(segs) >= 5 and segs[0] == "datasets" and segs[3] == "resolve":
            repo = self._repo(segs[1], segs[2], head)
            if repo is None:
                return
            if repo.repo_id in hub.gated and not self.headers.get("Authorization"):
                return self._error(
                    403,
                    "GatedRepo",
                    f"Access to dataset {repo.repo_id} is restricted. You must have access to it and be authenticated to access it.",
                    head=head,
                )
            commit = self._commit(repo, segs[4], head)
            if commit is None:
                return
            return self._resolve(repo, commit, "/".join(segs[5:]), head)
        self._error(404, "EntryNotFound", f"no route for {parts.path}", head=head)

    def _info(self, repo: Repo, rev: str) -> None:
        commit = self._commit(repo, rev)
        if commit is None:
            return
        self._json(
            {
                "_id": "0" * 24,
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": commit.sha,
                "private": False,
                "gated": False,
                "disabled": False,
                "lastModified": "2025-06-01T00:00:00.000Z",
                "tags": [],
                "siblings": [{"rfilename": p} for p in sorted(commit.files)],
            }
        )

    def _commits(self, repo: Repo, rev: str, query: dict) -> None:
        commit = self._commit(repo, rev)
        if commit is None:
            return
        items = [
            {"id": c.sha, "title": c.title, "message": "", "authors": [{"user": "pstbench-test"}], "date": c.date}
            for c in repo.history(commit)
        ]
        if self.how == "floods-pages":  # one made-up commit per page, always a next page
            start = int(query.get("cursor", ["0"])[0])
            made = {**items[0], "id": hashlib.sha1(b"%d" % start).hexdigest()}
            return self._json(
                [made],
                {
                    "Link": f"<{self.hub.url}/api/datasets/{repo.repo_id}/commits/{quote(rev, safe='')}"
                    f'?cursor={start + 1}>; rel="next"'
                },
            )
        self._paged(items, f"/api/datasets/{repo.repo_id}/commits/{quote(rev, safe='')}?", query)

    def _refs(self, repo: Repo) -> None:
        def ref(name: str, kind: str) -> dict:
            return {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": repo.refs[name]}

        self._json(
            {
                "branches": [ref(n, "heads") for n in sorted(repo.refs) if n not in repo.tags],
                "tags": [ref(n, "tags") for n in sorted(repo.tags)],
                "converts": [],
            }
        )

    def _paged(self, entries: list, base: str, query: dict) -> None:
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start : start + self.hub.page_size]
        headers = {}
        if start + self.hub.page_size < len(entries):
            headers["Link"] = f'<{self.hub.url}{base}cursor={start + self.hub.page_size}>; rel="next"'
        self._json(page, headers)

    def _tree(self, repo: Repo, rev: str, path: str, query: dict) -> None:
        commit = self._commit(repo, rev)
        if commit is None:
            return
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        if (
            repo.repo_id in self.hub.endless or self.how == "floods-pages"
        ):  # one made-up file per page, always a next page
            start = int(query.get("cursor", ["0"])[0])
            nxt = (
                f"{self.hub.url}/api/datasets/{repo.repo_id}/tree/{quote(rev, safe='')}"
                + ("/" + quote(path, safe="") if path else "")
                + f"?recursive={str(recursive).lower()}&cursor={start + 1}"
            )
            entry = {
                "type": "file",
                "oid": git_blob_id(b"%d" % start),
                "size": len(b"%d" % start),
                "path": f"{prefix}more/{start}.txt",
            }
            return self._json([entry], {"Link": f'<{nxt}>; rel="next"'})
        files = sorted(p for p in commit.files if p.startswith(prefix))
        if prefix and not files:
            return self._error(404, "EntryNotFound", f"{path} does not exist on {rev}")
        entries, folders = [], set()
        for p in files:
            rel = p[len(prefix) :]
            dirs = rel.split("/")[:-1]
            for i in range(len(dirs)):
                folder = prefix + "/".join(dirs[: i + 1])
                if (recursive or i == 0) and folder not in folders:
                    folders.add(folder)
                    entries.append(
                        {"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "path": folder}
                    )
            if not recursive and dirs:
                continue
            data = commit.files[p]
            entry = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": p}
            if self.how == "lies-size":
                entry["size"] = len(data) // 2
            elif self.how == "lies-digest":
                entry["oid"] = git_blob_id(data + b" ")
            if commit.lfs:
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": entry["size"], "pointerSize": 134}
                if self.how == "lies-digest":
                    entry["lfs"]["oid"] = hashlib.sha256(data + b" ").hexdigest()
            entries.append(entry)
        entries.sort(key=lambda e: e["path"])
        start = int(query.get("cursor", ["0"])[0])
        page = entries[start : start + self.hub.page_size]
        headers = {}
        if start + self.hub.page_size < len(entries):
            base = f"{self.hub.url}/api/datasets/{repo.repo_id}/tree/{quote(rev, safe='')}"
            if path:
                base += "/" + quote(path, safe="")
            nxt = f"{base}?recursive={str(recursive).lower()}&expand=false&cursor={start + self.hub.page_size}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        self._json(page, headers)

    def _drip(self, body: bytes, interval: float) -> None:
        """`body` one byte at a time, `interval` seconds apart, until the client gives up or the server stops."""
        for i in range(len(body)):
            if self.hub._stop.wait(interval):
                return
            try:
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
            except OSError:
                return

    def _resolve(self, repo: Repo, commit: Commit, path: str, head: bool) -> None:
        hub = self.hub
        if path not in commit.files:
            return self._send(
                404,
                b'{"error":"Entry not found"}',
                {
                    "X-Error-Code": "EntryNotFound",
                    "X-Error-Message": "Entry not found",
                    "X-Repo-Commit": commit.sha,
                    "Content-Type": "application/json",
                },
                head=head,
            )
        data = commit.files[path]
        headers = {"X-Repo-Commit": commit.sha, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if commit.lfs:
            sha = hashlib.sha256(data).hexdigest()
            headers.update({"ETag": f'"{sha}"', "X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(len(data))})
        else:
            headers["ETag"] = f'"{git_blob_id(data)}"'
        if head:
            return self._send(200, b"", {**headers, "Content-Length": str(len(data))}, head=True)
        with hub._lock:
            fail = path in hub.fail_get
            cut = path in hub.cut_once
            hub.cut_once.discard(path)
        if fail:
            return self._error(500, "InternalError", "simulated server error")
        body = hub.corrupt.get(path, data)
        status, start = 200, 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes=") : -1])
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
        chunk = body[start:]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(chunk) + (FLOOD_BYTES if self.how == "floods-body" else 0)))
        if cut:
            self.send_header("Connection", "close")
        self.end_headers()
        if path in hub.drip or self.how == "drips":
            return self._drip(chunk, hub.drip.get(path, hub.drip_interval))
        if self.how == "floods-body":
            self.wfile.write(chunk)
            return self._flood()
        if cut:  # send half the body, then drop the connection
            self.wfile.write(chunk[: len(chunk) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(chunk)


# ---- generated datasets ------------------------------------------------------------------------
def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(arr: np.ndarray, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _look(arr: np.ndarray, gains) -> np.ndarray:
    return np.clip(arr.astype(np.float64) * gains + 8, 0, 255).astype(np.uint8)


def _scene(rng, h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx / w * 200 + 20, yy / h * 180 + 30, (xx + yy) / (w + h) * 160 + 40], axis=-1)
    blobs = rng.normal(0, 18, size=(h // 8 + 1, w // 8 + 1, 3)).repeat(8, 0).repeat(8, 1)[:h, :w]
    return np.clip(base + blobs, 0, 255).astype(np.uint8)


def make_pst50_files(n: int = 50, naming: str = "prefixed", size=(48, 64), seed: int = 0) -> dict[str, bytes]:
    """A PST50-like repo: content_709/, content_log/, paired_style/, paired_gt/ (+ a README and an extra
    unpaired style, which pstbench must ignore). naming: "prefixed" (in{n}/tar{n}/gt{n}) or "numbers" ({n})."""
    h, w = size
    rng = np.random.default_rng(seed)
    files: dict[str, bytes] = {"README.md": b"# PST50 (fake)\n"}
    for i in range(1, n + 1):
        content = _scene(rng, h, w)
        log = np.clip(content.astype(np.float64) * 0.55 + 70, 0, 255).astype(np.uint8)
        gains = rng.uniform(0.8, 1.2, size=3)
        gt = _look(content, gains)
        style = _look(_scene(rng, h, w), gains)
        names = {"content_709": f"in{i}", "content_log": f"in{i}", "paired_style": f"tar{i}", "paired_gt": f"gt{i}"}
        for split, arr in (("content_709", content), ("content_log", log), ("paired_style", style), ("paired_gt", gt)):
            stem = names[split] if naming == "prefixed" else str(i)
            files[f"{split}/{stem}.png"] = _png(arr)
    files["unpaired_style/1.png"] = _png(_scene(rng, h, w))
    return files


def make_acetone_files(n: int = 6, size=(40, 56), seed: int = 1, fmt: str = "png") -> dict[str, bytes]:
    """An AceTone-Bench-like repo: raw_image/, ref_image/, gt_image/ paired by sorted position.
    fmt: "png", or "jpg" (every image a JPEG, quality 90, named .jpg)."""
    h, w = size
    rng = np.random.default_rng(seed)
    enc, ext = (_png, "png") if fmt == "png" else (_jpeg, "jpg")
    files: dict[str, bytes] = {"README.md": b"# AceTone-Bench-Transfer (fake)\n"}
    for i in range(n):
        raw = _scene(rng, h, w)
        gains = rng.uniform(0.8, 1.2, size=3)
        files[f"raw_image/{i:05d}.{ext}"] = enc(raw)
        files[f"ref_image/{i:05d}.{ext}"] = enc(_look(_scene(rng, h, w), gains))
        files[f"gt_image/{i:05d}.{ext}"] = enc(_look(raw, gains))
    return files


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A fake Hub on 127.0.0.1 that huggingface_hub talks to (`point_at`), with the kit's cache in tmp_path."""
    h = FakeHub().start()
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    yield h
    h.stop()

"""A hostile Hub (issue #44, "done when": a local server that lies, drips, floods, redirects and echoes) against
the replies the first hostile tests (test_published_hostile.py) left unbounded: the revision and commit-list replies
and push's check of its path. Every reply of the one Hub client holds the deadline (PSTBENCH_HUB_DEADLINE) and
a byte cap, a 429 asking for a day's wait included; and only a reply the kit cannot read is called damaged, never a
bug of the kit's own. The commands run in a subprocess with a time limit, so that a client without the bounds
fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from helpers.hub_server import FakeHub, point_at

SHA = "1" * 40
TOKEN = "hf_pstbenchHOSTILEserver0123456789"
LIMITS = {"PSTBENCH_HUB_DEADLINE": "1", "PSTBENCH_NETWORK_TIMEOUT": "0.5", "PSTBENCH_HUB_MAX_LISTING": "50"}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = FakeHub().start()
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    for name, value in LIMITS.items():
        monkeypatch.setenv(name, value)
    files = {
        f"t/a/{n}": d
        for n, d in {"run.json": b'{"name": "a"}', "summary.json": b"{}", "metrics.csv": b"item\n"}.items()
    }
    h.add_commit("me/board", SHA, files, refs=["main"], lfs=False)
    h.tokens.add(TOKEN)
    yield h
    h.hostile = None
    h.stop()


def python(code: str, limit: float = 30) -> tuple[int, str, str, float]:
    """`code` in a subprocess (this environment): (exit status, stdout, stderr, seconds); still running after
    `limit` seconds fails the test."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=limit, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {limit} s:\n{code}")
    return r.returncode, r.stdout, r.stderr, time.monotonic() - t0


def pstbench(*args: str) -> tuple[int, str, str, float]:
    return python(f"import sys; from pytest_pstbench.cli import main; sys.exit(main({list(args)!r}))")


def core(call: str) -> tuple[int, str, str, float]:
    """A core call whose UserError is printed as the command line would (one line, `pstbench: error: ...`)."""
    return python(
        "import sys\nfrom pytest_pstbench.core.errors import UserError\ntry:\n"
        f"    print({call})\nexcept UserError as exc:\n    sys.exit(f'pstbench: error: {{exc}}')\n"
    )


def one_line(err: str) -> bool:
    return (
        len([ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]) == 1
        and "Traceback" not in err
        and TOKEN not in err
    )


def test_a_dripped_revision_reply_keeps_the_deadline(hub):
    """Issue #44, Hub: the revision reply (repo_info, read whole by huggingface_hub) dripped byte by byte took
    ~20 s with a 1 s deadline: each byte came within the read timeout."""
    hub.hostile, hub.hostile_paths = "drips", {"/revision/"}
    code, out, err, took = pstbench("runs", "pull", "hf://datasets/me/board@main/t/a")
    assert code == 2 and one_line(err), err
    assert "PSTBENCH_HUB_DEADLINE" in err and "resolving revision main" in err and took < 8, (took, err)


def test_a_flooded_revision_reply_stops_at_its_cap(hub):
    """Issue #44, Hub: a revision reply followed by a gigabyte of spaces (still valid JSON) was read whole."""
    hub.hostile, hub.hostile_paths = "floods-body", {"/revision/"}
    code, out, err, took = pstbench("runs", "pull", "hf://datasets/me/board@main/t/a")
    assert code == 2 and one_line(err), err
    assert "bytes" in err and "PSTBENCH_HUB_MAX_LISTING" in err and "resolving revision main" in err and took < 8, (
        took,
        err,
    )


@pytest.mark.parametrize("how", ["throttles", "drips"])
def test_a_throttled_or_dripped_listing_keeps_the_deadline(hub, how):
    """Issue #44, Hub: a tree listing answered 429 with `Retry-After: 86400` waited a day (huggingface_hub's
    backoff honours any Retry-After)."""
    hub.hostile, hub.hostile_paths = how, {"/tree/"}
    code, out, err, took = pstbench("runs", "pull", f"hf://datasets/me/board@{SHA}/t/a")
    assert code == 2 and one_line(err), err
    assert "listing t/a" in err and took < 8, (took, err)
    assert ("PSTBENCH_HUB_DEADLINE" in err) if how == "drips" else ("429" in err or "PSTBENCH_HUB_DEADLINE" in err), err


@pytest.mark.parametrize("how", ["throttles", "drips", "not-json"])
def test_push_checks_its_path_within_the_deadline(hub, how):
    """Issue #44, Hub: push's check whether its folder exists (list_repo_tree) waited out a day's Retry-After and
    read a dripped page whole."""
    hub.hostile, hub.hostile_paths = how, {"/tree/"}
    target = "hf://datasets/me/board/t/a"  # there: its listing is answered (a missing path is a plain 404)
    code, out, err, took = core(
        f"__import__('pytest_pstbench.core.store.published.push', fromlist=['x']).push_files("
        f"__import__('pytest_pstbench.core.store.published.push', fromlist=['x']).push_target({target!r}), "
        f"{target!r}, [], described='a run')"
    )
    assert code != 0 and one_line(err), err
    assert "checking t/a" in err and "already exists" not in err and took < 8, (took, err)
    assert hub.commits_made == []


def test_the_commit_listing_is_capped(hub):
    """Issue #44, Hub: the commit listing (a commit prefix resolved by listing the commits) followed an endless
    chain of pages."""
    hub.hostile, hub.hostile_paths = "floods-pages", {"/commits/"}
    code, out, err, took = core(
        "__import__('pytest_pstbench.core.hub.listing', fromlist=['x']).repo_commits("
        "__import__('pytest_pstbench.core.hub.uri', fromlist=['x']).parse_uri('hf://datasets/me/board/t', 'run').subject, 'listing the commits', "
        "'me/board')"
    )
    assert code != 0 and one_line(err), err
    assert "PSTBENCH_HUB_MAX_LISTING" in err and took < 8, (took, err)


@pytest.mark.parametrize("how", ["wrong-types", "echoes-fields", "not-json"])
def test_a_damaged_revision_or_commit_reply_is_one_line_without_the_token(hub, how):
    """Issue #44, Hub: a revision reply and a commit listing with values of the wrong type, or each text value the
    Authorization header the server was sent, end in one line that does not repeat the token."""
    hub.hostile = how
    code, out, err, took = pstbench("runs", "pull", "hf://datasets/me/board@main/t/a")
    assert code == 2 and one_line(err) and "damaged reply while resolving revision main" in err, err
    code, out, err, took = core(
        "__import__('pytest_pstbench.core.hub.listing', fromlist=['x']).repo_commits("
        "__import__('pytest_pstbench.core.hub.uri', fromlist=['x']).parse_uri('hf://datasets/me/board/t', 'run').subject, 'listing the commits', "
        "'me/board')"
    )
    assert code != 0 and one_line(err) and "listing the commits" in err, err


def test_a_redirect_to_another_host_gets_no_token(hub):
    """Issue #44, Hub: a reply redirecting to another host is followed without the Authorization header."""
    hub.hostile = "redirect-host"
    code, out, err, took = pstbench("runs", "pull", "hf://datasets/me/board@main/t/a")
    assert code == 2 and one_line(err), err
    assert hub.leaked == [] and any(p.startswith("/api/") for _m, p, _r in hub.log)


def test_a_bug_in_the_kit_is_not_called_a_damaged_reply(hub):
    """Issue #44, Hub (leftover b): hub_call mapped any ValueError, KeyError or TypeError to "damaged reply", a
    bug in the kit's own code included; only a reply that cannot be read is."""
    from pytest_pstbench.core.hub.client import DamagedReply, HubError, Subject, hub_call

    with pytest.raises(TypeError):
        hub_call(Subject(), "adding", lambda api: 1 + "one")
    with pytest.raises(KeyError):
        hub_call(Subject(), "looking up", lambda api: {}["sha"])
    with pytest.raises(HubError, match="sent a damaged reply while reading: the listing is not a list"):
        hub_call(Subject(), "reading", lambda api: (_ for _ in ()).throw(DamagedReply("the listing is not a list")))

"""Revisions of remote datasets against the local Hub stand-in (tests/helpers/hub_server.py).

- a short commit id (PST50's pin `6ed86e3`) that the Hub's revision endpoint does not resolve is
  resolved from the repository's commit list (`list_repo_commits`); an ambiguous prefix is refused;
- an unpinned dataset (AceTone-Bench, `revision: null`) is fetched by branch or tag, recorded as a
  deviation in the lock, `data list` and every run.json;
- a refused or failed fetch leaves no empty dataset folder.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from helpers.hub_server import FakeHub, make_acetone_files, make_pst50_files, point_at

from pytest_pstbench.cli import main

PST50 = "zrgong/PST50"
PST50_SHA = "6ed86e3" + hashlib.sha1(b"pst50").hexdigest()[:33]  # the pinned short revision 6ed86e3
TWIN_SHA = "6ed86e3" + hashlib.sha1(b"pst50 twin").hexdigest()[:33]  # another commit with the same prefix
ACETONE = "Vivre/AceTone-Bench-Transfer"
ACETONE_V1 = hashlib.sha1(b"acetone v1").hexdigest()
ACETONE_MAIN = hashlib.sha1(b"acetone main").hexdigest()


@pytest.fixture(scope="module")
def hub():
    hub = FakeHub(page_size=2).start()  # small pages: the commit list comes in several pages
    pst = make_pst50_files(n=50, size=(16, 16))
    first = hashlib.sha1(b"pst50 first").hexdigest()
    hub.add_commit(PST50, first, {"README.md": b"# empty\n"})
    hub.add_commit(PST50, PST50_SHA, pst, parent=first)
    hub.add_commit(PST50, hashlib.sha1(b"pst50 later").hexdigest(), pst, parent=PST50_SHA, refs=["main"])
    files = make_acetone_files(n=4, size=(16, 24))
    hub.add_commit(ACETONE, ACETONE_V1, files, tags=["v1.0"])
    files2 = dict(files)
    files2["README.md"] = b"# AceTone-Bench-Transfer (fake), edited\n"
    hub.add_commit(ACETONE, ACETONE_MAIN, files2, parent=ACETONE_V1, refs=["main"])
    yield hub
    hub.stop()


@pytest.fixture
def env(hub, tmp_path, monkeypatch):
    point_at(hub, tmp_path, monkeypatch)
    hub.log.clear()
    hub.refuse_short_ids = False
    return tmp_path


def _lock(env, name: str) -> dict:
    return json.loads((env / "data" / name / "pstbench-lock.json").read_text())


def _error_line(capsys) -> str:
    """The one `pstbench: error:` line of stderr (progress lines come before it)."""
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("pstbench: error:")]
    assert len(errors) == 1, errors
    return errors[0]


def _gets(hub) -> list[str]:
    return [p for m, p, _ in hub.log if m == "GET"]


def _acetone_manifest(env, monkeypatch, count: int = 4) -> None:
    """The shipped acetone.yaml (unpinned) with the fake repo's pair count."""
    from pytest_pstbench.core.protocol import protocols_dir

    manifest = yaml.safe_load((protocols_dir() / "tracks" / "acetone.yaml").read_text())
    assert manifest["revision"] is None
    manifest["pairs"]["sorted"]["count"] = count
    extra = env / "manifests"
    extra.mkdir(exist_ok=True)
    (extra / "acetone.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("PSTBENCH_REMOTE_MANIFESTS", str(extra))


# ---- short commit ids --------------------------------------------------------------------------
def test_short_pin_the_hub_refuses_is_resolved_from_the_commit_list(env, hub, tmp_path, capsys):
    from helpers.protocols import protocol_without_lpips

    hub.refuse_short_ids = True
    assert main(["data", "fetch", "pst50"]) == 0
    gets = _gets(hub)
    assert f"/api/datasets/{PST50}/revision/6ed86e3" in gets  # asked first, answered 404
    assert any(p.startswith(f"/api/datasets/{PST50}/commits/") for p in gets)  # then the commit list
    assert not any(
        "/resolve/6ed86e3/" in p or "/tree/6ed86e3/" in p or p.endswith("/tree/6ed86e3") for p in gets
    )  # downloads use the full id
    lock = _lock(env, "pst50")
    assert lock["revision"] == PST50_SHA and lock["pinned_revision"] == "6ed86e3" and lock["revision_override"] is None

    proto = protocol_without_lpips(tmp_path / "nolpips.yaml")
    results = tmp_path / "results"
    assert (
        main(
            [
                "score",
                "--track",
                "pst50-paired",
                "--outputs",
                "identity",
                "--results",
                str(results),
                "--protocol",
                str(proto),
            ]
        )
        == 0
    )
    run = json.loads((results / "pst50-paired" / "identity" / "run.json").read_text())
    assert run["dataset"]["revision"] == PST50_SHA
    assert not [d for d in run["deviations"] if d["kind"] == "revision_override"]


def test_short_pin_answered_with_400_is_resolved_from_the_commit_list(env, hub):
    hub.refuse_short_ids = 400  # a Hub that calls a short id a bad request instead of an unknown revision
    assert main(["data", "fetch", "pst50"]) == 0
    assert ("GET", f"/api/datasets/{PST50}/revision/6ed86e3", None) in hub.log
    assert _lock(env, "pst50")["revision"] == PST50_SHA


def test_ambiguous_commit_prefix_is_refused_naming_the_candidates(env, hub, capsys):
    repo = hub.repos[PST50]
    hub.add_commit(PST50, TWIN_SHA, {"README.md": b"# twin\n"}, parent=PST50_SHA, refs=["twin"])
    hub.refuse_short_ids = True
    try:
        assert main(["data", "fetch", "pst50"]) == 2
    finally:
        del repo.commits[TWIN_SHA], repo.refs["twin"]
    err = _error_line(capsys)
    assert "commit prefix 6ed86e3 is ambiguous" in err and PST50_SHA in err and TWIN_SHA in err
    assert "pst50.yaml" in err and "fix: write the full 40-hex commit" in err
    assert hub.downloads() == []
    assert not (env / "data" / "pst50").exists()  # a refused fetch leaves no dataset folder


def test_unknown_commit_prefix_is_refused(env, hub, capsys):
    hub.refuse_short_ids = True
    assert main(["data", "fetch", "pst50", "--revision", "abcdef0", "--allow-other-revision"]) == 2
    err = capsys.readouterr().err
    assert "revision abcdef0 not found" in err and "none of the 3 commits" in err
    assert not (env / "data" / "pst50").exists()


def test_short_pin_the_hub_resolves_needs_no_commit_list(env, hub):
    assert main(["data", "fetch", "pst50"]) == 0
    assert not any("/commits/" in p for p in _gets(hub))
    assert _lock(env, "pst50")["revision"] == PST50_SHA


# ---- unpinned datasets -------------------------------------------------------------------------
def test_unpinned_dataset_fetched_by_branch_records_the_deviation(env, hub, monkeypatch, tmp_path, capsys):
    from helpers.protocols import protocol_without_lpips

    _acetone_manifest(env, monkeypatch)
    assert main(["data", "fetch", "acetone"]) == 2  # no pin and no --revision: refused, nothing asked
    err = capsys.readouterr().err
    assert "has no pinned revision" in err and "--revision main" in err
    assert hub.log == [] and not (env / "data" / "acetone").exists()

    assert main(["data", "fetch", "acetone", "--revision", "main"]) == 0
    out = capsys.readouterr().out
    assert f"revision {ACETONE_MAIN}" in out and "resolved from main; not the kit's pin" in out
    lock = _lock(env, "acetone")
    assert lock["revision"] == ACETONE_MAIN and lock["pinned_revision"] is None
    ov = lock["revision_override"]
    assert ov["pinned"] is None and ov["requested"] == "main" and ov["fetched"] == ACETONE_MAIN
    assert ov["detail"] == f"dataset revision: {ACETONE_MAIN} (resolved from main; not the kit's pin)"

    assert main(["data", "list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("acetone"))
    assert "(unpinned)" in line and ACETONE_MAIN[:12] in line and "resolved from main; not the kit's pin" in line

    proto = protocol_without_lpips(tmp_path / "nolpips.yaml")
    results = tmp_path / "results"
    assert (
        main(
            [
                "score",
                "--track",
                "acetone-transfer",
                "--outputs",
                "identity",
                "--results",
                str(results),
                "--protocol",
                str(proto),
            ]
        )
        == 0
    )
    run = json.loads((results / "acetone-transfer" / "identity" / "run.json").read_text())
    assert run["dataset"] == {"id": ACETONE, "revision": ACETONE_MAIN, "source": "remote"}
    dev = [d for d in run["deviations"] if d["kind"] == "revision_override"]
    assert dev == [{"kind": "revision_override", **ov}]
    assert dev[0]["detail"] == f"dataset revision: {ACETONE_MAIN} (resolved from main; not the kit's pin)"

    # a tag works the same way and replaces the data of the other commit
    assert main(["data", "fetch", "acetone", "--revision", "v1.0"]) == 0
    lock = _lock(env, "acetone")
    assert lock["revision"] == ACETONE_V1 and "resolved from v1.0" in lock["revision_override"]["detail"]


def test_unpinned_dataset_with_a_branch_the_hub_does_not_know(env, hub, monkeypatch, capsys):
    _acetone_manifest(env, monkeypatch)
    assert main(["data", "fetch", "acetone", "--revision", "no-such-branch"]) == 2
    err = _error_line(capsys)
    assert "revision not found" in err and "no-such-branch" in err
    assert not (env / "data" / "acetone").exists()


def test_layout_refused_after_listing_leaves_no_folder(env, hub, monkeypatch, capsys):
    _acetone_manifest(env, monkeypatch, count=1024)  # the shipped count: the fake repo has 4 pairs
    assert main(["data", "fetch", "acetone", "--revision", "main"]) == 2
    assert "expected 1024" in capsys.readouterr().err
    assert hub.downloads() == [] and not (env / "data" / "acetone").exists()


def test_failed_fetch_into_an_existing_folder_keeps_it(env, hub, monkeypatch, capsys):
    _acetone_manifest(env, monkeypatch, count=1024)
    mine = env / "data" / "acetone" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    assert main(["data", "fetch", "acetone", "--revision", "main"]) == 2
    assert mine.read_text() == "mine"

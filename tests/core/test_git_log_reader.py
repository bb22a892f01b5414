"""Issue #54 (find the class, not the case): property-based tests of the git log reader of `pstbench history`
(core/store/versions.py), over text a stranger writes into a commit: arbitrary unicode and control bytes (NUL,
0x1E, 0x1F, newlines, escapes) in subjects, bodies and author names, subjects that hold another commit's record,
side branches merged in or not. The contract: no traceback, no record split or forged, every id on HEAD's
first-parent path, each subject git's own.

Expected values come from plain git, one command per commit (`git rev-list --first-parent`, `git log -1
--format=%s`), never from the reader. The profile is tests/conftest.py's (`ci`: derandomized)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from helpers.hostile_git import first_parent, forged_subject, git, init, put_files, raw_commit
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_pstbench.core.store.versions import first_parent_commits, git_versions, parse_commit_records

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

RUN = "runs/m"
# the bytes a reader of git's records might split on (NUL, the old format's 0x1E/0x1F, line ends Python's
# splitlines knows, escapes), and format placeholders; mixed into any unicode, each token as likely as a run of text
SEPARATORS = [
    "\x00",
    "\x1e",
    "\x1f",
    "\x1c",
    "\x1d",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x85",
    "\u2028",
    "\x1b[2J",
    "%x00",
    "%H",
]
hostile = st.lists(st.sampled_from(SEPARATORS) | st.text(st.characters(codec="utf-8"), max_size=6), max_size=8).map(
    "".join
)
hex_id = st.text("0123456789abcdef", min_size=40, max_size=40)
iso_date = st.builds(
    "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}+00:00".format,
    st.integers(1970, 2099),
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
)


# ---- the parser of `git log -z` output, against any output git could give -----------------------------------
def git_output(ids, dates, subjects) -> bytes:
    """What `git log -z --format=%H%x00%cI%x00%s` prints for these commits (a subject as the commit holds it)."""
    return b"".join(f"{i}\0{d}\0{s}\0".encode() for i, d, s in zip(ids, dates, subjects))


@given(data=st.data(), n=st.integers(1, 5))
def test_property_git_honest_output_is_read_exactly(data, n):
    """git's answer for the ids asked, in order, subjects holding any text but NUL (git's %s stops at one): each
    id gets its own date and subject, byte for byte; nothing is split on another byte."""
    asked = data.draw(st.lists(hex_id, min_size=n, max_size=n, unique=True), label="ids")
    dates = data.draw(st.lists(iso_date, min_size=n, max_size=n), label="dates")
    subjects = data.draw(st.lists(hostile.map(lambda s: s.replace("\0", "")), min_size=n, max_size=n), label="subjects")
    assert parse_commit_records(git_output(asked, dates, subjects), asked) == list(zip(dates, subjects))


@given(data=st.data(), n=st.integers(1, 5))
def test_property_a_record_is_never_paired_with_an_id_it_does_not_name(data, n):
    """Any other answer (records for the ids asked in another order, for other ids, a subject holding NULs, another
    commit's id and a date): the parser refuses it (None: each commit is then read alone), never pairs an id with
    a record that does not name it."""
    asked = data.draw(st.lists(hex_id, min_size=n, max_size=n, unique=True), label="ids")
    pool = st.sampled_from(asked) | hex_id
    answered = data.draw(st.permutations(asked) | st.lists(pool, max_size=6), label="ids git answered for")
    dates = data.draw(st.lists(iso_date, min_size=len(answered), max_size=len(answered)), label="dates")
    forged = st.sampled_from(asked).map(lambda s: forged_subject(s).decode("utf-8", "replace"))
    subjects = data.draw(st.lists(hostile | forged, min_size=len(answered), max_size=len(answered)), label="subjects")
    assume(list(answered) != asked or any("\0" in s for s in subjects))
    got = parse_commit_records(git_output(answered, dates, subjects), asked)
    assert got is None, (answered, subjects, got)


# ---- the whole reader, against a real repository a stranger made ----------------------------------------------
commit_text = st.tuples(
    hostile.map(lambda s: s.encode("utf-8", "surrogatepass")),  # subject
    hostile.map(lambda s: s.encode("utf-8", "surrogatepass")),  # body
    st.text(st.characters(codec="utf-8", exclude_characters="<>\n\0"), max_size=12).map(str.encode),  # author
    st.booleans(),  # forge a record of the side branch's commit in the subject
)


@settings(max_examples=25)  # a repository per example (a dozen git commands): slow
@given(
    commits=st.lists(commit_text, min_size=1, max_size=4),
    merge=st.booleans(),
)
def test_property_hostile_commit_text_never_splits_or_forges_a_point(commits, merge):
    """A main line of commits whose subjects, bodies and author names hold any text, a side branch off it (its
    run changed), merged into main by the last commit or not: the reader lists exactly HEAD's first-parent
    commits that changed the run, oldest first, each with git's own subject; every version the history reads is
    one of them."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = init(Path(tmp) / "repo")
        put_files(repo, RUN, {"run.json": b"{}\n", "metrics.csv": b"side\n"})
        side = raw_commit(repo, b"side branch\n", [], when=1_700_000_000)
        git(repo, "update-ref", "refs/heads/side", side)
        parents: list[str] = []
        for i, (subject, body, author, forge) in enumerate(commits):
            put_files(repo, RUN, {"run.json": b"{}\n", "metrics.csv": f"main {i}\n".encode()})
            message = (forged_subject(side) if forge else subject) + b"\n\n" + body + b"\n"
            parents = [raw_commit(repo, message, parents, author=author, when=1_790_000_000 + i)]
        if merge:  # the side branch merged into main (its second parent), the merge's subject forged too
            put_files(repo, RUN, {"metrics.csv": b"merged\n"})
            raw_commit(repo, forged_subject(side) + b"\n", [*parents, side], when=1_790_000_100)
        want = first_parent(repo, RUN)
        on_path = set(first_parent(repo))
        got = first_parent_commits(repo, RUN)
        assert [sha for sha, _d, _s in got] == want
        assert side not in on_path and side not in [sha for sha, _d, _s in got]
        for sha, date, subject in got:
            assert subject == git(repo, "log", "-1", "--format=%s", sha).rstrip("\n")
            assert date == git(repo, "log", "-1", "--format=%cI", sha).strip()
        work = Path(tmp) / "work"
        work.mkdir()
        versions = git_versions(repo / RUN, work, [], lambda m: None)
        assert [v.commit for v in versions] == want and set(want) <= on_path

"""Issue #54 "Find the class, not the case": property-based tests (Hypothesis, the profile of tests/conftest.py) of
the readers of votes and annotation files, text a stranger writes. Rows are generated with arbitrary unicode and
control characters, extreme and inconsistent numbers (nan, inf, huge and negative integers, k that disagrees
between rows), empty cells, missing and duplicated columns and repeated rows. The contract: a one-line UserError
naming the file, or a value that keeps every rule of the format (checked here against the rows written, not
against the reader), never any other exception and never a negative or out-of-range count."""

from __future__ import annotations

import csv
import io
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.annotations import read_annotations
from pytest_pstbench.selection.consensus import read_votes

K_RANGE = (2, 6)
# a few names, so that generated rows often refer to the same task, judge or candidate; and hostile ones
NAMES = st.one_of(
    st.sampled_from(["t1", "t2", "a", "b", "c", "1", "2", "3", ""]),
    st.text(st.characters(codec="utf-8"), max_size=6),
    st.sampled_from(["\x00", "\x1f", "\u2028", " a ", "é", "\ud7ff", "a,b", 'q"q', "\r\n"]),
)
NUMBERS = st.one_of(
    st.sampled_from(["0", "1", "7", "-1", "00", "nan", "inf", "-inf", "1e400", "9" * 40, "2.5", " 3 ", "0x3", "", "٣"]),
    st.integers(-3, 8).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


# the edge numbers an edit puts into a numeric cell (zero and negative counts, a count beyond the range, not a number)
EDGES = ("0", "-1", "1", "7", "nan", "inf", "1e400", "9" * 40, "2.5", "", "-0")


def _csv(header: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return out.getvalue()


def _read(reader, text: str, **kw):
    """The reader's answer for a file holding `text`: its value, or its UserError (any other exception fails)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "file.csv"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            return reader(path, k_range=K_RANGE, protocol_id="vab", **kw)
        except UserError as exc:
            msg = str(exc)
            assert "\n" not in msg and str(path) in msg, msg
            return exc


def _header(base: tuple[str, ...], drop: int | None, dup: int | None, extra: bool) -> list[str]:
    header = list(base)
    if drop is not None:
        del header[drop % len(header)]
    if dup is not None:
        header.append(header[dup % len(header)])
    if extra:
        header.append("note")
    return header


VOTE_COLUMNS = ("task_id", "k", "judge", "best", "worst")


@st.composite
def valid_votes(draw) -> list[tuple[str, ...]]:
    """Rows of a well-formed votes file: tasks of k candidates, each judge once per task, best != worst."""
    rows = []
    for t in range(draw(st.integers(1, 3))):
        k = draw(st.integers(*K_RANGE))
        for j in range(draw(st.integers(1, 3))):
            best, worst = draw(st.permutations(range(k)))[:2]
            rows.append((f"t{t}", str(k), f"j{j}", f"c{best}", f"c{worst}" if k >= 3 else ""))
    return rows


@st.composite
def edited(draw, valid, numeric: tuple[int, ...]) -> list[tuple[str, ...]]:
    """A valid file's rows with up to three hostile edits: a cell replaced (a numeric column's by a hostile number,
    another's by hostile text), a row repeated."""
    rows = [list(r) for r in draw(valid)]
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(rows) - 1))
        c = draw(st.one_of(st.sampled_from(numeric), st.integers(0, len(rows[0]) - 1)))  # numbers: half the edits
        if draw(st.integers(0, 3)):
            rows[i][c] = draw(st.sampled_from(EDGES) if c in numeric else NAMES)
        else:
            rows.append(list(rows[i]))
    return [tuple(r) for r in rows]


@given(
    rows=st.one_of(edited(valid_votes(), (1,)), st.lists(st.tuples(NAMES, NUMBERS, NAMES, NAMES, NAMES), max_size=12)),
    drop=st.one_of(st.none(), st.none(), st.integers(0, 4)),
    dup=st.one_of(st.none(), st.integers(0, 4)),
    extra=st.booleans(),
)
def test_votes_reader_property(rows, drop, dup, extra):
    header = _header(VOTE_COLUMNS, drop, dup, extra)
    body = [[cells[VOTE_COLUMNS.index(h)] if h in VOTE_COLUMNS else "x" for h in header] for cells in rows]
    got = _read(read_votes, _csv(header, body))
    if isinstance(got, UserError):
        return
    # a value: every column was there once, and every task keeps the rules (against the rows as written)
    assert drop is None and (dup is None or header.count(header[-1]) == 1 or header[-1] == "note")
    written = [r for r in rows]
    assert sum(t.n for t in got) == len(written)
    for t in got:
        mine = [r for r in written if r[0].strip() == t.task_id]
        assert t.task_id and len(mine) == t.n >= 1
        assert K_RANGE[0] <= t.k <= K_RANGE[1] and all(int(r[1].strip()) == t.k for r in mine)
        assert len(set(t.judges)) == t.n and all(j for j in t.judges)
        assert len(t.best) == len(t.worst) == t.n and all(t.best)
        named = set(t.best) | ({w for w in t.worst} if t.k >= 3 else set())
        assert len(named) <= t.k
        if t.k >= 3:
            assert all(b != w and w for b, w in zip(t.best, t.worst))


ANNOTATION_COLUMNS = ("task_id", "annotator", "image", "score", "rank")


@st.composite
def valid_annotations(draw) -> list[tuple[str, ...]]:
    """Rows of a well-formed annotations file: n images per task, each annotator scores all and ranks them 1..n."""
    rows = []
    for t in range(draw(st.integers(1, 2))):
        n = draw(st.integers(*K_RANGE))
        for a in range(draw(st.integers(2, 3))):
            ranks = draw(st.permutations(range(1, n + 1)))
            for i in range(n):
                score = draw(st.sampled_from([0.0, 2.5, 10.0, 7.25]))
                rows.append((f"t{t}", f"a{a}", f"i{i}", repr(score), str(ranks[i])))
    return rows


@given(
    rows=st.one_of(
        edited(valid_annotations(), (3, 4)), st.lists(st.tuples(NAMES, NAMES, NAMES, NUMBERS, NUMBERS), max_size=12)
    ),
    drop=st.one_of(st.none(), st.none(), st.integers(0, 4)),
    dup=st.one_of(st.none(), st.integers(0, 4)),
    extra=st.booleans(),
)
def test_annotations_reader_property(rows, drop, dup, extra):
    header = _header(ANNOTATION_COLUMNS, drop, dup, extra)
    body = [[cells[ANNOTATION_COLUMNS.index(h)] if h in ANNOTATION_COLUMNS else "x" for h in header] for cells in rows]
    got = _read(read_annotations, _csv(header, body))
    if isinstance(got, UserError):
        return
    assert drop is None
    assert sum(len(t.images) * len(t.annotators) for t in got) == len(rows)
    for t in got:
        n = len(t.images)
        assert K_RANGE[0] <= n <= K_RANGE[1] and len(t.annotators) >= 2
        for who in t.annotators:
            assert sorted(t.ranks[who].values()) == list(range(1, n + 1))  # a permutation of 1..n: no rank < 1
            assert all(math.isfinite(s) and 0 <= s <= 10 for s in t.scores[who].values())


@pytest.mark.parametrize(
    "text",
    [
        _csv(list(VOTE_COLUMNS), [["t1", "3", "j1", "a", "b"], ["t1", "3", "j2", "b", "c"]]),
        _csv(list(VOTE_COLUMNS), [["t1", "2", "j1", "a", ""], ["t2", "6", "j1", "a", "b"]]),
    ],
)
def test_votes_reader_reads_good_files_property(text):
    """The property's reference: well-formed files are read (so the property is not vacuous)."""
    got = _read(read_votes, text)
    assert not isinstance(got, UserError) and sum(t.n for t in got) == 2


def _each_edge(rows, row: int, numeric: tuple[int, ...]):
    """The file's rows with one numeric cell of row `row` set to each edge number in turn."""
    for c in numeric:
        for value in EDGES:
            edited_rows = [list(r) for r in rows]
            edited_rows[row % len(rows)][c] = value
            yield edited_rows


@given(rows=valid_votes(), row=st.integers(0, 20))
def test_votes_reader_edge_numbers_property(rows, row):
    """Every edge number in a row's k: a one-line refusal, or tasks whose k lies in the protocol's range."""
    for body in _each_edge(rows, row, (1,)):
        got = _read(read_votes, _csv(list(VOTE_COLUMNS), body))
        if not isinstance(got, UserError):
            assert all(K_RANGE[0] <= t.k <= K_RANGE[1] and t.n == len(set(t.judges)) >= 1 for t in got)
            assert sum(t.n for t in got) == len(body)


@settings(max_examples=25)  # 22 reads per example: lowered to keep the ci profile's run near 3 s
@given(rows=valid_annotations(), row=st.integers(0, 40))
def test_annotations_reader_edge_numbers_property(rows, row):
    """Every edge number in a row's score and rank: a one-line refusal, or ranks that are 1..n and scores 0-10."""
    for body in _each_edge(rows, row, (3, 4)):
        got = _read(read_annotations, _csv(list(ANNOTATION_COLUMNS), body))
        if not isinstance(got, UserError):
            for t in got:
                for who in t.annotators:
                    assert sorted(t.ranks[who].values()) == list(range(1, len(t.images) + 1))
                    assert all(math.isfinite(v) and 0 <= v <= 10 for v in t.scores[who].values())

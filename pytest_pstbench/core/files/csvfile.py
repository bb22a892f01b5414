"""A bounded reader of input CSV files that a person writes (annotation tables): one line per problem.

`read_csv(path, what=..., columns=..., fix=...)` reads a UTF-8 CSV (a BOM is dropped) of at most
`max_bytes` bytes whose header row names at least `columns` (other columns are kept and may be
ignored by the caller) and returns its rows as `CSVRow`s (the physical line a row ends on, its cells
by column name). Blank lines are skipped. Every problem is one UserError naming the file (and the line
where there is one), the rule broken and the fix: no file, a folder, unreadable, over the size limit,
not UTF-8, no header, a column named twice, a required column missing, a row with more or fewer cells
than the header, a cell the csv module refuses (over its field size limit, a NUL byte).
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError

MAX_BYTES = 64 * 1024 * 1024  # an annotation table of a few hundred thousand rows fits


class Read(list):
    """What was read from one input file (a list: its rows, or what a caller made of them), with `sha256`, the
    digest of the bytes read: the digest a run file records is of those bytes (a pipe, `/dev/stdin` or
    `<(...)`, is read once; reading it again for its digest would hash nothing)."""

    sha256: str = ""

    def of(self, items) -> Read:
        """`items` (e.g. the tasks made of these rows), with this file's digest."""
        out = Read(items)
        out.sha256 = self.sha256
        return out


@dataclass(frozen=True)
class CSVRow:
    line: int  # the physical line the row ends on (1 = the header)
    cells: dict[str, str]


def read_csv(
    path: Path | str,
    *,
    what: str,
    columns: tuple[str, ...],
    fix: str,
    max_bytes: int = MAX_BYTES,
    first: str | None = None,
    fix_all: str | None = None,
) -> Read:
    """The rows of the CSV file `path` (see the module docstring), with the sha256 of the bytes read (`Read`). `what` names the file in messages
    ("annotations file"); `fix` is the fix for a missing or empty file. `first`: the column the header
    must start with. `fix_all`: the fix of every problem (a file the kit wrote: "score the run again")."""
    path = Path(path)
    header_fix = fix_all or f"give a header row with {','.join(columns)}"
    if fix_all:
        fix = fix_all
    if not path.exists():
        raise UserError(f"{path}: {what} not found; fix: {fix}")
    if path.is_dir():
        raise UserError(f"{path}: is a folder, not the {what}; fix: {fix}")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(
            f"{path}: cannot read the {what} ({' '.join(str(exc.strerror or exc).split())}); "
            f"fix: {fix_all or 'check the file' + chr(39) + 's permissions'}"
        ) from None
    if len(raw) > max_bytes:
        raise UserError(
            f"{path}: the {what} is larger than the limit of {max_bytes} bytes; fix: split it into smaller files"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(f"{path}:{line}: not UTF-8 text; fix: {fix_all or f'save the {what} as a UTF-8 CSV'}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = Read()
    rows.sha256 = hashlib.sha256(raw).hexdigest()
    header: list[str] | None = None
    try:
        for cells in reader:
            line = reader.line_num
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue  # a blank line
            if header is None:
                header = [c.strip() for c in cells]
                twice = sorted({c for c in header if header.count(c) > 1})
                if twice:
                    raise UserError(f"{path}:{line}: the header names column {twice[0]} twice; fix: {header_fix}")
                if first is not None and header[0] != first:
                    raise UserError(f"{path}:{line}: the header must start with column {first}; fix: {header_fix}")
                missing = [c for c in columns if c not in header]
                if missing:
                    raise UserError(
                        f"{path}:{line}: the header lacks column(s) {', '.join(missing)}; fix: {header_fix}"
                    )
                continue
            if len(cells) != len(header):
                raise UserError(
                    f"{path}:{line}: {len(cells)} cells but the header has {len(header)} columns; "
                    f"fix: {fix_all or 'one cell per column (quote a cell that holds a comma)'}"
                )
            rows.append(CSVRow(line, dict(zip(header, cells))))
    except csv.Error as exc:
        raise UserError(
            f"{path}:{reader.line_num}: not a valid CSV row ({exc}); fix: {fix_all or f'save the {what} as a plain CSV'}"
        ) from None
    if header is None:
        raise UserError(f"{path}: the {what} is empty; fix: {header_fix}, then one row per entry")
    return rows

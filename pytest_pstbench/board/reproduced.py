"""`pstbench board --reproduced DIR`: a folder of reproduce reports (`pstbench reproduce --report FILE`) read, and
each board row marked by the reports about its run: `reproduced` (or `not reproduced`) only where a report's run
digests are the sha256 of the row's run files (its item file and summary.json); a report about the same track
and run name whose digests are another's says `report is for another version` (the run changed since)."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError

MAX_REPORTS = 10_000
MAX_REPORT_BYTES = 1 << 20
STALE = "report is for another version"


def read_reports(folder) -> list[dict]:
    """The reproduce reports (*.json) directly in `folder`, each checked for the fields the marks read."""
    from pytest_pstbench.core.files.jsonfile import read_json
    from pytest_pstbench.core.reproduce import REPORT_GENERATOR

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(
            f"--reproduced {folder}: not a folder; fix: give the folder of `pstbench reproduce --report` files"
        )
    files = sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file() and not p.is_symlink())
    if len(files) > MAX_REPORTS:
        raise UserError(f"--reproduced {folder}: {len(files)} reports, over {MAX_REPORTS}; fix: give fewer")
    reports = []
    for path in files:
        try:
            data = read_json(path, max_bytes=MAX_REPORT_BYTES)
        except (OSError, ValueError) as exc:
            raise UserError(
                f"{path}: not a readable reproduce report ({' '.join(str(exc).split())[:200]}); fix: write it again "
                "with pstbench reproduce --report, or remove it"
            ) from None
        run = data.get("run") if isinstance(data, dict) else None
        digests = run.get("sha256") if isinstance(run, dict) else None
        if (
            not isinstance(data, dict)
            or data.get("generator") != REPORT_GENERATOR
            or not isinstance(digests, dict)
            or data.get("verdict") not in ("reproduced", "not reproduced")
        ):
            raise UserError(
                f"{path}: not a pstbench reproduce report (generator, run.sha256 and verdict expected); fix: write it "
                "again with pstbench reproduce --report, or remove it from the folder"
            )
        reports.append(data)
    return reports


def mark(br, reports: list[dict]) -> str | None:
    """A board row's reproduce mark from the reports about its run (same kind, track and name): the verdict of one
    whose digests are the row's run files' (`reproduced` wins), else STALE; None where no report is about it."""
    from pytest_pstbench.core.paths import file_sha256

    rec = br.run.record
    about = [
        r
        for r in reports
        if r["run"].get("kind") == br.kind.name
        and r["run"].get("track") == rec.track
        and r["run"].get("name") == rec.name
    ]
    if not about:
        return None
    files = (br.kind.item_file, "summary.json")
    digests = {name: file_sha256(Path(br.source.path) / name) for name in files}
    verdicts = {r["verdict"] for r in about if all(r["run"]["sha256"].get(n) == digests[n] for n in files)}
    if not verdicts:
        return STALE
    return "reproduced" if "reproduced" in verdicts else "not reproduced"

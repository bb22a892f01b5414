"""A paired run folder's files and their bytes, to check that a run was left untouched."""

from __future__ import annotations

RUN_FILES = ("metrics.csv", "summary.json", "run.json")


def snapshot(run_dir, files=RUN_FILES):
    """{file name: bytes} of the run folder's files."""
    return {f: (run_dir / f).read_bytes() for f in files}

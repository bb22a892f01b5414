"""A full disk for writer tests: file writes past a size limit fail as they do when the disk is full."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def full_disk(limit: int = 0):
    """Writes past `limit` bytes of any file fail with EFBIG while inside, as on a full disk (this process's
    RLIMIT_FSIZE is lowered; Python ignores SIGXFSZ, so the write fails instead of killing the process)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))

"""--verify-cache N: how many cached pairs are rescored, in which order they are drawn, and the result line.
`RunSession` rescores the chosen cache hits and compares each with its entry.
"""

from __future__ import annotations

from pytest_pstbench.core.errors import UserError


def parse_verify_cache(value, option: str = "--verify-cache") -> int:
    """The N of --verify-cache / --pstbench-verify-cache: a whole number >= 0."""
    if value in (None, ""):
        return 0
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if n < 0 or isinstance(value, bool):
        raise UserError(
            f"{option} {str(value)!r}: expected a whole number of cached pairs to rescore (0 or more); fix: e.g. {option} 5"
        )
    return n


def verify_order(pair_ids: list[str], seed: str | None) -> dict[str, int]:
    import random

    ids = list(pair_ids)
    random.Random(seed if seed is not None else random.SystemRandom().random()).shuffle(ids)
    return {pid: i for i, pid in enumerate(ids)}


def verify_line(results: dict) -> str:
    """The --verify-cache result line, from the pairs' results (also those gathered from xdist workers)."""
    verified = [pid for pid, r in results.items() if r.notes.get("cache_verified")]
    failed = sorted(pid for pid, r in results.items() if "differs from a fresh computation" in (r.error or ""))
    n = len(verified) + len(failed)
    if failed:
        return (
            f"verify-cache: rescored {n} cached pairs; {len(failed)} differ from their cache entry "
            f"({', '.join(failed)}): the cache is not trustworthy"
        )
    return f"verify-cache: rescored {n} cached pairs; every one equals its cache entry"

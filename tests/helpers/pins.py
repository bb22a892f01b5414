"""Comparing a run file with its pin under a golden/ folder (tests/paired/golden/, tests/project/golden/).

On the machine that wrote the pins the files are byte-identical. On another CPU the same code gives
the same numbers up to the last digits: LPIPS runs float32 convolutions whose kernels (and so their
summation order) depend on the CPU's vector instructions, and numpy picks SIMD versions of cbrt/pow/
atan2 by CPU too, and CIEDE2000 has discontinuities (the mean hue of two colours jumps by 180 degrees
where their hues are 180 degrees apart), so a last-bit difference can move a pixel across one (seen,
demo track: LPIPS 0.0158075374 vs 0.0158075076, ΔE00 10.920063 vs 10.920236, a few pixels of 196,608
flipped). So a file that is not byte-identical must still have exactly the same text between its
numbers, the same integers, and every other number within a relative 1e-4 (absolute 1e-9 near zero)
of the pin: below what a protocol change does (a parameter, a formula, a statistic), above
CPU-dependent rounding.
"""

from __future__ import annotations

import re
from pathlib import Path

NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
RELATIVE = 1e-4
ABSOLUTE = 1e-9


def _split(text: str) -> tuple[list[str], list[str]]:
    return NUMBER.split(text), NUMBER.findall(text)


def _is_int(token: str) -> bool:
    return re.fullmatch(r"-?\d+", token) is not None


def mismatch(actual: str, pinned: str) -> str | None:
    """None when `actual` matches `pinned` as described above, else what differs first."""
    if actual == pinned:
        return None
    (text_a, nums_a), (text_p, nums_p) = _split(actual), _split(pinned)
    if text_a != text_p or len(nums_a) != len(nums_p):
        for _i, (a, p) in enumerate(zip(text_a, text_p)):
            if a != p:
                return f"text differs: {a!r} where the pin has {p!r}"
        return f"{len(nums_a)} numbers where the pin has {len(nums_p)}"
    for a, p in zip(nums_a, nums_p):
        if a == p:
            continue
        if _is_int(a) and _is_int(p):
            return f"integer {a} where the pin has {p}"
        fa, fp = float(a), float(p)
        if abs(fa - fp) > max(ABSOLUTE, RELATIVE * abs(fp)):
            return f"number {a} where the pin has {p} (more than the CPU-rounding tolerance apart)"
    return None


def assert_matches_pin(actual: Path, pinned: Path) -> None:
    problem = mismatch(Path(actual).read_text(encoding="utf-8"), Path(pinned).read_text(encoding="utf-8"))
    assert problem is None, f"{actual} differs from its pin {pinned}: {problem}"

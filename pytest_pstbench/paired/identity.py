"""`--outputs identity` / `--outputs <encoding>:identity`: the track's content images as the outputs.

`pstbench score --track pst50-paired-log --outputs log:identity` scores the Log-encoded content
(`content_log`) unchanged, i.e. the Identity method of that track. The prefix names the content's
split (`log` for `content_log`, `709` for `content_709`, or the full split name) and is checked
against the track, so an Identity run cannot silently read another encoding.
"""
from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError

IDENTITY = "identity"


def is_identity_spec(spec: str) -> bool:
    return spec == IDENTITY or spec.endswith(":" + IDENTITY)


def identity_outputs(track, spec: str) -> dict[str, Path]:
    """Pair id -> the pair's content file, after checking the `<prefix>:` against the track's content split."""
    if Path(spec).exists():
        raise UserError(
            f"--outputs {spec}: ambiguous: it names the Identity outputs (the track's content) and an existing "
            f"path; fix: pass ./{spec} for the folder"
        )
    prefix = spec[: -len(IDENTITY)].rstrip(":")
    if prefix:
        split = str(track.info.get("content_split") or "")
        if not split or prefix not in (split, split.removeprefix("content_")):
            raise UserError(
                f"--outputs {spec}: track {track.id}'s content is {split or 'not a named split'}, not {prefix}; "
                f"fix: use --outputs identity (the track's content unchanged) or the track whose content is {prefix}"
            )
    return {p.id: p.content for p in track.pairs}

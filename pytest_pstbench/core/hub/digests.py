"""The digest check of a file downloaded from the Hub against the Hub's listing: the LFS sha256 when the
file has one, else the git blob id (sha1 over "blob <size>\\0" + bytes). Dataset files and pulled runs are
checked by it; huggingface_hub compares neither.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def hash_file(path: Path, entry: dict) -> tuple[str, str]:
    """(kind, hex digest) of `path` in the form the Hub's metadata gives for it: "sha256" when `entry` has
    one (LFS files), else "git_oid" (the git blob id: sha1 over "blob <size>\\0" + bytes)."""
    if entry.get("sha256"):
        h = hashlib.sha256()
        kind = "sha256"
    else:
        h = hashlib.sha1()
        h.update(b"blob %d\0" % path.stat().st_size)
        kind = "git_oid"
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return kind, h.hexdigest()


def check_file(path: Path, entry: dict, full: bool) -> str | None:
    """None when `path` matches `entry` ({size, sha256 | None, git_oid}: size; with `full` also the digest),
    else the reason."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != entry["size"]:
        return f"size {size} bytes, expected {entry['size']} ({'truncated' if size < entry['size'] else 'wrong size'})"
    if full:
        kind, digest = hash_file(path, entry)
        if digest != entry.get(kind):
            return (
                f"{kind} {digest[:12]}… differs from the Hub's {str(entry.get(kind, ''))[:12]}… (corrupted or modified)"
            )
    return None

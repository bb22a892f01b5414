"""Clusters of pairs: pairs that share a content or a style image are not independent, and a protocol whose
bootstrap resamples clusters (`aggregation.bootstrap.unit: cluster`, the shipped variant `clustered`) needs to
know them.

- A local track may declare them: an optional `cluster` per pair in its manifest (every pair or none;
  paired/tracks.py `declared_cluster`).
- Where it declares none, the pairs linked by an identical content or style file (the same bytes, found by
  sha256; files of another size are not read) form a cluster (connected components), named after their first
  pair; a pair that shares nothing is a cluster of its own.

`shared_note` is the one-line warning a session prints once when a track declares no clusters, its pairs
share input files, and the protocol treats pairs as independent (stderr only: no run file changes).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SHARED_ROLES = ("content", "style")
SIGN_FLIP = "cluster_sign_flip"  # comparison.test of a protocol that tests clusters
DECLARED, SHARED_INPUTS = "declared", "shared input files"
_SHOWN = 3  # shared files a warning names


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shared_files(track) -> list[tuple[str, Path, list[str]]]:
    """(role, a file, the pair ids that use a file with its bytes) for each content or style image used by
    more than one pair, in track order. Only files whose size equals another's of the same role are hashed."""
    out = []
    for role in SHARED_ROLES:
        paths = {p.id: Path(getattr(p, role)) for p in track.pairs}
        sizes: dict[int, list[str]] = {}
        for pid, path in paths.items():
            try:
                sizes.setdefault(os.path.getsize(path), []).append(pid)
            except OSError:
                continue  # a missing file fails its pair when it is scored
        groups: dict[str, list[str]] = {}
        for same in sizes.values():
            if len(same) < 2:
                continue
            by_path: dict[str, str] = {}
            for pid in same:
                real = os.path.realpath(paths[pid])
                try:
                    digest = by_path.get(real) or by_path.setdefault(real, _digest(paths[pid]))
                except OSError:
                    continue
                groups.setdefault(digest, []).append(pid)
        order = {pid: i for i, pid in enumerate(paths)}
        for pids in sorted((g for g in groups.values() if len(g) > 1), key=lambda g: order[g[0]]):
            out.append((role, paths[pids[0]], sorted(pids, key=order.get)))
    return out


def track_clusters(track) -> tuple[dict[str, str], str]:
    """{pair id: cluster name} for every pair of the track, and where they come from (DECLARED or SHARED_INPUTS)."""
    if track.pairs and all(p.cluster is not None for p in track.pairs):
        return {p.id: p.cluster for p in track.pairs}, DECLARED
    parent = {p.id: p.id for p in track.pairs}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    order = {p.id: i for i, p in enumerate(track.pairs)}
    for _, _, pids in shared_files(track):
        for pid in pids[1:]:
            a, b = root(pids[0]), root(pid)
            if a != b:  # the root is the component's first pair in track order
                parent[max(a, b, key=order.get)] = min(a, b, key=order.get)
    return {p.id: root(p.id) for p in track.pairs}, SHARED_INPUTS


def scored_clusters(track, protocol, pair_ids) -> list[str] | None:
    """Each scored pair's cluster where the protocol's bootstrap resamples clusters (summary.json), else None."""
    boot = protocol.aggregation.bootstrap
    if boot is None or not boot.clustered:
        return None
    labels = track_clusters(track)[0]
    return [labels[p] for p in pair_ids]


def run_clusters(track, protocol=None) -> dict:
    """run.json's `clusters` under a protocol that resamples clusters: their source, count and each pair's, and
    `no_interval` (why) where they are fewer than the protocol's `aggregation.bootstrap.min_clusters`."""
    labels, source = track_clusters(track)
    n = len(set(labels.values()))
    why = protocol.aggregation.bootstrap.too_few_clusters(n) if protocol is not None else None
    return {"source": source, "n": n, "pairs": labels, **({"no_interval": why} if why else {})}


def clusters_of(run, pair_ids) -> list[str]:
    """The cluster of each of `pair_ids` from a paired run's run.json `clusters` (UserError when absent or not
    one per pair: a run of a protocol that resamples clusters records them)."""
    from pytest_pstbench.core.errors import UserError

    rec = run.run.get("clusters")
    pairs = rec.get("pairs") if isinstance(rec, dict) else None
    if not isinstance(pairs, dict) or any(not isinstance(pairs.get(p), str) or not pairs.get(p) for p in pair_ids):
        raise UserError(
            f"{run.path / 'run.json'}: no cluster for every pair (clusters.pairs), which protocol "
            f"{(run.run.get('protocol') or {}).get('id')} resamples; fix: score that run again with this kit"
        )
    return [pairs[p] for p in pair_ids]


def shared_note(track, protocol) -> str | None:
    """The warning for a track that declares no clusters and whose pairs share input files, scored under a protocol
    whose intervals treat pairs as independent; None otherwise."""
    boot = protocol.aggregation.bootstrap
    if boot is None or boot.clustered or any(p.cluster is not None for p in track.pairs):
        return None
    shared = shared_files(track)
    if not shared:
        return None
    named = ", ".join(
        f"{role} {path.name} ({len(pids)} pairs: {', '.join(pids[:3])}{' ...' if len(pids) > 3 else ''})"
        for role, path, pids in shared[:_SHOWN]
    )
    more = f" and {len(shared) - _SHOWN} more shared files" if len(shared) > _SHOWN else ""
    base = protocol.id.split("+")[0]
    return (
        f"pstbench: warning: track {track.id}: pairs share input images ({named}{more}), but the intervals and "
        f"tests treat every pair as independent; fix: declare a `cluster` per pair in the track manifest, or score "
        f"with --protocol {base}+clustered (whole clusters resampled, see docs/compare-and-gate.md)"
    )


_WARNED: set = set()


def warn_shared_once(track, protocol, stream=None) -> None:
    """Print `shared_note` once per process and track (id, revision) on stderr."""
    import sys

    key = (track.id, track.revision)
    if key in _WARNED:
        return
    note = shared_note(track, protocol)
    _WARNED.add(key)
    if note:
        print(note, file=stream or sys.stderr)


def run_clusters_of(baseline, candidate, pair_ids: list[str], protocol) -> list[str] | None:
    """Each pair's cluster (run.json `clusters`) where the protocol's comparison uses them, else None; the two
    runs must record the same clusters."""
    cfg = protocol.comparison
    if cfg.test != SIGN_FLIP and not cfg.bootstrap.clustered:
        return None
    from pytest_pstbench.core.errors import UserError

    clusters = clusters_of(baseline, pair_ids)
    theirs = clusters_of(candidate, pair_ids)
    if theirs != clusters:
        first = next(p for p, x, y in zip(pair_ids, clusters, theirs) if x != y)
        raise UserError(
            f"{candidate.path / 'run.json'}: pair {first} is in cluster {theirs[pair_ids.index(first)]!r} but in "
            f"{clusters[pair_ids.index(first)]!r} in {baseline.path / 'run.json'}; runs must be scored with the "
            "same clusters; fix: score both on the same track manifest"
        )
    return clusters


def paired_test(tested, alternative: str, cfg, clusters):
    """The protocol's paired test of the (tied, perhaps margin-shifted) per-pair differences: Wilcoxon, or the
    sign-flip test of their cluster means (stats.sign_flip_test, comparison.sign_flip's settings)."""
    from pytest_pstbench.core.stats import cluster_means, sign_flip_test, wilcoxon_test

    if cfg.test == SIGN_FLIP:
        return sign_flip_test(cluster_means(tested, clusters), alternative=alternative, **cfg.sign_flip.kwargs())
    return wilcoxon_test(tested, zero_method=cfg.zero_method, alternative=alternative, method=cfg.method)

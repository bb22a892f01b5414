"""The versions of a published run path, for `pstbench history` (the Hub backend's `versions`): every commit
of the revision's history that changed a file under the path (`commits`), each pulled and verified into the
run cache (`pull`). A run refused as a run at a commit (`pull.RunRefused`) is remembered for that commit; a
failure of the Hub's answer, a digest or the network is asked again next time.
"""

from __future__ import annotations

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.store.versions import Version, rewritten


def hub_versions(address: str, say, said: list[str] | None = None, *, newest: int | None = None) -> list[Version]:
    """The versions of a published run path: each commit that changed what the path holds, pulled (only the
    `newest` that many when given: the older ones are listed, never pulled)."""
    from pytest_pstbench.core.hub.uri import parse_uri
    from pytest_pstbench.core.store.published.cache import endpoint_key
    from pytest_pstbench.core.store.published.commits import branch_log, path_state

    uri = parse_uri(address, "SOURCE")
    log = branch_log(uri)

    rev = uri.revision or "main"
    rewritten(
        f"hub\0{endpoint_key()}\0{uri.repo_id}\0{rev}\0{uri.path}",
        f"SOURCE {address} ({rev})",
        [c.sha for c in log],
        say,
        said,
    )
    out: list[tuple[Version, dict | None, list]] = []  # (version, its state to pull, the commits that kept it)
    last, seen = None, False
    for i, c in enumerate(log, 1):
        if i == 1 or i % 20 == 0 or i == len(log):
            say(f"history: reading commit {i}/{len(log)} ({c.sha[:7]})")
        v = Version(uri.text(c.sha), c.sha, c.date, c.message)
        state = path_state(uri, c.sha)
        if "problem" in state:
            v.problem = state["problem"]
            out.append((v, None, []))
            continue
        key = state.get("files")
        if key is None:
            if seen and last is not None:
                v.problem = "the run path is not in this commit (deleted or moved)"
                out.append((v, None, []))
            last = None
            continue
        if len(key) != 1:
            raise UserError(
                f"SOURCE {address}: holds {len(key)} run folders at commit {c.sha[:7]} "
                f"({', '.join(sorted(key)[:4])}); fix: name one run folder"
            )
        seen = True
        if key == last:  # the commit did not change the run
            out[-1][2].append((c.sha, state))
            continue
        last = key
        out.append((v, state, []))
    kept = out[-newest:] if newest is not None else out
    for v, state, same in kept:
        if state is not None:
            _pull_version(uri, v, state, same)
    return [v for v, _state, _same in kept]


def _pull_version(uri, v: Version, state: dict, same: list) -> None:
    """Pull the version `v` (its run folder, or the reason it is refused); once its run is verified or refused
    for good, its state is remembered, and so is that of the later commits that did not change it (`same`)."""
    from pytest_pstbench.core.store.published.commits import remember, remembered
    from pytest_pstbench.core.store.published.pull import RunRefused, pull

    known = remembered(uri, v.commit)
    verified = False
    if known is not None and "refused" in known:
        v.problem, verified = known["refused"], True
    else:
        try:
            v.folder = pull(uri.text(v.commit), option="SOURCE").runs[0].path
            verified = True
        except RunRefused as exc:  # the run itself (incomplete, invalid): refused for good
            v.problem = str(exc)
            verified, state = True, {**state, "refused": str(exc)}
        except UserError as exc:  # the Hub's answer, a digest, the network: asked again next time
            v.problem = str(exc)
        if verified:
            remember(uri, v.commit, state)
    if verified:
        for sha, st in same:
            remember(uri, sha, st)

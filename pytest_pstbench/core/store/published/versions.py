"""The versions of a published run path, for `pstbench history` (the Hub backend's `versions`): every commit
of the revision's history that changed a file under the path (`commits`), each pulled and verified into the
run cache (`pull`). A run refused as a run at a commit (`pull.RunRefused`) is remembered for that commit; a
failure of the Hub's answer, a digest or the network is asked again next time.
"""

from __future__ import annotations

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.store.versions import Version, rewritten


def hub_versions(address: str, say, said: list[str] | None = None) -> list[Version]:
    """The versions of a published run path: each commit that changed what the path holds, pulled."""
    from pytest_pstbench.core.hub.uri import parse_uri
    from pytest_pstbench.core.store.published.cache import endpoint_key
    from pytest_pstbench.core.store.published.commits import branch_log, path_state, remember, remembered
    from pytest_pstbench.core.store.published.pull import RunRefused, pull

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
    out, last, seen, verified = [], None, False, False
    for i, c in enumerate(log, 1):
        if i == 1 or i % 20 == 0 or i == len(log):
            say(f"history: reading commit {i}/{len(log)} ({c.sha[:7]})")
        v = Version(uri.text(c.sha), c.sha, c.date, c.message)
        state = path_state(uri, c.sha)
        if "problem" in state:
            v.problem = state["problem"]
            out.append(v)
            continue
        key = state.get("files")
        if key is None:
            if seen and last is not None:
                v.problem = "the run path is not in this commit (deleted or moved)"
                out.append(v)
            last = None
            continue
        if len(key) != 1:
            raise UserError(
                f"SOURCE {address}: holds {len(key)} run folders at commit {c.sha[:7]} "
                f"({', '.join(sorted(key)[:4])}); fix: name one run folder"
            )
        seen = True
        if key == last:  # the commit did not change the run
            if verified:
                remember(uri, c.sha, state)
            continue
        last = key
        known = remembered(uri, c.sha)
        verified = False
        if known is not None and "refused" in known:
            v.problem, verified = known["refused"], True
        else:
            try:
                v.folder = pull(uri.text(c.sha), option="SOURCE").runs[0].path
                verified = True
            except RunRefused as exc:  # the run itself (incomplete, invalid): refused for good
                v.problem = str(exc)
                verified, state = True, {**state, "refused": str(exc)}
            except UserError as exc:  # the Hub's answer, a digest, the network: asked again next time
                v.problem = str(exc)
            if verified:
                remember(uri, c.sha, state)
        out.append(v)
    return out

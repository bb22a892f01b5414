"""What run.json records of the machine and software a run was made with, written once for every
track kind: Python, the platform, the kit's version and each package the kind computes with (None
when that package is not installed)."""

from __future__ import annotations

import platform
from importlib import metadata

#: The kit's version as this source says it (`pytest_pstbench.__version__`; a kind that writes it into a file reads
#: it here, not from the package root above it).
VERSION = "0.1.0"


def package_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment(packages: tuple[str, ...]) -> dict:
    """{python, platform, pytest_pstbench, <each package>: version}, in that order."""
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "pytest_pstbench": package_version("pytest-pstbench"),
    }
    env.update({dist: package_version(dist) for dist in packages})
    return env


GIT_TIMEOUT_S = 5.0  # each git call; a slow or hung git (network file system, credential prompt) gives null


def _git(folder: str, *args: str) -> str | None:
    """stdout of `git -C folder ARGS` (stripped), or None when git is absent, fails or times out."""
    import os
    import subprocess

    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-C", folder, *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_info(folder) -> dict | None:
    """The git state of the repository holding `folder` (as pytest-benchmark's `commit_info`):
    {root, commit (HEAD, null before the first commit), branch (null when detached), dirty (tracked
    files differ from HEAD, staged or not; untracked files, such as generated outputs, do not count)};
    None when `folder` is missing, not in a git repository, or git is not installed."""
    import os

    if folder is None or not os.path.isdir(folder):
        return None
    folder = os.path.abspath(folder)
    root = _git(folder, "rev-parse", "--show-toplevel")
    if not root:
        return None
    commit = _git(folder, "rev-parse", "--verify", "-q", "HEAD")
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return {
        "root": root,
        "commit": commit or None,
        "branch": _git(folder, "symbolic-ref", "--short", "-q", "HEAD") or None,
        "dirty": None if status is None else bool(status),
    }


def git_provenance(outputs_dir=None) -> dict:
    """run.json's `git`: the state of the outputs folder's repository and of the working folder's."""
    import os

    return {"outputs": git_info(outputs_dir) if outputs_dir is not None else None, "working_dir": git_info(os.getcwd())}


def run_environment(
    own: dict, computed_in: list[tuple[dict, str | None, str]] | None, order: list[str], noun: str, values_key=None
) -> tuple[dict, dict | None]:
    """run.json's `environment` and, when the values were computed in more than one environment, the
    deviation that says so.

    `own` is this process's environment. `computed_in` lists, for each result computed in another process
    (a pytest-xdist worker, possibly on another host), (that process's environment, its worker id or None,
    the item id); None or empty when every value was computed here. `order` is the run's items in the
    track's order (items not in it are not part of the run; an item of the run missing from `computed_in`
    was computed here). A run records the environment its
    values were computed in, not the controller's: when all workers agree, theirs; when they differ, the
    environment of most items, and a deviation {"kind": "environment_differs", "fields": the differing
    keys, "groups": [{"environment": those keys' values, "workers": [...], "<noun>s": [...]}, ...]} (LPIPS's
    last digits depend on torch's thread count, so two workers on different thread counts give different
    values for the same pair). `values_key(env)` is what of an environment decides the values (default: all
    of it); environments that differ only elsewhere (e.g. a cache folder's path) count as one."""
    if not computed_in:
        return own, None
    import json

    where = {item_id: (env, worker) for env, worker, item_id in computed_in}
    groups: dict[str, dict] = {}
    for item_id in order:  # the track's order, whatever order the workers' reports arrived in
        env, worker = where.get(item_id, (own, None))
        key = json.dumps(values_key(env) if values_key else env, sort_keys=True)
        group = groups.setdefault(key, {"env": env, "workers": [], "items": []})
        if worker is not None and worker not in group["workers"]:
            group["workers"].append(worker)
        group["items"].append(item_id)
    ordered = sorted(groups.values(), key=lambda g: -len(g["items"]))  # stable: ties keep the track's order
    main = ordered[0]["env"]
    if len(ordered) == 1:
        return main, None
    values = [values_key(g["env"]) if values_key else g["env"] for g in ordered]
    fields = sorted({k for v in values for k in set(v) | set(values[0]) if v.get(k) != values[0].get(k)})
    return main, {
        "kind": "environment_differs",
        "fields": fields,
        "groups": [
            {"environment": {k: v.get(k) for k in fields}, "workers": sorted(g["workers"]), f"{noun}s": g["items"]}
            for g, v in zip(ordered, values)
        ],
    }

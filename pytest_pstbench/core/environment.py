"""What run.json records of the machine and software a run was made with, written once for every
track kind: Python, the platform, the kit's version and each package the kind computes with (None
when that package is not installed)."""
from __future__ import annotations

import platform
from importlib import metadata


def package_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment(packages: tuple[str, ...]) -> dict:
    """{python, platform, pytest_pstbench, <each package>: version}, in that order."""
    env = {"python": platform.python_version(), "platform": platform.platform(),
           "pytest_pstbench": package_version("pytest-pstbench")}
    env.update({dist: package_version(dist) for dist in packages})
    return env

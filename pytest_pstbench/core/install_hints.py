"""How to add an optional extra (`[iqa]`, `[report]`, `[baselines]`, `[vab]`) to the pytest-pstbench that is
installed here, from where it came: a hint that names the package index only when it came from one.

pip records where it installed a distribution from in the distribution's `direct_url.json` (PEP 610): a
local folder (editable or not), an archive (a wheel or sdist file or URL) or a VCS checkout; with no record
the package came from an index. A source tree on `sys.path` without any installation (PYTHONPATH) is
answered with its folder.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

DIST = "pytest-pstbench"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _local(url: str) -> str | None:
    """The local path of a file:// URL, or None."""
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def install_command(
    extra: str, direct_url: dict | None, installed: bool = True, source_root: Path | None = None
) -> str:
    """The pip command adding `extra` for an installation described by `direct_url` (PEP 610's
    direct_url.json, None when it came from an index); `installed` False: only a source tree at `source_root`."""
    if not installed:
        if source_root is not None and (source_root / "pyproject.toml").is_file():
            return f"pip install -e {_quoted(f'{source_root}[{extra}]')}"
        return f"pip install {_quoted(f'{DIST}[{extra}]')}"
    if not isinstance(direct_url, dict) or not isinstance(direct_url.get("url"), str):
        return f"pip install {_quoted(f'{DIST}[{extra}]')}"
    url = direct_url["url"]
    if isinstance(direct_url.get("vcs_info"), dict):
        vcs = direct_url["vcs_info"]
        ref = vcs.get("commit_id") or vcs.get("requested_revision")
        at = f"@{ref}" if isinstance(ref, str) and ref else ""
        scheme = vcs.get("vcs") if isinstance(vcs.get("vcs"), str) else "git"
        return f"pip install {_quoted(f'{DIST}[{extra}] @ {scheme}+{url}{at}')}"
    path = _local(url)
    if isinstance(direct_url.get("dir_info"), dict):
        editable = direct_url["dir_info"].get("editable") is True
        where = path if path is not None else url
        return f"pip install {'-e ' if editable else ''}{_quoted(f'{where}[{extra}]')}"
    if path is not None:  # a wheel or sdist file
        return f"pip install {_quoted(f'{path}[{extra}]')}"
    return f"pip install {_quoted(f'{DIST}[{extra}] @ {url}')}"


def _direct_url(dist) -> dict | None:
    from pytest_pstbench.core.files.jsonfile import loads

    try:
        text = dist.read_text("direct_url.json")
        data = loads(text) if text else None
    except ValueError:  # a damaged record (JSONLimitError is one too): as if there were none
        return None
    return data if isinstance(data, dict) else None


def extra_install(extra: str) -> str:
    """The pip command that adds `extra` to the pytest-pstbench this process imports, from where it came."""
    from importlib import metadata

    package = Path(__file__).resolve().parents[1]  # the pytest_pstbench folder imported
    source_tree = (package.parent / "pyproject.toml").is_file()
    for dist in metadata.distributions(name=DIST):
        direct_url = _direct_url(dist)
        dir_info = (direct_url or {}).get("dir_info")
        if isinstance(dir_info, dict) and dir_info.get("editable") is True:
            path = _local(str(direct_url.get("url")))
            if path is not None and Path(path).resolve() == package.parent:
                return install_command(extra, direct_url)
        elif Path(str(dist.locate_file("pytest_pstbench"))).resolve() == package:
            if direct_url is None and source_tree:  # the source tree's own egg-info: not an installation
                break
            return install_command(extra, direct_url)
    # not installed, or another copy is: the source tree imported (PYTHONPATH, the current folder)
    return install_command(extra, None, installed=False, source_root=package.parent if source_tree else None)

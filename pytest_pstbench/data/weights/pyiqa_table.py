"""What pyiqa's metrics download, as data: `pyiqa_weights.yaml` beside this module (per pyiqa version: each
metric's files, the host and folder of each, the sha256 the kit pins where one can be checked), read and
validated here; and the user's lock file ($PSTBENCH_CACHE/weights/pyiqa-weights.lock.json), where
`pstbench weights fetch --trust-on-first-use` or `--pin` records the digests the kit does not ship.

Nothing here talks to the network (`pyiqa_fetch` does) or imports pyiqa or torch: the folders pyiqa reads are
computed as torch computes them (`$TORCH_HOME/hub`, else `$XDG_CACHE_HOME/torch/hub`, else ~/.cache/torch/hub).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.paths import cache_dir

TABLE_PATH = Path(__file__).with_name("pyiqa_weights.yaml")
LOCK_NAME = "pyiqa-weights.lock.json"
HEX64 = re.compile(r"[0-9a-f]{64}")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


@dataclass(frozen=True)
class Host:
    name: str
    url: str  # the default base URL ({HF_ENDPOINT} filled in)
    url_env: str  # the variable that replaces it
    folder: str  # "torch-hub/SUB" or "home/SUB"

    def base_url(self) -> str:
        override = os.environ.get(self.url_env, "").strip()
        base = override or self.url.replace(
            "{HF_ENDPOINT}", os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"
        )
        return base.rstrip("/")

    def folder_path(self) -> Path:
        root, sub = self.folder.split("/", 1)
        return (torch_hub_dir() if root == "torch-hub" else Path.home()) / sub


@dataclass(frozen=True)
class WeightFile:
    host: Host
    path: str  # appended to the host's base URL
    sha256: str | None  # pinned by the kit (None: not shipped)
    size: int | None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        """The file's entry in the user's lock: host/name."""
        return f"{self.host.name}/{self.name}"

    def url(self) -> str:
        return f"{self.host.base_url()}/{self.path}"

    def dest(self) -> Path:
        return self.host.folder_path() / self.name


@dataclass(frozen=True)
class MetricWeights:
    metric: str
    version: str
    files: tuple[WeightFile, ...]
    other: str | None  # what the metric also downloads that the kit does not fetch


def torch_hub_dir() -> Path:
    """torch.hub.get_dir() as torch computes it from the environment (without importing torch)."""
    home = os.environ.get("TORCH_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "torch")
    return Path(os.path.expanduser(home)) / "hub"


def _bad(rule: str) -> UserError:
    return UserError(f"{TABLE_PATH}: {rule}; fix: reinstall pytest-pstbench (the table ships with it)")


def _host(name: str, raw) -> Host:
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("url", "url_env", "folder")):
        raise _bad(f"host {name!r} needs the strings url, url_env and folder")
    root, _, sub = raw["folder"].partition("/")
    if root not in ("torch-hub", "home") or not sub or ".." in sub.split("/"):
        raise _bad(f"host {name!r}: folder {raw['folder']!r} is not torch-hub/SUB or home/SUB")
    return Host(name, raw["url"], raw["url_env"], raw["folder"])


def _file(metric: str, hosts: dict[str, Host], raw) -> WeightFile:
    if not isinstance(raw, dict) or raw.get("host") not in hosts or not isinstance(raw.get("path"), str):
        raise _bad(f"metric {metric!r}: each file needs a known host and a path")
    path, sha, size = raw["path"], raw.get("sha256"), raw.get("size")
    if not all(_SAFE_NAME.fullmatch(part) for part in path.split("/")):
        raise _bad(f"metric {metric!r}: file path {path!r} has an unsafe part")
    if sha is not None and not (isinstance(sha, str) and HEX64.fullmatch(sha)):
        raise _bad(f"metric {metric!r}: {path}'s sha256 is not 64 lowercase hex digits")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise _bad(f"metric {metric!r}: {path}'s size is not a whole number of bytes")
    return WeightFile(hosts[raw["host"]], path, sha, size)


def read_table() -> tuple[dict[str, Host], dict[str, dict[str, MetricWeights]]]:
    """(hosts, version -> metric -> MetricWeights) of the shipped table, validated."""
    from pytest_pstbench.core.files.yamlfile import read_yaml

    data = read_yaml(TABLE_PATH, "pyiqa weights table")
    if (
        not isinstance(data, dict)
        or data.get("schema") != 1
        or not isinstance(data.get("hosts"), dict)
        or not isinstance(data.get("versions"), dict)
    ):
        raise _bad("expected schema: 1, hosts and versions")
    hosts = {name: _host(name, raw) for name, raw in data["hosts"].items()}
    versions: dict[str, dict[str, MetricWeights]] = {}
    for version, metrics in data["versions"].items():
        if not isinstance(metrics, dict):
            raise _bad(f"version {version!r} is not a mapping of metrics")
        versions[str(version)] = {}
        for metric, raw in metrics.items():
            if not isinstance(raw, dict) or not isinstance(raw.get("files"), list):
                raise _bad(f"metric {metric!r} of {version} needs a list `files`")
            other = raw.get("other")
            versions[str(version)][str(metric)] = MetricWeights(
                str(metric),
                str(version),
                tuple(_file(metric, hosts, f) for f in raw["files"]),
                other if isinstance(other, str) else None,
            )
    return hosts, versions


def installed_pyiqa_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("pyiqa")
    except metadata.PackageNotFoundError:
        return None


def metric_weights(spec: str, version: str | None) -> MetricWeights:
    """The table's entry for judge spec `pyiqa:NAME` under pyiqa `version` (default: the installed pyiqa's)."""
    if not spec.startswith("pyiqa:") or not spec[len("pyiqa:") :]:
        raise UserError(
            f"{spec!r}: weights are fetched for pyiqa judges only; fix: name one as pyiqa:NAME "
            "(e.g. pyiqa:musiq), or give no judge for the LPIPS backbone weights"
        )
    metric = spec[len("pyiqa:") :]
    _, versions = read_table()
    version = version or installed_pyiqa_version()
    if version is None:
        raise UserError(
            f"{spec}: pyiqa is not installed here, so its version is unknown; fix: install the [iqa] "
            f"extra, or pass --pyiqa-version (the table has {', '.join(sorted(versions))})"
        )
    if version not in versions:
        raise UserError(
            f"{spec}: the kit's weights table ({TABLE_PATH.name}) has no pyiqa {version}; fix: "
            f"use pyiqa {' or '.join(sorted(versions))}, or let pyiqa download the weights itself "
            "(unchecked)"
        )
    table = versions[version]
    if metric not in table:
        raise UserError(
            f"{spec}: the kit's weights table ({TABLE_PATH.name}) lists no files of pyiqa {version}'s "
            f"metric {metric}; fix: choose one of {', '.join(sorted(table))}, or let pyiqa download "
            "its weights itself (unchecked)"
        )
    return table[metric]


# ---- the user's lock: digests recorded by --trust-on-first-use or --pin ------------------------------------
def lock_path() -> Path:
    return cache_dir() / "weights" / LOCK_NAME


def read_lock() -> dict[str, dict]:
    """host/name -> {"sha256", "size", "how", "url"} of the user's lock (empty when there is none)."""
    from pytest_pstbench.core.files.jsonfile import read_json

    path = lock_path()
    if not os.path.lexists(path):  # a link to nowhere is read (and refused), not taken for no lock
        return {}
    fix = f"delete {path} and fetch again with --trust-on-first-use (or --pin NAME=SHA256)"
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path}: the pyiqa weights lock cannot be read ({' '.join(str(exc).split())[:200]}); fix: {fix}"
        ) from None
    files = data.get("files") if isinstance(data, dict) and data.get("schema") == 1 else None
    if not isinstance(files, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("sha256"), str) and HEX64.fullmatch(v["sha256"])
        for v in files.values()
    ):
        raise UserError(f"{path}: the pyiqa weights lock is not schema 1 with a 64-hex sha256 per file; fix: {fix}")
    return files


def write_lock(files: dict[str, dict]) -> None:
    from pytest_pstbench.core.files.write import dumps_json, write_atomic

    path = lock_path()
    write_atomic(
        path,
        dumps_json({"schema": 1, "files": dict(sorted(files.items()))}),
        what="the pyiqa weights lock",
        fix=f"free some space, or set PSTBENCH_CACHE to a writable folder (now {cache_dir()})",
    )

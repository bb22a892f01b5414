"""The pstbench options of a pytest session as every track kind reads them: paths (the command line's
against the current folder, the ini file's against its folder, a pytest-xdist worker's as its controller
reads them), the track, the baselines (published ones pulled on the controller), the bounds and the
command line run.json records. Each is resolved here once, one way for both kinds.

Loaded only when a pstbench option or fixture is used (it imports pytest and the standard library).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.options import option_value


def is_worker(config: pytest.Config) -> bool:
    """This process is a pytest-xdist worker (the controller alone finishes the run)."""
    return hasattr(config, "workerinput")


def controller_dir(config: pytest.Config) -> Path | None:
    """On a pytest-xdist worker that runs in another folder than the controller (`--tx popen//chdir=`, ssh):
    the controller's invocation folder, handed over by `pytest_configure_node`; else None."""
    handed = (getattr(config, "workerinput", None) or {}).get("pstbench_invocation_dir")
    return Path(handed) if handed and Path(handed) != Path(config.invocation_params.dir) else None


def as_on_controller(config: pytest.Config, value):
    """A relative path given on the command line, read as the controller reads it (its invocation folder) on
    a worker that runs elsewhere; any other value (absolute, a track or protocol id) unchanged."""
    base = controller_dir(config)
    if base is None or value is None or Path(str(value)).is_absolute() or not (base / str(value)).exists():
        return value
    return str(base / str(value))


def ini_base(config: pytest.Config) -> Path:
    """The folder relative ini paths are read against: the ini file's, else the rootdir (the controller's,
    on a worker that runs elsewhere)."""
    handed = (getattr(config, "workerinput", None) or {}).get("pstbench_ini_base")
    if handed and controller_dir(config) is not None:
        return Path(handed)
    return config.inipath.parent if config.inipath else config.rootpath


def from_cli(config: pytest.Config, suffix: str) -> bool:
    """`--pstbench-SUFFIX` was given on the command line (not only in the ini file)."""
    return config.getoption("pstbench_" + suffix.replace("-", "_"), default=None) is not None


def given(config: pytest.Config, dest: str) -> bool:
    """The option `dest` has a value from the command line or the ini file."""
    if config.getoption(dest, default=None):
        return True
    try:
        return bool(config.getini(dest))
    except ValueError:  # no such ini key
        return False


def path_value(config: pytest.Config, suffix: str) -> Path | None:
    """A path option: as given on the command line (relative to the current folder), or an ini value
    relative to the ini file's folder; None when neither is set."""
    value = config.getoption("pstbench_" + suffix.replace("-", "_"), default=None)
    if value is not None:
        return Path(as_on_controller(config, value))
    value = option_value(config, suffix)
    if value is None or value == "":
        return None
    path = Path(str(value))
    return path if path.is_absolute() else ini_base(config) / path


def track_value(config: pytest.Config) -> str | None:
    """The session's track spec, for every kind: as given on the command line, or the ini's `pstbench_track`
    (a built-in or remote track id as is, else a path read against the ini file's folder, as `path_value`)."""
    from pytest_pstbench.core.kinds import registered
    from pytest_pstbench.data.manifest import remote_track_ids

    value = option_value(config, "track")
    if value in (None, "") or from_cli(config, "track") or Path(str(value)).is_absolute():
        return None if value in (None, "") else str(as_on_controller(config, value))
    ids = {t for s in registered().values() for t in s.builtin_tracks} | set(remote_track_ids(kind=None))
    return str(value) if str(value) in ids else str(ini_base(config) / str(value))


def baseline_paths(config: pytest.Config) -> list[Path]:
    """`--pstbench-baseline` (repeatable; relative to the current folder), else the ini lines of
    `pstbench_baseline` (relative to the ini file's folder); a published run (hf://datasets/...@COMMIT/PATH)
    is pulled into the cache and verified (core.store.backends) on the controller only, once (xdist workers never
    evaluate the gate: they get the local baselines alone). A baseline URI must name a commit unless
    --pstbench-baseline-allow-branch. With --pstbench-update-baseline exactly one local folder (the folder
    written), else a UserError. The resolved baselines (their pinned records) are kept on `config` for run.json."""
    from pytest_pstbench.core.store.backends import is_published, resolve_runs

    baselines = config.getoption("pstbench_baseline", default=None)
    if baselines is None:
        baselines = [b if is_published(b) else ini_base(config) / b for b in config.getini("pstbench_baseline")]
    raw = [b if is_published(b) else as_on_controller(config, b) for b in baselines]
    if config.getoption("pstbench_update_baseline", default=None):
        if len(raw) != 1:
            raise UserError(
                f"--pstbench-update-baseline: needs exactly one baseline folder to write (--pstbench-baseline DIR "
                f"or the ini key pstbench_baseline), got {len(raw)}; fix: name the one folder to replace"
            )
        if is_published(raw[0]):
            raise UserError(
                f"--pstbench-update-baseline: {raw[0]} is a published run, which is never replaced in place; "
                "fix: write a local folder, then publish it with `pstbench runs push RUN_DIR URI`"
            )
    if is_worker(config):
        return [Path(b) for b in raw if not is_published(b)]
    protocol = option_value(config, "protocol")  # a published baseline made under a protocol file given here
    sources = resolve_runs(
        raw,
        option="--pstbench-baseline",
        pinned=True,
        one=True,
        protocol_spec=None if protocol is None else str(as_on_controller(config, protocol)),
        allow_branch=bool(option_value(config, "baseline-allow-branch")),
    )
    config._pstbench_baselines = sources  # noqa: SLF001 - read back by TrackRun for run.json
    return [s.path for s in sources]


def baseline_records(config: pytest.Config) -> list[dict]:
    """What run.json records for each baseline of the session (`RunSource.record`: a published run's pinned
    URI and commit, never a branch name; a local folder's path)."""
    return [s.record() for s in getattr(config, "_pstbench_baselines", [])]


def key_values(config: pytest.Config, suffix: str, parse):
    """`parse(items)` of the KEY=VALUE items of `--pstbench-SUFFIX` (min, max, gate-margin), else of the ini key
    `pstbench_SUFFIX`: the kind's one parser, which refuses a KEY given twice with two values in either place. Its
    one-line errors name the command-line option; for ini lines that name is replaced by where they were read
    (`/proj/pytest.ini: pstbench_min: two values for psnr (25 and 10); fix: give one`, or `-o pstbench_min`)."""
    dest = "pstbench_" + suffix.replace("-", "_")
    items = config.getoption(dest, default=None)
    if items:
        return parse(items)
    try:
        return parse(config.getini(dest))
    except UserError as exc:
        option, message = f"--pstbench-{suffix}", str(exc)
        if not message.startswith(option):
            raise
        overridden = any(
            str(o).partition("=")[0].strip() == dest for o in (getattr(config.option, "override_ini", None) or [])
        )
        where = f"-o {dest}" if overridden or config.inipath is None else f"{config.inipath}: {dest}"
        raise UserError(where + message[len(option) :]) from None


def moved_ini_problem(config: pytest.Config) -> str | None:
    """`--pstbench-NAME PATH` (space form) where PATH exists and made pytest read another ini file (or none).

    pytest chooses its rootdir and ini file from the command line's paths before any plugin's options are
    known, so the value of a plugin option given as its own argument counts as a test path there: with PATH
    outside the project pytest reads no pytest.ini at all (its pstbench_min lines, its track, unread; exit 0, no
    gate). A plugin cannot choose again (addopts, conftests and sys.path are set from that choice), so the
    choice is checked here, against pytest's own `determine_setup` with the test paths alone: a one-line
    problem with the `=` form as the fix where they differ; None where they agree (the space form is then
    the same configuration as the `=` form) or on an xdist worker."""
    import inspect
    import os
    import shlex

    from pytest_pstbench.options import BY_NAME

    if is_worker(config):
        return None
    here = Path(config.invocation_params.dir)
    words = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *(str(a) for a in config.invocation_params.args)]
    spaced = [
        (opt, value)
        for opt, value in zip(words, words[1:])
        if opt.startswith("--pstbench-")
        and opt[len("--pstbench-") :] in BY_NAME
        and BY_NAME[opt[len("--pstbench-") :]].kind != "flag"
        and _exists(here / value)
    ]
    if not spaced:
        return None
    try:
        from _pytest.config.findpaths import (
            determine_setup,
        )  # the function pytest chose with (its arguments vary by version)

        kw = {
            "inifile": config.option.inifilename,
            "override_ini": getattr(config.option, "override_ini", None),
            "args": [a for a in config.option.file_or_dir if a in words],
            "rootdir_cmd_arg": config.option.rootdir or None,
            "invocation_dir": here,
        }
        accepted = inspect.signature(determine_setup).parameters
        rootpath, inipath = determine_setup(**{k: v for k, v in kw.items() if k in accepted})[:2]
    except (ImportError, AttributeError, TypeError, ValueError, pytest.UsageError):
        return None
    if (Path(rootpath), inipath and Path(inipath)) == (Path(config.rootpath), config.inipath and Path(config.inipath)):
        return None
    opt, value = next((s for s in spaced if Path(rootpath) not in (here / s[1]).resolve().parents), spaced[0])
    if config.inipath == inipath:  # the same ini file (or none): the rootdir moved, and every item id with it
        return (
            f"{opt} {value}: pytest chose its rootdir before the plugin's options were known and took {value} for a "
            f"test path, so its rootdir is {config.rootpath} instead of {rootpath} (item ids would read "
            f"../pstbench-<track>::<id>); fix: give it as {opt}={value}"
        )
    return (
        f"{opt} {value}: pytest chose its ini file before the plugin's options were known and took {value} for a test "
        f"path, so it read {config.inipath or 'no ini file'} (rootdir {config.rootpath}) instead of "
        f"{inipath or 'no ini file'} (rootdir {rootpath}); fix: give it as {opt}={value}"
    )


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long, a link loop
        return False


def recorded_command(config: pytest.Config) -> str:
    """The command line run.json records: `pytest ARGS`, every --pstbench-header value (also given as
    `-o pstbench_header=...`) replaced by <redacted> (header values may be secrets)."""
    import shlex

    from pytest_pstbench.selection.ask.settings import redact_words

    return "pytest " + shlex.join(redact_words(config.invocation_params.args, "--pstbench-header", "pstbench_header"))

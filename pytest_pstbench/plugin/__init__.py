"""pytest plugin (the pytest11 entry point `pytest_pstbench.plugin`): options, fixtures, marker and
thin hooks.

The pytest face is this package: here the options (from the one table, `pytest_pstbench.options`),
fixtures and hooks. The track-run frame (`TrackRun`: collection, results from xdist workers, finishing,
the gate, the terminal summary) is `pytest_pstbench.frame.pytest_run`, and each kind's pytest run
subclassing it lives in the kind's package, found through `pytest_pstbench.core.kinds`.

Imports only pytest and the standard library at module level (it is loaded in every pytest run
of an environment where pytest-pstbench is installed). Everything heavy is imported when a
pstbench option, fixture or marker is used: the track kind's run.
"""

from __future__ import annotations

import pytest

from pytest_pstbench.options import option_value  # standard library only: the plugin stays cheap to import


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.kinds import kind_options
    from pytest_pstbench.options import add_to_pytest  # the one option table (standard library only)

    try:  # each registered kind's own options (its KindSpec's `options`: standard library only)
        own = kind_options()
    except UserError:  # a broken registry: said in one line once a track is given (pytest_configure)
        own = ()
    add_to_pytest(parser, parser.getgroup("pstbench", "pstbench: photorealistic style transfer benchmark"), own)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "pstbench: a test that scores method outputs with pytest-pstbench (set by the pstbench fixtures)"
    )
    if _pstbench_words(config):  # an option's value taken for a test path when pytest chose its ini file
        from pytest_pstbench.frame.config import moved_ini_problem

        problem = moved_ini_problem(config)
        if problem:
            raise pytest.UsageError(f"pstbench: {problem}")
    if option_value(config, "track"):
        if getattr(config.option, "dist", None) == "each" and not hasattr(config, "workerinput"):
            raise pytest.UsageError(
                "pstbench: --dist each: pytest-xdist runs every item on every worker, so each pair or task would be "
                "scored once per worker while a run holds one result for each; fix: let the workers share the items: "
                "-n N alone (--dist load), or --dist load, loadscope, loadfile, loadgroup or worksteal"
            )
        _passive_openmp_under_xdist(config)
        from pytest_pstbench.core.errors import UserError
        from pytest_pstbench.core.kinds import pytest_run_class, track_kind
        from pytest_pstbench.core.paths import refuse_non_utf8
        from pytest_pstbench.frame.config import track_value

        try:  # before any work: run.json records the command line and the paths as UTF-8 text
            refuse_non_utf8([str(a) for a in config.invocation_params.args], what="pytest argument")
        except UserError as exc:
            raise pytest.UsageError(f"pstbench: {exc}") from None
        try:  # the kind that claims the track (built-in names, a manifest's `kind:` line), through the registry
            kind = track_kind(track_value(config))
        except UserError as exc:  # an unknown kind in the manifest: one line, no traceback
            raise pytest.UsageError(f"pstbench: {exc}") from None
        problem = _xdist_path_argument(config)
        if problem:
            raise pytest.UsageError(f"pstbench: {problem}")
        config.pluginmanager.register(pytest_run_class(kind).from_config(config), "pstbench-run")


def _pstbench_words(config: pytest.Config) -> bool:
    """A pstbench option is on the command line or in PYTEST_ADDOPTS (the only places its space form can
    change the ini file pytest reads)."""
    import os

    return any(
        str(a).startswith("--pstbench-") for a in config.invocation_params.args
    ) or "--pstbench-" in os.environ.get("PYTEST_ADDOPTS", "")


def _xdist_path_argument(config: pytest.Config) -> str | None:
    """With pytest-xdist workers that run elsewhere (`--tx ssh=...`, `popen//chdir=...`), xdist rewrites each
    command-line argument that names an existing path relative to an rsync root and stops with an INTERNALERROR
    ("not relative to an rsync root") when it is not under one: an option value given as its own argument
    (`--pstbench-outputs DIR`). Found here first, as one line with the `--option=value` form that works."""
    import re
    from pathlib import Path

    if hasattr(config, "workerinput"):
        return None
    specs = [re.sub(r"^\d+\*", "", str(s)) for s in (getattr(config.option, "tx", None) or [])]
    if not any(not s.startswith("popen") or "//chdir=" in s for s in specs):
        return None
    roots = [
        Path(str(r)).resolve() for r in [*(getattr(config.option, "rsyncdir", None) or []), *config.getini("rsyncdirs")]
    ]
    args = [str(a) for a in config.invocation_params.args]
    for i, arg in enumerate(args):
        path = Path(arg.split("::")[0])
        try:
            exists = path.exists()
        except OSError:
            exists = False
        if not exists or any(path.resolve() == r or r in path.resolve().parents for r in roots):
            continue
        prev = args[i - 1] if i else ""
        fix = (
            f"give it as {prev}={arg}"
            if prev.startswith("--") and "=" not in prev
            else "give the path inside an --rsyncdir"
        )
        return (
            f"{arg}: pytest-xdist workers that run elsewhere (--tx {specs[0]}) cannot take a command-line argument "
            f"that names a path outside an --rsyncdir; fix: {fix}"
        )
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist, on the controller: hand each worker the folders relative paths are read against (the
    invocation folder for command-line paths, the ini file's for ini paths), so that a worker running in
    another folder (`--tx popen//chdir=DIR`, ssh) reads the same track, outputs and baselines."""
    config = node.config
    node.workerinput["pstbench_invocation_dir"] = str(config.invocation_params.dir)
    node.workerinput["pstbench_ini_base"] = str(config.inipath.parent if config.inipath else config.rootpath)


def _passive_openmp_under_xdist(config: pytest.Config) -> None:
    """Under pytest-xdist, several processes on one machine each run torch with one OpenMP thread per CPU;
    OpenMP's default busy-waiting then makes them stall each other (`-n 2` on 2 CPUs took 2.4-10x the
    serial time). OMP_WAIT_POLICY=PASSIVE lets waiting threads sleep: the same threads and the same
    values (the run files stay byte-identical), at about the serial time. Set on the controller before
    it starts local workers (they inherit it) and on each worker (ssh workers), where it takes effect if
    torch is loaded afterwards (a conftest importing torch comes first: see docs/pytest.md); a value
    the user set is kept."""
    import os

    xdist = getattr(config, "workerinput", None) is not None or bool(
        getattr(config.option, "numprocesses", None) or getattr(config.option, "tx", None)
    )
    if xdist and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def _run(request: pytest.FixtureRequest):
    run = request.config.pluginmanager.get_plugin("pstbench-run")
    if run is None:
        raise pytest.UsageError(
            f"{request.node.nodeid}: fixture needs a track; fix: pass --pstbench-track (e.g. demo) or set pstbench_track in the ini file"
        )
    return run


# One-line usage errors found while collecting (a collection error would show a traceback);
# raised after collection by `pytest_collection_modifyitems`.
_USAGE_ERRORS = pytest.StashKey[list]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "pstbench_pair" in metafunc.fixturenames:
        run = metafunc.config.pluginmanager.get_plugin("pstbench-run")
        if run is None:
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: uses pstbench_pair but no track is set; "
                "fix: pass --pstbench-track (e.g. demo) or set pstbench_track in the ini file"
            )
        problem = run.pair_fixture_problem(metafunc.definition.nodeid)  # the track's kind says whether it has pairs
        if problem:
            if hasattr(metafunc.config, "workerinput"):  # xdist worker: a usage error would crash it;
                raise pytest.Collector.CollectError(f"pstbench: {problem}")  # a CollectError shows one line
            metafunc.config.stash.setdefault(_USAGE_ERRORS, []).append(problem)
            return
        pairs = run.track.pairs
        metafunc.parametrize("pstbench_pair", pairs, ids=[p.id for p in pairs], indirect=True)


def pytest_collection_modifyitems(session, config, items) -> None:
    problems = config.stash.get(_USAGE_ERRORS, None)
    if problems:
        raise pytest.UsageError(
            f"pstbench: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
        )


@pytest.fixture
def pstbench_compare():
    """`pstbench_compare(baseline=RUN_DIR, candidate=RUN_DIR, metrics=None, margins=None)` -> a Comparison.

    The same tests with Holm correction as `pstbench compare` (paired Wilcoxon; exact McNemar for
    selection runs); use `assert not result.worse` (the tests significantly worse than the baseline,
    beyond the margin for a metric of `margins`, {metric: delta}, as `pstbench compare --margin`).
    The runs are named as `pst.compare` names them (a positional run takes the role left open; two different
    positional runs are refused: they read both ways).
    """

    def compare(*runs, baseline=None, candidate=None, metrics=None, margins=None):
        from pytest_pstbench.api import compare as api_compare  # the public API's `compare`

        return api_compare(*runs, baseline=baseline, candidate=candidate, metrics=metrics, margins=margins)

    return compare


@pytest.fixture(scope="session")
def pstbench_protocol(request):
    """The loaded protocol (`pytest_pstbench.core.protocol.Protocol`)."""
    return _run(request).protocol


@pytest.fixture(scope="session")
def pstbench_track(request):
    """The track being scored (`pytest_pstbench.paired.tracks.Track`)."""
    return _run(request).track


@pytest.fixture
def pstbench_pair(request):
    """The current pair (`Pair`: id, content, style, reference paths); parametrised over the track's pairs."""
    request.node.add_marker("pstbench")
    return request.param


@pytest.fixture
def pstbench_images(request, pstbench_pair):
    """The current pair's images read exactly as the scorer reads them under the run's protocol (EXIF
    orientation applied, ICC profiles converted to sRGB; not `Image.open().convert("RGB")`): `.content`,
    `.style`, `.reference` (uint8 HxWx3 RGB arrays) and `.inputs` (content, style). A file the protocol
    refuses fails the test with its one-line message."""
    from pytest_pstbench.api import load_pair
    from pytest_pstbench.core.errors import UserError

    try:
        return load_pair(pstbench_pair, protocol=_run(request).protocol)
    except UserError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def pstbench_score(request, pstbench_pair):
    """Score an output for the current pair and record it in the run: `pstbench_score(array_or_path)`.

    Takes a uint8 HxWx3 RGB array or a path to a PNG; returns the metrics dict. A bad output fails
    the test with the I/O rule's message.
    """
    run = _run(request)

    def score(output):
        return run.score_for_item(request.node, pstbench_pair, output)

    return score

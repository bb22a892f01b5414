"""The kind registry: track kinds (each a package of its own) register here, and core names none of them.

A kind is described by a `KindSpec`: its name, the per-item file of its run folders, the unit its tests
count, how it claims a track or a protocol, and where its parts live as lazy ``"module:object"`` strings
(its protocol validator, its run kind for comparisons and gates, its pytest run, its commands and options). Kinds
are registered
through the entry-point group ``pytest_pstbench.kinds`` (one line of a package's pyproject.toml, e.g.
``paired = "pytest_pstbench.paired.kind:KIND"``), so a third kind is a new package and one entry point.

Standard library only; a kind's spec module is standard-library only too (the pytest plugin asks which
kind a track is before anything heavy is imported); its other modules load when first used.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json

ENTRY_POINT_GROUP = "pytest_pstbench.kinds"


@dataclass(frozen=True)
class ReportOption:
    """An option of `pstbench report` that bounds what a kind's page shows (`--max-pairs N`): 0 or a positive
    number, `default` where it is not given. The frame checks it and hands every kind's to the page
    (`ReportRequest.kind_options`, by `dest`)."""

    flag: str  # "--max-pairs"
    dest: str  # "max_pairs": its key in ReportRequest.kind_options (and build_report's keyword)
    default: int
    zero: str = "all"  # what 0 means, in the line that refuses a negative value
    example: int = 50  # the value that line suggests


@dataclass(frozen=True)
class KindSpec:
    """A track kind as the registry knows it: plain data and lazy references, no import of the kind."""

    name: str
    item_file: str  # the per-item file of its run folders (its content tells runs apart)
    unit: str  # what a run's items are ("pairs", "tasks")
    n_key: str  # run.json's count of the track's items ("n_pairs", "n_tasks")
    validate_protocol: str  # "module:function" (path, parsed YAML) -> None, UserError when a rule is broken
    runs: str  # "module:object": the kind's `RunKind` (load, compare, gate)
    pytest_run: str  # "module:object": the pytest plugin's run frame for a track of this kind
    # The hooks the front doors, report and data dispatch through (each kind declares every one; None: none).
    demo_track: str | None = None  # the id of its demo track, generated locally (no download)
    dataset_layout: str | None = (
        None  # how a remote dataset manifest of the kind lays out its items (data/manifest.py LAYOUTS)
    )
    paper_table: str | None = (
        None  # "module:function" (paths, *, metrics, against, protocol_spec) -> core.paper_table.Table
    )
    metric_table: str | None = None  # "module:function" (protocol data) -> (rows, headers) of `pstbench ls metrics`
    builtin_tracks: tuple[str, ...] = ()  # track ids that are of this kind without a manifest
    default: bool = False  # the kind of a track, protocol or run folder that names no kind
    html_report: str | None = (
        None  # "module:function" (ReportRequest) -> Path: `pstbench report`'s page of the kind's runs
    )
    # "module:function" (base Protocol, variant id) -> Protocol: `--protocol BASE+VARIANT` (core.protocol.load_protocol)
    apply_variant: str | None = None
    report_options: tuple[ReportOption, ...] = ()  # the options of `pstbench report` its page reads
    # "module:class": the core.protocol.Protocol subclass its protocols load as (their typed sections); None: Protocol
    protocol_type: str | None = None
    # The kind's doors: "module:function" (argparse subparsers) adding its own `pstbench` commands; "module:function"
    # (argparse namespace) -> exit code, `pstbench score --track T` of a track of the kind (None: refused in one line
    # that points at the kind's own commands); "module:NAME", a tuple of pytest_pstbench.options.Option, the kind's own
    # pytest options (`--pstbench-NAME` and ini key, added after the shared table's; standard library only)
    # "module:function" (track spec, progress=None) -> the kind's track (`.id`, `.revision`, its items)
    resolve_track: str | None = None
    # "module:function" (argparse namespace, run paths) -> exit code: `pstbench power` of the kind's runs (None: refused)
    power: str | None = None
    # "module:function" (core.reproduce.ReproduceRequest) -> core.reproduce.Reproduction: `pstbench reproduce` of the
    # kind's runs, scored again through its own scoring path (None: its runs cannot be reproduced, said in one line)
    reproduce: str | None = None
    commands: str | None = None
    score: str | None = None
    options: str | None = None

    @property
    def run_files(self) -> tuple[str, ...]:
        """The files every complete run folder of the kind holds: its per-item file, summary.json, run.json."""
        return (self.item_file, "summary.json", "run.json")

    def load(self, attr: str):
        """The object a lazy ``"module:object"`` field names, imported now."""
        module, _, name = getattr(self, attr).partition(":")
        return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class RunKind:
    """What a kind provides for its run folders, so that `pstbench compare`, the `pstbench_compare`
    fixture, `pstbench table` and the pytest gate are written once against it."""

    name: str
    run_files: tuple[str, ...]
    load: Callable[[Path], Any]  # a run folder -> the kind's run object (UserError when it is not one)
    check_comparable: Callable[[list], None]  # UserError naming the field when runs cannot be compared
    compare_two: Callable[..., list]  # (baseline, candidate, protocol, metrics, margins) -> test rows
    finish: Callable[[list, Any], Any]  # (rows, protocol) -> a comparison (Holm over the rows): .worse, .alpha
    worse_reason: Callable[[Any, Any, Any], str]  # (row, comparison, protocol) -> the gate's reason for a worse row
    compare_paths: Callable[
        ..., Any
    ]  # (paths, *, protocol_spec, against_first, metrics, margins) -> (comparison, protocol, runs)
    compare_text: Callable[[Any, list, Any], str]  # (comparison, runs, protocol) -> what `pstbench compare` prints
    check_margins: Callable[
        [str, str], None
    ]  # (option as given, what to drop): UserError where the kind has no margins
    validate: Callable[
        [Any, Any], None
    ]  # (run, protocol): UserError when a complete run's files disagree or break a rule
    item_file: str  # the per-item file (metrics.csv / per_task.csv): its content tells runs apart
    smallest_pvalue: Callable[[Any, Any], float]  # (row, protocol) -> the smallest p its test can give with its n
    unit: str  # what a test's n counts ("pairs")
    # (comparison, runs, protocol, n, against_first) -> (text, JSON) of the items the candidate lost most on
    # (`pstbench compare --worst N`); None: the kind has no per-item losses, and `--worst` is refused
    worst: Callable[..., tuple[str, list]] | None = None
    # `pstbench history` (core/history.py): (run, protocol, metrics or None) -> {name: {mean, low, high}}, each
    # value and its interval as the run's summary gives it; and (a finished test row) -> (name, mean difference,
    # later minus earlier). None: the kind has no history
    history_values: Callable[..., dict] | None = None
    history_step: Callable[[Any], tuple[str, float]] | None = None
    # the history's finish (rows, protocol) -> a comparison, where it can skip what `finish` adds that a history
    # never shows (the paired kind's minimum detectable effects: most of a long history's time); None: `finish`
    history_finish: Callable[[list, Any], Any] | None = None
    # `pstbench board`'s tests (board/ranks.py): (runs, protocol, history key) -> the test rows of every pair of runs
    # (the later run the candidate) on that key, as `compare_two` makes them but without what a ranking does not use
    # (intervals, detectable effects), each run's items read once; None: `compare_two` per pair
    pairwise_tests: Callable[[list, Any, str], list] | None = None
    # `pstbench board`'s reference rows of a track that are not runs: (runs, protocol, history keys) -> ([{"name",
    # "values": {key: {mean, low, high}}, "note"}], [notes]), e.g. a selection track's random baseline and human row
    # (as `pstbench table` shows them) and, where a row is missing, a note saying why; None: none
    board_references: Callable[[list, Any, list], tuple[list, list]] | None = None

    # (row, baseline run, candidate run, protocol, n, item files or None) -> core.gate.WorstItems: for a test the
    # gate failed on, the n items the candidate lost most on (a failed gate's summaries); None: none are shown
    gate_worst: Callable[..., Any] | None = None
    # (row, protocol) -> how a line names one test ("Top-1 pass^3"): where a comparison's tests differ in n, a test
    # that cannot be significant at its n is named (core.compare.partly_blind); None: every test has the same n
    test_label: Callable[[Any, Any], str] | None = None


@dataclass(frozen=True)
class PageSection:
    """A section the report frame adds to a kind's page, whatever the kind (a method's history: `pstbench report
    --history`): its anchor and navigation title, its HTML (made by the frame, every foreign text escaped), and
    the files it references, (path relative to the page folder, bytes), which the kind writes with the page."""

    anchor: str
    title: str
    html: str
    files: tuple = ()

    def write(self, folder: Path) -> None:
        """Write the section's files under the page's staging folder `folder`."""
        from pytest_pstbench.core.files.write import write_new

        for rel, data in self.files:
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            write_new(target, data)


@dataclass(frozen=True)
class ReportRequest:
    """What `pstbench report` hands a kind's `html_report` hook once the frame (report/build.py) has checked
    the call: the runs (store RunSources: `.path` read, `.uri` set for a published run), all of one kind; the
    page folder `out` (checked replaceable, holding no input); the options, the frame's and those the registered
    kinds declare (`kind_options`, each bound's default where it was not given); and the page's frame: its
    generator tag (an earlier page is found by it) and style sheet."""

    sources: list
    out: Path
    generator: str
    css: str
    thumb_size: int
    # every registered kind's `report_options` by dest ({"max_pairs": 50, "worst": 5, "max_tasks": 100}), the
    # value given or its default
    kind_options: dict = field(default_factory=dict)
    given: frozenset = frozenset()  # the flags of the kind options given (a kind refuses one its page does not count)
    sensitivity: str | None = None
    track_spec: str | None = None
    protocol_spec: str | None = None
    progress: Callable[[str], None] | None = None
    sections: tuple = ()  # PageSections the frame adds (shown before the page's galleries, in the navigation too)


# ---- the registry ------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def registered() -> dict[str, KindSpec]:
    """Kind name -> its spec, from the entry-point group, sorted by name; exactly one kind is the default."""
    from importlib.metadata import entry_points

    specs: dict[str, KindSpec] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        spec = ep.load()
        if not isinstance(spec, KindSpec) or spec.name != ep.name:
            raise UserError(
                f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) is not the KindSpec of a kind "
                f"named {ep.name}; fix: point it at the kind's KindSpec"
            )
        specs.setdefault(spec.name, spec)  # the same distribution seen twice on sys.path: the first wins
    if not specs:
        raise UserError(
            f"no track kind is registered (entry-point group {ENTRY_POINT_GROUP}); "
            "fix: reinstall pytest-pstbench (pip install -e . or its wheel)"
        )
    defaults = [s.name for s in specs.values() if s.default]
    if len(defaults) != 1:
        raise UserError(
            f"the registered track kinds ({', '.join(sorted(specs))}) must have exactly one default kind, "
            f"not {len(defaults)}; fix: mark one KindSpec default=True"
        )
    return dict(sorted(specs.items()))


def names() -> list[str]:
    return list(registered())


def spec(name: str) -> KindSpec:
    """The spec of a registered kind; an unknown name is a user error listing the available ones."""
    specs = registered()
    if name not in specs:
        raise UserError(f"unknown kind {name}; available: {', '.join(specs)}")
    return specs[name]


def report_options() -> list[ReportOption]:
    """The options of `pstbench report` the registered kinds declare for their pages, kind by kind."""
    return [o for s in registered().values() for o in s.report_options]


def report_option(flag: str) -> ReportOption:
    """The declared page option `flag` (`--max-pairs`), whichever kind declares it."""
    return next(o for o in report_options() if o.flag == flag)


def default_kind() -> str:
    return next(s.name for s in registered().values() if s.default)


def get(name: str) -> RunKind:
    """The run kind (comparisons, gate) of a registered kind."""
    return spec(name).load("runs")


def kind_options() -> tuple:
    """The pytest options every registered kind declares beside the shared table (its `options` hook), in the
    kinds' order."""
    return tuple(o for s in registered().values() if s.options is not None for o in s.load("options"))


def pytest_run_class(kind: str):
    """The pytest plugin's run frame for a track of this kind."""
    return spec(kind).load("pytest_run")


# ---- which kind a track, a protocol or a run folder is -----------------------------------------------
_KIND_LINE = re.compile(r"^kind:\s*['\"]?([^\s'\"#]+)['\"]?\s*(#.*)?$", re.MULTILINE)


def manifest_path(spec_: str | Path) -> Path | None:
    """The manifest file a local track spec points at (a YAML file, or a folder with track.yaml)."""
    path = Path(spec_)
    if path.is_dir():
        path = path / "track.yaml"
    return path if path.is_file() else None


def _declared_kind(name, where) -> str:
    """The kind a manifest, protocol or run record names in its top-level `kind` (absent: the default
    kind); a name no registered kind has is refused with one line naming the file."""
    if name is None:
        return default_kind()
    if isinstance(name, str) and name in registered():
        return name
    raise UserError(
        f"{where}: unknown kind {name}; available: {', '.join(registered())}; "
        "fix: correct the file's `kind:` (or install the package that registers that kind)"
    )


def track_kind(track: str) -> str:
    """The kind of a track spec: the kind whose `builtin_tracks` hold it, else the kind a manifest's
    top-level `kind:` line names (a relative path as given: the pytest plugin resolves an ini path against
    the ini file's folder first, frame.config.track_value), else the default kind. Reads at most the
    manifest's first 64 KiB; imports nothing."""
    for s in registered().values():
        if str(track) in s.builtin_tracks:
            return s.name
    path = manifest_path(Path(track))
    if path is None:
        return default_kind()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(65536)
    except OSError:
        return default_kind()
    found = _KIND_LINE.search(head)
    return _declared_kind(found.group(1) if found else None, path)


def protocol_kind(data, path: Path | str = "protocol") -> str:
    """The kind a parsed protocol file belongs to: its top-level `kind`, else the default kind."""
    return _declared_kind(data.get("kind") if isinstance(data, dict) else None, path)


def record_kind(data: dict, path: Path | str = "run.json") -> str:
    """The kind of a run from its run.json / summary.json content (`kind`), else the default kind."""
    return _declared_kind(data.get("kind"), path)


def run_kind(path: str | Path) -> str | None:
    """A run folder's kind, from run.json / summary.json `kind`, else from the per-item file it holds;
    None when the folder holds none of these (its loader then says what is missing)."""
    p = Path(path)
    for name in ("run.json", "summary.json"):
        try:
            data = read_json(p / name)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return record_kind(data, p / name)
    for s in registered().values():
        if (p / s.item_file).is_file():
            return s.name
    return None


def runs_kind(paths) -> str:
    """The kind shared by all run folders (the default kind when none can be told); a mix of kinds is a
    user error."""
    first: dict[str, Path] = {}
    for p in paths:
        k = run_kind(p)
        if k is not None:
            first.setdefault(k, Path(p))
    if len(first) > 1:
        (ka, a), (kb, b) = sorted(first.items(), key=lambda kv: not spec(kv[0]).default)[:2]
        raise UserError(
            f"{a} is a {ka} run ({spec(ka).item_file}) but {b} is a {kb} run ({spec(kb).item_file}); "
            f"{ka} and {kb} runs cannot be compared; fix: compare runs of the same track"
        )
    return next(iter(first), default_kind())


def kind_of_runs(paths) -> RunKind:
    return get(runs_kind(paths))

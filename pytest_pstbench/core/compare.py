"""Comparing runs, written once for every kind: the checks that make runs comparable, the protocol they
were made under, the loop over pairs of runs, and the gate's baseline rules (each baseline once, a
comparison that cannot detect a worse run fails, `compare --fail-on-worse`). A kind supplies its
`RunKind` (core/kinds.py): its loader, its test between two runs and its Holm step.
"""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError, suggest
from pytest_pstbench.core.kinds import RunKind, get, kind_of_runs


def check_runs_comparable(runs, *, unit: str, n_key: str, ids_file: str, ids) -> None:
    """Refuse incomplete runs and runs that differ in protocol, track, dataset revision or in the set of
    items (`unit`: pairs of paired runs, tasks of selection runs; `ids(run)` gives a run's item ids)."""
    for r in runs:
        if not r.complete:
            raise UserError(
                f"{r.path}: run.json says complete: false ({r.run.get('n_scored')} of {r.run.get(n_key)} {unit} "
                f"scored); only complete runs can be compared; fix: score every {unit[:-1]} and compare again"
            )
    first = runs[0]
    for r in runs[1:]:
        theirs = r.record.identity()
        for label, a in first.record.identity().items():
            b = theirs[label]
            if a != b:
                raise UserError(
                    f"{r.path}: run.json {label} is {b!r} but {first.path} has {a!r}; runs made under another "
                    "protocol, track or dataset revision cannot be compared; fix: score both under the same ones"
                )
        if set(ids(r)) != set(ids(first)):
            only_a = sorted(set(ids(first)) - set(ids(r)))
            only_b = sorted(set(ids(r)) - set(ids(first)))
            raise UserError(
                f"{r.path}: {ids_file} has another set of {unit} than {first.path} "
                f"(only in the first: {only_a[:5]}, only here: {only_b[:5]}); fix: compare runs over the same {unit}"
            )


def protocol_for(runs, spec: str | None = None):
    """The protocol file the runs were made under (matched by sha256: a file whose bytes have another hash is
    not read further; the one whose bytes match is loaded, and a problem with it is its own one-line error)."""
    import hashlib

    from pytest_pstbench.core.protocol import load_protocol, protocol_path, variant_spec

    want = runs[0].record.protocol_sha256
    candidates = [spec] if spec else [runs[0].record.protocol_id, runs[0].record.protocol_path]
    seen = []
    for c in candidates:
        if not c or not isinstance(c, str):
            continue
        if variant_spec(c) is not None:  # BASE+VARIANT: the digest of the base's and the variant's files
            protocol = load_protocol(c)
            if protocol.sha256 == want:
                return protocol
            seen.append(f"{c} (sha256 {protocol.sha256[:12]})")
            continue
        path = protocol_path(c)
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except (OSError, ValueError) as exc:  # ValueError: a name no file can have (a lone surrogate, a NUL byte)
            tried = f"{path} ({' '.join(str(getattr(exc, 'strerror', None) or exc).split())})"
        else:
            if digest == want:
                return load_protocol(path)
            tried = f"{path} (sha256 {digest[:12]})"
        if tried not in seen:
            seen.append(tried)
    raise UserError(
        f"{runs[0].path}: the runs were made under protocol sha256 {str(want)[:12]}, but no protocol file with that "
        f"hash was found (tried {', '.join(seen) or 'none'}); fix: pass --protocol PATH of the file used for the runs"
    )


def checked_runs(
    kind: RunKind, runs: list, *, protocol=None, protocol_spec: str | None = None, comparable: bool = False
):
    """The checks of the one validating reader (`core.store.reader.read_runs`) on runs already loaded by
    `kind.load` -> their protocol. With `comparable`
    the runs must be comparable (complete, same protocol, track, dataset revision and items); the protocol
    is `protocol`, else the file found by the runs' sha256 (`protocol_for`, `protocol_spec` first); each
    run must have been made under it (run.json protocol.sha256), be named, and pass the kind's `validate`
    (its files agree with each other and with the protocol)."""
    for r in runs:
        if not isinstance(r.record.name, str) or not r.record.name:
            raise UserError(
                f"{r.path / 'run.json'}: name is {r.record.name!r}, not a run name; fix: score the run again"
            )
    if comparable:
        kind.check_comparable(runs)
    if protocol is None:
        protocol = protocol_for(runs, protocol_spec)
    for r in runs:
        if r.record.protocol_sha256 != protocol.sha256:
            raise UserError(
                f"{r.path / 'run.json'}: protocol.sha256 is {str(r.record.protocol_sha256)[:12]!r} but the protocol "
                f"read ({protocol.path}) has {protocol.sha256[:12]}; fix: read runs made under one protocol file"
            )
        kind.validate(r, protocol)
    return protocol


def run_pairs(runs: list, against_first: bool) -> list[tuple]:
    """(baseline, candidate) pairs: each run against the first, or all pairs (the later run the candidate)."""
    if against_first:
        return [(runs[0], r) for r in runs[1:]]
    return [(runs[i], runs[j]) for i in range(len(runs)) for j in range(i + 1, len(runs))]


def check_metric_names(names, known, message) -> list[str]:
    """`names` (all of `known` when empty) when each is one of the protocol's metrics `known`; else a
    UserError with `message(unknown names)`, the caller's one line naming its option and the protocol."""
    names = list(names) if names else list(known)
    unknown = [m for m in names if m not in known]
    if unknown:
        raise UserError(message(unknown) + suggest(unknown[0], known))
    return names


# ---- the gate's baseline rules ------------------------------------------------------------------------
GATE_WORST = 3  # a failed gate's summaries show this many items lost most on, per failing metric and baseline


def gate_against_baselines(
    result, run_dir: Path, baselines, protocol, metrics, margins: dict | None = None, item_files: dict | None = None
) -> None:
    """The candidate run in `run_dir` against each baseline run of the same kind, Holm over all tests;
    each test whose verdict is worse adds the kind's reason to `result` (a gate.GateResult) and, where the
    kind has `gate_worst`, the GATE_WORST items the candidate lost most on, once per metric and baseline
    (`item_files`: item id -> its input files, shown beside them where the caller knows them)."""
    kind = kind_of_runs([*baselines, run_dir])  # a baseline of another kind is refused here
    candidate = kind.load(Path(run_dir))
    rows, base_of = [], []
    for b in unique_baselines(baselines, kind, result.notes):
        base = kind.load(Path(b))
        kind.check_comparable([base, candidate])
        checked_runs(kind, [base], protocol=protocol)
        new = kind.compare_two(base, candidate, protocol, metrics, margins)
        rows.extend(new)
        base_of.extend([base] * len(new))
    checked_runs(kind, [candidate], protocol=protocol)
    comp = kind.finish(rows, protocol)
    result.comparison = comp
    result.reasons.extend(comparison_failures(comp, kind, protocol))
    part = partly_blind(rows, comp.alpha, kind, protocol, GATE_FIX)
    if part:
        result.notes.append(part)
    if kind.gate_worst is not None:
        worse, shown = {id(r) for r in comp.worse}, set()
        for row, base in zip(rows, base_of):
            if id(row) in worse and (row.metric, id(base)) not in shown:
                shown.add((row.metric, id(base)))
                result.worst.append(kind.gate_worst(row, base, candidate, protocol, GATE_WORST, item_files))


# What a comparison that cannot detect a worse run advises, in each front door's own options.
GATE_FIX = (
    "fix: gate on a track with more items, on fewer metrics (--pstbench-gate-metrics), "
    "or with bounds (--pstbench-min/--pstbench-max) instead of a baseline"
)
COMPARE_FIX = (
    "fix: compare on a track with more items or on fewer metrics (--metrics), "
    "or drop --fail-on-worse and judge the run by its values"
)


def comparison_failures(comp, kind: RunKind, protocol, fix: str = GATE_FIX) -> list[str]:
    """Why a comparison fails a gate (`pstbench compare --fail-on-worse` too, with `fix` = COMPARE_FIX): a
    reason per test worse than its baseline; with none worse, the reason it could not have found one
    (`cannot_detect`), if so."""
    reasons = [kind.worse_reason(r, comp, protocol) for r in comp.worse]
    if comp.rows and not reasons:
        blind = cannot_detect(comp.rows, comp.alpha, kind, protocol, fix)
        if blind:
            reasons.append(blind)
    return reasons


def cannot_detect(
    rows,
    alpha: float,
    kind: RunKind,
    protocol,
    fix: str = GATE_FIX,
    what: str = "the baseline comparison cannot detect a worse run",
) -> str | None:
    """Why a comparison could not have found any test worse, whatever the runs' values: with too few pairs
    (or tasks), Holm's smallest adjusted p-value, m times the smallest p any test can give, is not below
    alpha. A gate that cannot fail proves nothing, so it fails and says so; None when it can detect.
    `what` opens the line (compare and table say that no difference can be significant)."""
    smallest = min(kind.smallest_pvalue(r, protocol) for r in rows)
    m = len(rows)
    if m * smallest < alpha:
        return None
    n = min(r.n for r in rows)
    clusters = [getattr(r, "clusters", None) for r in rows]  # a test of clusters of items counts clusters
    size = f"{min(clusters)} clusters ({n} {kind.unit})" if None not in clusters else f"{n} {kind.unit}"
    return (
        f"{what}: with {size} per test the smallest p-value a "
        f"test can give is {smallest:.4g}, and Holm's correction over its {m} tests makes that {min(1.0, m * smallest):.4g}, "
        f"not below alpha {alpha}; {fix}"
    )


#: How `pstbench compare` and `pstbench table` open the line of a comparison where nothing can be significant.
NOTHING_SIGNIFICANT = "no difference can be significant here"
TABLE_FIX = "fix: tabulate a track with more items or fewer metrics (--metrics)"
NOTE_FIX = "fix: compare on a track with more items or on fewer metrics (--metrics)"


def partly_blind(rows, alpha: float, kind: RunKind, protocol, fix: str = NOTE_FIX) -> str | None:
    """Where the tests of a comparison differ in n (a selection run's pass^3 counts tasks, its ap@1 task trials),
    the one line naming the tests that cannot be significant at their n, whatever the runs' values (m times the
    smallest p such a test can give is not below alpha), while others can; None when none or all are (all:
    `cannot_detect`). Compare, table and the gate say it; it does not fail a gate."""
    if kind.test_label is None or not rows:
        return None
    m = len(rows)
    blind = [r for r in rows if m * kind.smallest_pvalue(r, protocol) >= alpha]
    if not blind or len(blind) == len(rows):
        return None
    ns = sorted({r.n for r in blind})
    smallest = min(kind.smallest_pvalue(r, protocol) for r in blind)
    names = ", ".join(dict.fromkeys(kind.test_label(r, protocol) for r in blind))
    return (
        f"{NOTHING_SIGNIFICANT} in {len(blind)} of the {m} tests ({names}): with {ns[-1]} {kind.unit}"
        f"{' or fewer' if len(ns) > 1 else ''} per test the "
        f"smallest p-value they can give is {smallest:.4g}, and Holm's correction over {m} tests makes that "
        f"{min(1.0, m * smallest):.4g}, not below alpha {alpha}; {fix}"
    )


def unique_baselines(baselines, kind: RunKind, notes: list[str]) -> list[Path]:
    """The baselines, each run once: a folder given again (by another path or a symlink) or a copy with
    the same per-item file (the same values pair for pair: the same tests) is dropped, with a note. A
    duplicate would enter Holm's correction twice and weaken the gate."""
    import hashlib

    seen: dict[str, Path] = {}
    out = []
    for b in baselines:
        b = Path(b)
        try:
            digest = hashlib.sha256((b / kind.item_file).read_bytes()).hexdigest()
        except OSError:  # kind.load names what is missing
            out.append(b)
            continue
        if digest in seen:
            notes.append(f"baseline {b} is the same run as {seen[digest]} (same {kind.item_file}): counted once")
            continue
        seen[digest] = b
        out.append(b)
    return out


def fail_on_worse(args, comp, kind_name: str, protocol) -> int:
    """`pstbench compare --fail-on-worse`: 1 (each reason on stderr) when the gate would fail on this
    comparison (a test worse, or a comparison that could not detect one), else 0. Without the option, a
    comparison in which no difference can be significant says so in one line on stderr, and 0."""
    import sys

    if not getattr(args, "fail_on_worse", False):
        blind = (
            cannot_detect(comp.rows, comp.alpha, get(kind_name), protocol, NOTE_FIX, NOTHING_SIGNIFICANT)
            if comp.rows
            else None
        )
        if blind:  # --fail-on-worse gives its own reason below
            print(f"pstbench compare: {blind}", file=sys.stderr)
    part = partly_blind(comp.rows, comp.alpha, get(kind_name), protocol)
    if part:  # some tests only (a selection run's pass^3 at few tasks): said, never a failure
        print(f"pstbench compare: {part}", file=sys.stderr)
    if not getattr(args, "fail_on_worse", False):
        return 0
    reasons = comparison_failures(comp, get(kind_name), protocol, COMPARE_FIX)
    for reason in reasons:
        print(f"pstbench compare: FAILED: {reason}", file=sys.stderr)
    return 1 if reasons else 0

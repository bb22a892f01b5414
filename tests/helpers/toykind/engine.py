"""The toy kind's engine: its track, the scoring of an outputs folder, its run files, its `RunKind` (load,
validate, compare with the exact sign test, Holm over a call's tests), its paper table, its page and its
`pstbench score`. Written against the kit's public layers only (core, the frame, the option table)."""

from __future__ import annotations

import hashlib
import html
import math
from dataclasses import dataclass
from pathlib import Path

from helpers.toykind.kind import KIND
from pytest_pstbench.core.compare import check_runs_comparable, checked_runs, run_pairs
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import dumps_json, write_files
from pytest_pstbench.core.kinds import RunKind
from pytest_pstbench.core.store.folder import (
    ItemResult,
    RunFolder,
    RunRecord,
    read_item_csv,
    read_run_folder,
    write_run_files,
)

PROTOCOL = Path(__file__).with_name("toy.yaml")
#: The demo track, generated here: item id -> the expected answer.
DEMO_ITEMS = {f"q{i:02d}": i * 7 % 10 for i in range(1, 13)}


def validate_protocol(path, data) -> None:
    alpha = data.get("alpha")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise UserError(f"{path}: alpha is {alpha!r}, not a number in (0, 1); fix: give e.g. alpha: 0.05")


def load_protocol(spec=None):
    from pytest_pstbench.core.protocol import load_protocol as load

    return load(spec or PROTOCOL)


# ---- the track ----------------------------------------------------------------------------------------------
@dataclass
class ToyTrack:
    id: str
    manifest: Path | None
    items: dict[str, int]
    revision: str = "1"


def resolve_track(spec: str) -> ToyTrack:
    if spec == "toy-demo":
        return ToyTrack("toy-demo", None, dict(DEMO_ITEMS))
    from pytest_pstbench.core.files.yamlfile import read_yaml
    from pytest_pstbench.core.kinds import manifest_path

    path = manifest_path(spec)
    if path is None:
        raise UserError(f"--track {spec}: no toy track there; fix: give toy-demo or a track.yaml with kind: toy")
    data = read_yaml(path, "toy track")
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, dict) or not all(isinstance(v, int) for v in items.values()):
        raise UserError(f"{path}: items must map each item id to a whole number; fix: e.g. items: {{a: 3}}")
    return ToyTrack(str(data.get("id", path.parent.name)), path, {str(k): v for k, v in items.items()})


# ---- scoring --------------------------------------------------------------------------------------------------
@dataclass
class ItemScore(ItemResult):
    ID_FIELD = "item"
    VALUE_FIELD = "correct"

    item: str
    correct: int | None
    error: str | None = None


def score_item(track: ToyTrack, outputs: Path, item: str) -> ItemScore:
    path = Path(outputs) / f"{item}.txt"
    try:
        value = int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return ItemScore(item, None, f"{path}: no whole number there; fix: write one <item>.txt answer per item")
    return ItemScore(item, int(value == track.items[item]))


@dataclass
class Outcome:
    run_dir: Path
    run: dict
    summary: dict

    @property
    def complete(self) -> bool:
        return self.run["complete"]


class ToySession:
    """A run being scored: the results gathered (from the CLI's loop or the pytest items), then its files."""

    def __init__(self, track: ToyTrack, protocol, name: str, results_dir: Path, command: str | None = None):
        self.track, self.protocol, self.name, self.results_dir, self.command = (
            track,
            protocol,
            name,
            results_dir,
            command,
        )
        self.results: dict[str, ItemScore] = {}
        self.baselines = None
        self.computed_in = None

    def add(self, result: ItemScore) -> None:
        self.results[result.item_id] = result

    def environment(self) -> dict:
        from pytest_pstbench.core.environment import environment

        return environment(())

    def finish(self) -> Outcome:
        ids = [i for i in self.track.items if i in self.results]
        ok = [self.results[i] for i in ids if self.results[i].ok]
        per_item = "item_id,correct,error\n" + "".join(
            f"{i},{'' if self.results[i].correct is None else self.results[i].correct},"
            f"{'x' if self.results[i].error else ''}\n"
            for i in ids
        )
        accuracy = sum(r.correct for r in ok) / len(ok) if ok else None
        complete = len(ok) == len(self.track.items)
        summary = {"name": self.name, "track": self.track.id, "n": len(ok), "accuracy": accuracy}
        run = {
            "format": 1,
            "kind": KIND.name,
            "name": self.name,
            "track": self.track.id,
            "protocol": {
                "id": self.protocol.id,
                "sha256": self.protocol.sha256,
                "path": str(self.protocol.path),
            },
            "dataset": {"id": self.track.id, "revision": self.track.revision},
            "complete": complete,
            "n_scored": len(ok),
            KIND.n_key: len(self.track.items),
            "failures": [{"item": i, "message": self.results[i].error} for i in ids if self.results[i].error],
            "environment": self.environment(),
            "command": self.command,
        }
        run_dir = Path(self.results_dir) / self.track.id / self.name
        files = {KIND.item_file: per_item, "summary.json": dumps_json(summary), "run.json": dumps_json(run)}
        write_run_files(run_dir, files, run)
        return Outcome(run_dir, run, summary)


def cmd_score(args) -> int:
    """`pstbench score --track T --outputs DIR ...` of a toy track."""
    track = resolve_track(args.track)
    protocol = load_protocol(args.protocol)
    code = 0
    for outputs in args.outputs or ():
        session = ToySession(track, protocol, args.name or Path(outputs).name, Path(args.results), args.command_line)
        for item in track.items:
            session.add(score_item(track, Path(outputs), item))
        outcome = session.finish()
        print(f"{session.name}: accuracy {outcome.summary['accuracy']} on {len(track.items)} items of {track.id}")
        print(f"run files: {outcome.run_dir}")
        code = max(code, 0 if outcome.complete else 1)
    return code


def add_commands(sub) -> None:
    """The kind's own command: `pstbench toy-items --track T`."""
    p = sub.add_parser("toy-items", help="toy tracks: list a track's items and their expected answers")
    p.add_argument("--track", default="toy-demo")

    def run(args) -> int:
        for item, value in resolve_track(args.track).items.items():
            print(f"{item} {value}")
        return 0

    p.set_defaults(func=run)


# ---- run folders, comparison ----------------------------------------------------------------------------------
@dataclass
class ToyRunFiles(RunFolder):
    item_ids: list[str]
    rows: dict[str, dict[str, str]]
    record: RunRecord | None = None


def load_run(path) -> ToyRunFiles:
    path = Path(path)
    summary, record = read_run_folder(path, KIND.run_files, "toy run")
    rows = read_item_csv(path / KIND.item_file, "item_id", "item")
    return ToyRunFiles(path, summary, record.data, list(rows), rows, record)


def validate(run: ToyRunFiles, protocol) -> None:
    """The summary's accuracy is what per_item.csv gives (a run's own claims are never trusted)."""
    values = [int(r["correct"]) for r in run.rows.values() if r.get("correct") in ("0", "1")]
    want = sum(values) / len(values) if values else None
    if run.summary.get("accuracy") != want or run.run.get("n_scored") != len(values):
        raise UserError(
            f"{run.path / 'summary.json'}: accuracy {run.summary.get('accuracy')!r} is not what per_item.csv gives "
            f"({want!r}); fix: score that run again"
        )


def check_comparable(runs) -> None:
    check_runs_comparable(runs, unit="items", n_key=KIND.n_key, ids_file=KIND.item_file, ids=lambda r: r.item_ids)


def sign_test(b: int, c: int) -> float:
    """Two-sided exact sign test of b successes among b + c discordant items (p = 1/2), by hand."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


@dataclass
class SignRow:
    baseline: str
    candidate: str
    n: int
    b: int  # candidate right, baseline wrong
    c: int  # candidate wrong, baseline right
    diff: float
    pvalue: float
    metric: str = "accuracy"
    p_holm: float = 1.0
    verdict: str = "no significant difference"


@dataclass
class ToyComparison:
    rows: list[SignRow]
    alpha: float
    protocol: str

    @property
    def worse(self) -> list[SignRow]:
        return [r for r in self.rows if r.verdict == "worse"]

    def to_json(self) -> dict:
        from dataclasses import asdict

        return {
            "protocol": self.protocol,
            "kind": KIND.name,
            "alpha": self.alpha,
            "tests": [asdict(r) for r in self.rows],
        }


def compare_two(base: ToyRunFiles, cand: ToyRunFiles, protocol, metrics=None, margins=None) -> list[SignRow]:
    pairs = [(int(base.rows[i]["correct"]), int(cand.rows[i]["correct"])) for i in base.item_ids]
    b = sum(1 for x, y in pairs if y > x)
    c = sum(1 for x, y in pairs if y < x)
    return [SignRow(base.name, cand.name, len(pairs), b, c, (b - c) / len(pairs), sign_test(b, c))]


def finish(rows: list[SignRow], protocol) -> ToyComparison:
    alpha = protocol.data["alpha"]
    running = 0.0
    for i, r in enumerate(sorted(rows, key=lambda r: r.pvalue)):  # Holm's step-down
        running = max(running, min(1.0, (len(rows) - i) * r.pvalue))
        r.p_holm = running
        if running < alpha:
            r.verdict = "worse" if r.diff < 0 else "better"
    return ToyComparison(rows, alpha, protocol.id)


def compare_paths(paths, *, protocol_spec=None, against_first=False, metrics=None, margins=None):
    runs = [load_run(p) for p in paths]
    protocol = checked_runs(TOY_RUNS, runs, protocol_spec=protocol_spec, comparable=True)
    rows = [row for a, b in run_pairs(runs, against_first) for row in compare_two(a, b, protocol)]
    return finish(rows, protocol), protocol, runs


def compare_text(comp: ToyComparison, runs, protocol) -> str:
    return "\n".join(
        f"{r.candidate} vs {r.baseline}: accuracy {r.diff:+.3f} over {r.n} items, sign test p={r.pvalue:.4g}, "
        f"Holm p={r.p_holm:.4g}: {r.verdict}"
        for r in comp.rows
    )


def check_margins(option: str, drop: str) -> None:
    raise UserError(f"{option}: toy runs have no margins; fix: drop {drop}")


TOY_RUNS = RunKind(
    name=KIND.name,
    run_files=KIND.run_files,
    load=load_run,
    check_comparable=check_comparable,
    compare_two=compare_two,
    finish=finish,
    worse_reason=lambda row, comp, protocol: f"{row.candidate} is worse than {row.baseline} (Holm p={row.p_holm:.3g})",
    compare_paths=compare_paths,
    compare_text=compare_text,
    check_margins=check_margins,
    validate=validate,
    item_file=KIND.item_file,
    smallest_pvalue=lambda row, protocol: sign_test(row.n, 0),
    unit=KIND.unit,
)


# ---- table, page, ls ------------------------------------------------------------------------------------------
def paper_table(paths, *, metrics=None, against="best", protocol_spec=None):
    from pytest_pstbench.core.paper_table import Cell, Column, Table

    runs = [load_run(p) for p in paths]
    protocol = checked_runs(TOY_RUNS, runs, protocol_spec=protocol_spec)
    values = {r.name: r.summary["accuracy"] for r in runs}
    order = sorted(values, key=lambda n: -values[n])
    cells = {
        n: Cell(v, None, None, None, f"{v:.3f}", rank=(order.index(n) + 1 if order.index(n) < 2 else None))
        for n, v in values.items()
    }
    track = runs[0].record.track
    column = Column(track, "accuracy", None, "Accuracy↑", True, None, False, cells)
    return Table(
        kind=KIND.name,
        rows=list(values),
        reference_row="",
        tracks=[{"track": track, "protocol": protocol.id, "dataset_revision": "1", "n": len(runs[0].item_ids)}],
        columns=[column],
        alpha=protocol.data["alpha"],
        against=against,
        n_tests=0,
        test_name="sign test",
        values_note="accuracy over the items",
    )


def metric_table(data) -> tuple[list[list], list[str]]:
    return [["accuracy", "1 when the answer is the expected number"]], ["metric", "what"]


def html_report(request) -> Path:
    runs = [load_run(s.path) for s in request.sources]
    rows = "".join(f"<tr><td>{html.escape(r.name)}</td><td>{r.summary['accuracy']}</td></tr>" for r in runs)
    page = f"<!doctype html><meta name=generator content='{request.generator}'><table>{rows}</table>\n"
    write_files(request.out, {"index.html": page}, what="the toy page")
    return request.out


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()

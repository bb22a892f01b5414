"""The public Python API: score outputs on a track, compare runs, load a run, read images and compute
single metrics exactly as the protocol does. Re-exported by `pytest_pstbench` (lazily: `import
pytest_pstbench` imports neither numpy nor torch; they load on the first call that needs them).

    import pytest_pstbench as pst

    run = pst.score("demo", "results/demo/reinhard/outputs")      # a folder, "identity", or {pair id: array}
    run.summary["metrics"]["psnr"]["mean"]
    pst.compare(baseline="results/demo/identity", candidate=run.run_dir, margins={"lpips": 0.01}).worse
    pst.load_run("results/demo/reinhard").scores["demo-01"]["ssim"]
    pst.metric("ssim")(output, reference)                          # one metric under the protocol
    pst.vab_study("annotations.csv")["reproducibility"]["best"]     # the ranking-vs-scoring study

Modelled after lm-eval's `simple_evaluate` (one call: inputs in, the run's results out) and pyiqa's
`create_metric` (a metric object built from a name, called on images). A thin facade: `score` builds
its run as the CLI (`pstbench score`) and the pytest plugin do (`paired.request.open_scoring`) and
scores folders and in-memory arrays alike with the planner (`paired.planner.score_run`); `compare`'s
margins take the one margin path (`core.gate.margins_to_apply`). The numbers and run files are the
same, byte for byte.

Bad input raises `pytest_pstbench.UserError` with the one-line message the CLI prints.
Standard library only at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_pstbench.core.errors import UserError

__all__ = [
    "score",
    "compare",
    "load_run",
    "metric",
    "metric_names",
    "load_image",
    "load_pair",
    "track",
    "protocol",
    "vab_study",
    "Metric",
    "PairImages",
    "UserError",
]


def _load_protocol(spec):
    if hasattr(spec, "metric_names"):  # already loaded
        return spec
    from pytest_pstbench.core.protocol import load_protocol

    return load_protocol(None if spec is None else str(spec))


def protocol(spec: str | Path | None = None):
    """The loaded protocol (`core.protocol.Protocol`): an id of `protocols/` (default `pstbench`) or a YAML path."""
    return _load_protocol(spec)


def track(spec: str | Path):
    """A track by id (`demo`, `pst50-paired`, ...; a remote one must be fetched first) or a `track.yaml`
    path: `.pairs` (each with `.id`, `.content`, `.style`, `.reference` paths) and `.pair_ids`."""
    from pytest_pstbench.paired.tracks import resolve_track

    return resolve_track(str(spec))


def score(
    track: str | Path,
    outputs: str | Path | Mapping[str, Any] | Callable[[Any], Any],
    *,
    name: str | None = None,
    results: str | Path = "results",
    protocol: str | Path | None = None,
    device: str = "cpu",
    use_cache: bool = True,
    allow_resize: bool = False,
    method_info: Mapping[str, Any] | None = None,
    workers: int | None = None,
):
    """Score a method's outputs on a track and write the run files to `results/<track>/<name>/`.

    `outputs`: an outputs folder (one `<pair_id>.png` per pair), `"identity"` (the track's content
    images), a mapping {pair id: uint8 HxWx3 RGB array or PNG path}, or a function called with each
    `Pair` that returns one. `name` defaults as `pstbench score --name` does (method.yaml's `method`,
    else the folder's name); arrays need a `name`. Returns the run's outcome (`paired.session.RunOutcome`):
    `.run_dir`, `.summary` (summary.json), `.run` (run.json) and `.complete` (every pair scored; the
    failures are in `.run["failures"]`)."""
    from pytest_pstbench.paired.request import ScoreRequest, open_scoring

    in_memory = not isinstance(outputs, (str, Path))
    if in_memory and name is None:
        raise UserError(
            "score(outputs=<arrays>): a run of arrays has no folder to be named after; "
            "fix: pass name=, e.g. score(track, outputs, name='my-method')"
        )
    scoring = open_scoring(
        ScoreRequest(
            track=str(track),
            outputs=None if in_memory else str(outputs),
            name=name,
            results=Path(results),
            protocol=None if protocol is None else str(protocol),
            allow_resize=allow_resize,
            device=device,
            use_cache=use_cache,
            command="pytest_pstbench.score(...)",
        )
    )
    scoring.session.method_info.update(dict(method_info or {}))  # merged over method.yaml, as --method-info
    from pytest_pstbench.paired.planner import score_run

    return score_run(scoring.session, outputs if in_memory else scoring.outputs, workers=workers)


def compare(
    *runs: str | Path,
    baseline: str | Path | None = None,
    candidate: str | Path | None = None,
    metrics: list[str] | None = None,
    margins: Mapping[str, float] | None = None,
):
    """The tests of `pstbench compare BASELINE CANDIDATE` (paired Wilcoxon with Holm correction; exact
    McNemar for selection runs) -> a Comparison: `.rows` (one per metric: verdict, mean diff, p values),
    `.worse` (the tests significantly worse than the baseline, beyond the margin where one is given),
    `.better`, `.to_json()`. `margins`: {metric: delta} non-inferiority margins in metrics.csv units,
    as `pstbench compare --margin` (paired runs only). Either run may be a published run
    (`hf://datasets/OWNER/NAME@REVISION/PATH`, one run folder): pulled into the cache and verified first.

    Name the runs by keyword: `compare(baseline=B, candidate=C)`. A positional run takes the role the keywords
    leave open (`compare(C, baseline=B)`, the old order, still works: it reads one way only). Two positional
    runs read both ways (this function took `candidate, baseline`; the command takes BASELINE CANDIDATE) and
    are refused unless they are the same run."""
    baseline, candidate = _compare_roles(runs, baseline, candidate)
    from pytest_pstbench.core.kinds import kind_of_runs
    from pytest_pstbench.core.store.backends import run_paths

    baseline, candidate = (
        run_paths([r], option=opt, one=True)[0] for r, opt in ((baseline, "baseline"), (candidate, "candidate"))
    )
    kind = kind_of_runs([baseline, candidate])
    if margins:
        kind.check_margins("compare(margins=...)", "margins")  # a kind without margins refuses them
        from pytest_pstbench.core.compare import protocol_for
        from pytest_pstbench.core.gate import margins_to_apply

        proto = protocol_for([kind.load(p) for p in (baseline, candidate)])
        margins = margins_to_apply(dict(margins), proto, option="compare(margins=...)", tested=metrics)
    return kind.compare_paths([baseline, candidate], metrics=metrics, margins=margins or None)[0]


def _compare_roles(runs: tuple, baseline, candidate) -> tuple:
    """(baseline, candidate) from `compare`'s arguments, by the rule its docstring states (docs/api.md)."""
    from pytest_pstbench.core.errors import UserError

    fix = (
        "fix: name them, pst.compare(baseline=..., candidate=...) (the order of `pstbench compare BASELINE CANDIDATE`)"
    )
    open_roles = [role for role, v in (("candidate", candidate), ("baseline", baseline)) if v is None]
    if len(runs) > len(open_roles):
        raise UserError(f"pst.compare: {len(runs)} positional runs but {len(open_roles)} role(s) left open; {fix}")
    if len(runs) == 2:
        if Path(str(runs[0])).resolve() != Path(str(runs[1])).resolve():
            raise UserError(
                f"pst.compare({runs[0]}, {runs[1]}): two positional runs read both ways (this API took candidate, "
                f"baseline; the command takes BASELINE CANDIDATE); {fix}"
            )
        return runs[0], runs[1]
    roles = dict(zip(open_roles, runs))
    baseline, candidate = roles.get("baseline", baseline), roles.get("candidate", candidate)
    if baseline is None or candidate is None:
        raise UserError(f"pst.compare: needs a baseline and a candidate run; {fix}")
    return baseline, candidate


def load_run(run_dir: str | Path, protocol: str | Path | None = None):
    """A run folder read back and checked: `.summary`, `.run` (run.json), `.scores` ({pair or task id:
    {metric: value}}), `.complete`, `.name`. Paired and selection runs. Read as `pstbench compare` and
    `pstbench table` read it (core.store.reader.read_runs): its files must agree with each other and with the
    protocol it was made under (found by its sha256; `protocol`: that file's path or id). `run_dir` may be
    a published run (`hf://datasets/OWNER/NAME@REVISION/PATH`): pulled into the cache and verified first."""
    from pytest_pstbench.core.store.backends import run_paths
    from pytest_pstbench.core.store.reader import read_runs

    spec = None if protocol is None else str(protocol)
    return read_runs(run_paths([run_dir], option="load_run", protocol_spec=spec, one=True), protocol_spec=spec)[1][0]


@dataclass
class Metric:
    """One metric of a protocol, with the protocol's parameters: `metric(output, other) -> float`, where
    `other` is the reference or the style image (`.against`) and both are uint8 HxWx3 RGB arrays of one
    size (read them with `load_image` / `load_pair`; the protocol's evaluation resolution is applied by
    `score`, not here)."""

    name: str
    against: str  # "reference" or "style"
    higher_is_better: bool
    params: dict
    device: str = "cpu"

    def __post_init__(self):
        self._computer = None

    def __call__(self, output, other) -> float:
        import numpy as np

        if self._computer is None:
            from pytest_pstbench.paired.engine import metric_computer

            self._computer = metric_computer(self.device)
        arrays = []
        for what, a in (("output", output), (self.against, other)):
            a = np.asarray(a)
            if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
                raise UserError(
                    f"metric {self.name}: the {what} is {a.dtype} {a.shape}, not a uint8 HxWx3 RGB array; "
                    "fix: read images with pytest_pstbench.load_image (or convert with np.clip(np.rint(x), 0, 255).astype(np.uint8))"
                )
            arrays.append(np.ascontiguousarray(a))
        if arrays[0].shape != arrays[1].shape:
            raise UserError(
                f"metric {self.name}: output {arrays[0].shape} and {self.against} {arrays[1].shape} differ in "
                "size; fix: give images of one size (score() applies the protocol's resolution rules)"
            )
        return float(self._computer.value(self.params, arrays[0], arrays[1]))


def metric_names(protocol: str | Path | None = None) -> list[str]:
    """The metrics of a protocol (default `pstbench`), in its order."""
    return list(_load_protocol(protocol).metric_names)


def metric(name: str, protocol: str | Path | None = None, device: str = "cpu") -> Metric:
    """The per-image metric `name` of a protocol (default `pstbench`), with that protocol's parameters
    (e.g. SSIM's window, CIEDE2000's white point, LPIPS's net): a callable `(output, other) -> float`."""
    proto = _load_protocol(protocol)
    if name not in proto.metrics:
        raise UserError(
            f"metric {name!r}: not a metric of protocol {proto.id} ({proto.path}); "
            f"fix: use one of {', '.join(proto.metric_names)}"
        )
    params = dict(proto.metrics[name])
    return Metric(
        name=name,
        against=params["against"],
        higher_is_better=bool(params.get("higher_is_better", True)),
        params=params,
        device=device,
    )


def load_image(path: str | Path, protocol: str | Path | None = None, role: str = "dataset"):
    """An image as the protocol reads it -> uint8 HxWx3 RGB array. `role="dataset"` (default): a content,
    style or reference image under the dataset rules (EXIF orientation applied, ICC profiles converted
    to sRGB, the decoders the protocol allows); `role="output"`: a method output under the output rules
    (PNG, 8-bit RGB)."""
    from pytest_pstbench.paired.imageio import load_dataset_image
    from pytest_pstbench.paired.imageio import load_image as load_output

    proto = _load_protocol(protocol)
    if role == "output":
        return load_output(Path(path), proto, role="output").array
    return load_dataset_image(Path(path), proto, role=role).array


@dataclass(frozen=True)
class PairImages:
    """A pair's images as the protocol reads them (uint8 HxWx3 RGB arrays)."""

    content: Any
    style: Any
    reference: Any

    @property
    def inputs(self) -> tuple:
        """(content, style): what a style transfer method is given."""
        return self.content, self.style


def load_pair(pair, protocol: str | Path | None = None) -> PairImages:
    """The content, style and reference images of a `Pair` (from `track(...).pairs` or the
    `pstbench_pair` fixture), read exactly as the scorer reads them (`paired.imageio.load_dataset_image`:
    EXIF orientation, ICC to sRGB), not with `Image.open().convert("RGB")`."""
    from pytest_pstbench.paired.imageio import load_dataset_image

    proto = _load_protocol(protocol)
    read = {
        role: load_dataset_image(Path(getattr(pair, role)), proto, role=f"{role} of {pair.id}").array
        for role in ("content", "style", "reference")
    }
    return PairImages(**read)


def vab_study(
    annotations: str | Path,
    *,
    majority: int | None = None,
    max_w: float | None = None,
    protocol: str | Path | None = None,
    out: str | Path | None = None,
) -> dict:
    """The ranking-vs-scoring protocol study of `pstbench vab study ANNOTATIONS.csv` (same code, same
    numbers) -> the dict written as study.json: `fidelity`, `reproducibility`, `distinguishability`,
    `kendall_w`, `per_task`, ... `majority`: votes a label needs (default a strict majority of each
    task's annotators); `max_w`: drop tasks whose Kendall's W of the score rankings is >= it; `protocol`:
    the selection protocol whose bootstrap is used (default vab); `out`: also write study.json and
    study.csv into that folder."""
    from pytest_pstbench.selection.study import run_study, write_study

    result = run_study(
        Path(annotations),
        protocol=None if protocol is None else str(protocol),
        majority=majority,
        max_w=max_w,
        names={"majority": "vab_study(majority={})", "max_w": "vab_study(max_w={})"},
    )
    if out is not None:
        write_study(result, Path(out))
    return result

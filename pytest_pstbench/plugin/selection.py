"""The pytest side of a selection run (`--pstbench-track vab-demo` or a selection manifest).

A `pytest_pstbench.plugin.frame.TrackRun` (registered by `pytest_pstbench.plugin` as plugin
`pstbench-run` when the track is a selection track). One test item per task; the judge is, in this order of precedence:

* `--pstbench-answers FILE` (JSON Lines answers; parsed once at start-up, file errors are usage errors),
* `--pstbench-model NAME --pstbench-api-base URL` (ask the model first, as `pstbench vab run`, into the
  answers file; the controller alone asks, xdist workers read the finished file),
* `--pstbench-judge module:function` or `path/to/file.py:function` (a scoring function),
* a `pstbench_judge` fixture defined in a conftest.py at the rootdir (returns the scoring function).

An item passes when its task was scored, whatever the judge answered (accuracy is a run-level
result: the terminal summary's tables and the run files); it fails only when the task could not be
scored (the judge raised, returned a non-number, or a candidate image is unreadable).

With `--pstbench-baseline RUN_DIR` (repeatable; `--pstbench-gate-metrics top1,tb1` to restrict) the
finished run is compared with each baseline by exact McNemar tests (`selection.compare`, Holm over
all tests) and the session fails when it is significantly worse on a gated metric. With
`--pstbench-min` / `--pstbench-max METRIC.AGGREGATION=VALUE` (e.g. `tb1.pass^3=0.3`, the names of
summary.json's overall cell) it also fails when an overall mean is below / above its bound.

Per-task results travel in the reports' `user_properties` (key `pstbench_selection_result`), so
under pytest-xdist the controller alone aggregates and writes the run files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.options import option_value
from pytest_pstbench.plugin.config import (
    as_on_controller,
    baseline_paths,
    controller_dir,
    from_cli,
    given,
    ini_base,
    is_worker,
    key_values,
    path_value,
    recorded_command,
    track_value,
)
from pytest_pstbench.plugin.frame import ItemFailure, TrackRun, record_result

RESULT_KEY = "pstbench_selection_result"
FIXTURE_NAME = "pstbench_judge"
# Options of paired runs that a selection run refuses (option dest suffix -> why).
_UNSUPPORTED = {
    "outputs": "a selection track is scored from --pstbench-answers or --pstbench-judge",
    "gate_margin": "margins are implemented for the paired Wilcoxon gate, not for McNemar tests of judges",
}


def _gate_options(config, protocol) -> dict:
    """Baseline runs (`--pstbench-baseline`, relative to the current folder; ini lines relative to the
    ini file's folder), the gated metrics (`--pstbench-gate-metrics`, checked against the protocol) and
    the bounds on overall means (`--pstbench-min/max METRIC.AGGREGATION=VALUE`)."""
    from pytest_pstbench.core.gate import parse_metrics
    from pytest_pstbench.selection.compare import parse_selection_bounds

    return {
        "baselines": baseline_paths(config),
        "metrics": parse_metrics(option_value(config, "gate-metrics"), protocol),
        "mins": key_values(config, "min", lambda items: parse_selection_bounds(items, "min", protocol)),
        "maxs": key_values(config, "max", lambda items: parse_selection_bounds(items, "max", protocol)),
    }


def conftest_defines_judge(config) -> bool:
    """A conftest.py at the rootdir (or above it) defines `pstbench_judge`."""
    root = Path(str(config.rootpath)).resolve()
    for plugin in config.pluginmanager.get_plugins():
        f = getattr(plugin, "__file__", None)
        if not f or os.path.basename(f) != "conftest.py" or not hasattr(plugin, FIXTURE_NAME):
            continue
        folder = Path(f).resolve().parent
        if folder == root or folder in root.parents:
            return True
    return False


def _task_call_plain():
    """Test function of a task item when the judge is an answers file or --pstbench-judge."""


def _task_call_fixture(pstbench_judge):
    """Test function of a task item when the judge is the `pstbench_judge` fixture."""


class TaskItem(pytest.Function):
    """One task of a selection track. The scoring happens in `runtest`; the function body is empty."""

    def __init__(self, *, task=None, run=None, **kwargs):
        super().__init__(**kwargs)
        self.task = task
        self.run = run
        self.add_marker("pstbench")

    def runtest(self) -> None:
        judge_fn = self.funcargs.get(FIXTURE_NAME) if FIXTURE_NAME in self.fixturenames else None
        record_result(self, self.run, self.run.score(self.task, judge_fn))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, (ItemFailure, UserError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"pstbench {self.run.track.id}::{self.task.id}"


def _run_model(config, track, protocol, params, model: str, answers_path):
    """--pstbench-model: ask the model (the controller only; xdist workers read the finished file)."""
    from pytest_pstbench.selection.ask.model_run import ask_model
    from pytest_pstbench.selection.ask.settings import ModelOptions, run_settings
    from pytest_pstbench.selection.run_judge import model_run_name

    api_base = option_value(config, "api-base")
    if not api_base:
        raise UserError(
            "--pstbench-model needs --pstbench-api-base URL (an OpenAI-compatible endpoint); fix: give both"
        )
    given = {"concurrency": option_value(config, "concurrency"), "api_key_env": option_value(config, "api-key-env")}
    options = ModelOptions(  # an option not given (nor in the ini file) keeps `vab run`'s default
        model,
        str(api_base),
        max_concurrency=option_value(config, "max-concurrency"),
        header=tuple(option_value(config, "header") or ()),
        extra_body=tuple(option_value(config, "extra-body") or ()),
        **{k: str(v) if k == "api_key_env" else v for k, v in given.items() if v},
    )
    settings = run_settings(options, params, option_prefix="pstbench-")  # checked as `pstbench vab run` checks them
    if answers_path is None:
        name = str(option_value(config, "name") or model_run_name(model))
        answers_path = (path_value(config, "results") or Path("results")) / track.id / f"{name}.answers.jsonl"
    model_api = settings.provenance()
    if not is_worker(config):
        asked = ask_model(track, protocol, settings, answers_path)
        if asked.pacing is not None:  # --pstbench-concurrency auto: the limit over time, as `vab run` records it
            model_api["pacing"] = asked.pacing
    return model_api, answers_path


def _chosen_judge(config, track, protocol, params):
    """The run's judge (--pstbench-answers, --pstbench-model, --pstbench-judge or the pstbench_judge fixture), and
    the votes and human row (read before a model is asked)."""
    from pytest_pstbench.selection.run_judge import RunJudge, answers_judge, function_judge
    from pytest_pstbench.selection.session import votes_and_human

    answers_path = path_value(config, "answers")
    judge_spec = option_value(config, "judge")
    model = option_value(config, "model")
    if answers_path is not None and judge_spec:
        raise UserError("--pstbench-answers and --pstbench-judge: give one judge, not both")
    model_api = None
    asked = [f"--pstbench-{o}" for o in ("header", "extra-body") if option_value(config, o)]
    if asked and not model:
        raise UserError(
            f"{' and '.join(asked)}: sent with the requests of --pstbench-model only; fix: give "
            "--pstbench-model NAME --pstbench-api-base URL, or drop the option"
        )
    votes, human = votes_and_human(track, params, path_value(config, "votes"))  # before a model is asked
    if model:
        if judge_spec:
            raise UserError("--pstbench-model and --pstbench-judge: give one judge, not both")
        model_api, answers_path = _run_model(config, track, protocol, params, str(model), answers_path)
    if answers_path is not None:  # with --pstbench-model: the model's answers, named after the model
        chosen = answers_judge(answers_path, track, params, model=str(model) if model else None, model_api=model_api)
    elif judge_spec:
        base = (
            (controller_dir(config) or config.invocation_params.dir) if from_cli(config, "judge") else ini_base(config)
        )
        chosen = function_judge(str(judge_spec), Path(base), params, device=_device(config))
    else:  # the pstbench_judge fixture, if the rootdir's conftest.py defines one
        chosen = RunJudge(None, None, {"kind": "fixture", "fixture": FIXTURE_NAME}, "pytest", f"fixture {FIXTURE_NAME}")
    return chosen, votes, human


_UNSET = object()  # no fixture value seen yet


def _device(config) -> str:
    return str(option_value(config, "device") or "cpu")


class SelectionRun(TrackRun):
    """A selection track's run: one item per task, scored by the judge."""

    result_key = RESULT_KEY
    noun = "task"

    def __init__(
        self,
        config,
        track,
        protocol,
        params,
        session,
        *,
        answer_set=None,
        judge=None,
        judge_label=None,
        gate_options=None,
    ):
        super().__init__(config, track, protocol, session, gate_options)
        self.params = params
        self.answer_set = answer_set
        self.judge = judge
        self.judge_label = judge_label
        self.mode = "answers" if answer_set is not None else "judge" if judge is not None else None
        self._fixture_judge = None
        self._fixture_value = _UNSET

    @classmethod
    def from_config(cls, config: pytest.Config) -> SelectionRun:
        from pytest_pstbench.core.protocol import load_protocol
        from pytest_pstbench.core.store.names import refuse_baseline_is_run_dir
        from pytest_pstbench.plugin.verdict import refuse_summary_over_inputs
        from pytest_pstbench.selection.protocol import DEFAULT_SELECTION_PROTOCOL, SelectionParams
        from pytest_pstbench.selection.session import SelectionSession
        from pytest_pstbench.selection.tracks import resolve_selection_track

        try:
            for opt, why in _UNSUPPORTED.items():
                if given(config, f"pstbench_{opt}"):
                    raise UserError(
                        f"--pstbench-{opt.replace('_', '-')}: not supported for selection tracks ({why}); fix: drop the option"
                    )
            protocol = load_protocol(
                as_on_controller(config, option_value(config, "protocol")) or DEFAULT_SELECTION_PROTOCOL
            )
            params = SelectionParams.of(protocol)
            track = resolve_selection_track(track_value(config))
            chosen, votes, human = _chosen_judge(config, track, protocol, params)
            session = SelectionSession(
                track,
                protocol,
                name=str(option_value(config, "name") or chosen.default_name),
                results_dir=path_value(config, "results") or Path("results"),
                judge=chosen.provenance,
                command=recorded_command(config),
                votes=votes,
                human=human,
            )
            gate_options = _gate_options(config, protocol)
            refuse_baseline_is_run_dir(gate_options["baselines"], session.run_dir)
            answers = getattr(chosen.answer_set, "path", None)
            refuse_summary_over_inputs(
                config,
                gate_options["baselines"],
                session.run_dir,
                track,
                protocol,
                files=[("the answers file", answers)],
            )
        except UserError as exc:
            raise pytest.UsageError(f"pstbench: {exc}") from None
        return cls(
            config,
            track,
            protocol,
            params,
            session,
            answer_set=chosen.answer_set,
            judge=chosen.judge,
            judge_label=chosen.label,
            gate_options=gate_options,
        )

    # -- items -------------------------------------------------------------------------------------
    def pair_fixture_problem(self, nodeid: str) -> str | None:
        """Why test `nodeid` cannot use the pstbench_pair fixture on this track: it has tasks, not pairs."""
        return (
            f"{nodeid}: uses pstbench_pair, but track {self.track.id} is a selection track "
            "(tasks of candidate images, not pairs); fix: use a paired track, or score this track with "
            "--pstbench-judge MODULE:FUNCTION, --pstbench-answers FILE or a pstbench_judge fixture"
        )

    def ready_to_collect(self, config) -> bool:
        if self.mode is None and conftest_defines_judge(config):
            self.mode = "fixture"
        return self.mode is not None

    def make_items(self, collector):
        func = _task_call_fixture if self.mode == "fixture" else _task_call_plain
        for task in self.track.tasks:
            yield TaskItem.from_parent(collector, name=task.id, callobj=func, task=task, run=self)

    def score(self, task, fixture_value=None):
        if self.mode == "answers":
            return self.session.score_task_from_answers(task, self.answer_set)
        judge = self.judge
        if self.mode == "fixture":
            same = self._fixture_value is fixture_value or (
                isinstance(fixture_value, str) and fixture_value == self._fixture_value
            )
            if not same:  # the judge is made once per fixture value (a pyiqa metric is created once)
                self._fixture_judge = self._judge_of_fixture(fixture_value)
                self._fixture_value = fixture_value
            judge = self._fixture_judge
        return self.session.score_task_with_judge(task, judge)

    def _judge_of_fixture(self, value):
        """The `pstbench_judge` fixture's value as a Judge: a scoring function, or a judge spec string
        (`pyiqa:NAME`, `module:function`) resolved as --pstbench-judge resolves it (a path from the rootdir)."""
        from pytest_pstbench.selection.judges import judge_from_callable
        from pytest_pstbench.selection.run_judge import function_judge

        if isinstance(value, str):
            try:
                judge = function_judge(
                    value, Path(str(self.config.rootpath)), self.params, device=_device(self.config)
                ).judge
            except UserError as exc:
                raise ItemFailure(f"fixture {FIXTURE_NAME} returned {value!r}: {exc}") from None
            judge.provenance = {**judge.provenance, "fixture": FIXTURE_NAME}
            return judge
        return judge_from_callable(
            value,
            spec=f"fixture {FIXTURE_NAME}",
            default_num_trials=int(self.params.judge["num_trials"]),
            provenance={"kind": "fixture", "fixture": FIXTURE_NAME, "module": getattr(value, "__module__", None)},
        )

    def result_from_json(self, data: dict):
        from pytest_pstbench.selection.session import TaskResult

        return TaskResult.from_json(data)

    def before_finish(self) -> None:
        if self._fixture_judge is not None:
            self.session.judge = dict(self._fixture_judge.provenance)

    # -- gate --------------------------------------------------------------------------------------
    def evaluate_gate(self):
        from pytest_pstbench.selection.gate import evaluate_selection_gate

        return evaluate_selection_gate(
            self.outcome.run_dir, self.protocol, summary=self.outcome.summary, track=self.track, **self.gate_options
        )

    def junit_verdict(self, r) -> tuple[str, str]:
        from pytest_pstbench.selection.power import mde_text

        mde = f"; mde {mde_text(r, 6)}" if r.detectable else ""  # the minimum detectable drop (selection/power.py)
        return f"{r.metric} {r.outcome}", f"{r.verdict}; b {r.b}; c {r.c}; p {r.pvalue:.4g}; p_holm {r.p_holm:.4g}{mde}"

    # -- terminal summary ----------------------------------------------------------------------------
    def not_ready_reason(self) -> str:
        return "no judge was given: no --pstbench-answers, --pstbench-judge, --pstbench-model or pstbench_judge fixture"

    def summary_problem(self) -> str | None:
        if self.mode is None:
            return (
                f"pstbench: track {self.track.id} is a selection track and no judge was given; fix: pass "
                f"--pstbench-answers FILE or --pstbench-judge MODULE:FUNCTION, or define a {FIXTURE_NAME} fixture "
                "in the rootdir conftest.py"
            )
        return None

    def write_results(self, tr) -> None:
        from pytest_pstbench.selection.tables import answers_line, header_line, human_tables, tables

        tr.write_line(header_line(self.outcome.summary, self.track.dataset_id, self.judge_label))
        for line in tables(self.outcome.summary, self.params).splitlines():
            tr.write_line(line)
        human = human_tables(self.outcome.summary, self.params)
        if human:
            tr.write_line("")
            for line in human.splitlines():
                tr.write_line(line)
        note = answers_line(self.outcome.run)
        if note:
            tr.write_line(note)

    def results_markdown(self) -> str:
        from pytest_pstbench.core.text import md_code
        from pytest_pstbench.selection.tables import header_line, human_tables, tables

        human = human_tables(self.outcome.summary, self.params, tablefmt="github")
        return (
            f"{md_code(header_line(self.outcome.summary, self.track.dataset_id, self.judge_label))}\n\n"
            + tables(self.outcome.summary, self.params, tablefmt="github")
            + (f"\n\n{human}" if human else "")
        )

    def comparison_markdown(self) -> str:
        from pytest_pstbench.selection.tables import comparison_footer, comparison_table

        return (
            f"Baseline gate (exact McNemar, Holm, alpha {self.gate.comparison.alpha}):\n\n"
            + comparison_table(self.gate.comparison, self.params, tablefmt="github")
            + "\n\n"
            + comparison_footer(self.gate.comparison)
        )

    def write_gate_comparison(self, tr) -> None:
        from pytest_pstbench.selection.tables import comparison_footer, comparison_table

        tr.write_line(f"baseline gate (exact McNemar, Holm, alpha {self.gate.comparison.alpha}):")
        for line in comparison_table(self.gate.comparison, self.params).splitlines():
            tr.write_line(line)
        tr.write_line(comparison_footer(self.gate.comparison))

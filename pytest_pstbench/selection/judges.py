"""Scoring-function judges: `f(image) -> float`, higher = better (reward-model style).

A judge is named `package.module:function` (imported) or `path/to/file.py:function` (loaded from
the file; a relative path is relative to the current folder), or `pyiqa:NAME`, a no-reference pyiqa
metric (`selection.iqa`), or `vab-paper:NAME`, one of the paper's reward models scored as the paper scores it
(`selection.qalign`; this is the one place a judge spec is resolved). It receives each candidate as a
uint8 HxWx3 RGB numpy array (Pillow: EXIF orientation applied, converted to RGB; a fresh copy per
call) and returns one number. Each candidate's score is the mean of `num_trials` calls (the
protocol's `judge.num_trials`, or the function's own `num_trials` attribute); the calls run per
candidate in dataset order. A judge with a `batch` function (pyiqa) gets a task's candidates in one
call instead, a list of arrays in dataset order, and returns one number per candidate.

Answers: in each trial the best is the candidate with the highest score and the worst the one
with the lowest, both in presentation order; among equal scores the earliest presented candidate
is picked (best and worst alike). A judge that ties is therefore penalised by the permutations: its
picks follow the presentation order, which changes between trials.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError, did_you_mean
from pytest_pstbench.selection.answers import OK, answer_record, complete_derived
from pytest_pstbench.selection.permutations import orders_for


class JudgeFailure(Exception):
    """The judge could not score a task (it raised, or returned something that is not a number)."""


@dataclass
class Judge:
    fn: Callable
    spec: str
    num_trials: int
    provenance: dict = field(default_factory=dict)
    batch: Callable | None = None  # list of images (a task's candidates) -> one number each, or None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def load_judge(spec: str, *, base: Path | None = None, default_num_trials: int = 1, device: str = "cpu") -> Judge:
    """Resolve `module:function`, `path/to/file.py:function`, `pyiqa:NAME` or `vab-paper:NAME` (on `device`) into a
    Judge (user errors are one line)."""
    from pytest_pstbench.selection.iqa import is_pyiqa_spec, pyiqa_scorer
    from pytest_pstbench.selection.qalign import is_paper_spec, paper_scorer

    if is_pyiqa_spec(spec) or is_paper_spec(spec):
        scorer = pyiqa_scorer if is_pyiqa_spec(spec) else paper_scorer
        batch, prov = scorer(str(spec), device=device)
        return Judge(
            lambda image: batch([image])[0],
            str(spec),
            default_num_trials,
            {**prov, "num_trials": default_num_trials},
            batch=batch,
        )
    target, sep, func_name = str(spec).rpartition(":")
    if not sep or not target or not func_name.isidentifier():
        raise UserError(
            f"--judge {spec}: expected module:function, path/to/file.py:function or pyiqa:METRIC "
            "(e.g. examples/judges/no_reference.py:sharpness, pyiqa:piqe)"
        )
    prov: dict = {"kind": "function", "spec": spec}
    is_file = target.endswith(".py") or "/" in target or "\\" in target
    module = _load_judge_file(spec, target, base, prov) if is_file else _import_judge_module(spec, target, prov)
    fn = getattr(module, func_name, None)
    if fn is None:
        known = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        raise UserError(
            f"--judge {spec}: {target} has no attribute {func_name}{did_you_mean(func_name, known)}; "
            "fix: name a function defined there"
        )
    if not callable(fn):
        raise UserError(f"--judge {spec}: {target}.{func_name} is not callable; fix: name a function f(image) -> float")
    prov["function"] = func_name
    return judge_from_callable(fn, spec=spec, default_num_trials=default_num_trials, provenance=prov)


def _load_judge_file(spec: str, target: str, base: Path | None, prov: dict):
    """The module of the judge file `target` (relative to `base` if given), loaded once per path and content;
    adds its path and sha256 to `prov`."""
    path = Path(target)
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    if not path.is_file():
        raise UserError(
            f"--judge {spec}: file {path} not found; fix: give the path of a Python file (relative to the current folder)"
        )
    path = path.resolve()
    data = path.read_bytes()
    # keyed by the path and the bytes: a file changed since it was first loaded in this process (a
    # long-lived session, the API) is loaded again, so the function run is the one its sha256 records
    key = hashlib.sha256(str(path).encode("utf-8", "surrogateescape") + b"\0" + data).hexdigest()[:16]
    mod_name = f"_pstbench_judge_{key}"
    module = sys.modules.get(mod_name)
    if module is None:
        mspec = importlib.util.spec_from_file_location(mod_name, path)
        if mspec is None or mspec.loader is None:  # pragma: no cover
            raise UserError(f"--judge {spec}: cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(mspec)
        sys.modules[mod_name] = module
        try:
            mspec.loader.exec_module(module)
        except Exception as exc:  # the user's file failed to import
            del sys.modules[mod_name]
            raise UserError(
                f"--judge {spec}: importing {path} raised {type(exc).__name__}: {_one_line(exc)}; fix the judge file"
            ) from None
    prov.update({"file": str(path), "file_sha256": hashlib.sha256(data).hexdigest()})
    return module


def _import_judge_module(spec: str, target: str, prov: dict):
    """The imported judge module `target`; adds its name (and its file and sha256, where it has one) to `prov`."""
    try:
        module = importlib.import_module(target)
    except ImportError as exc:
        raise UserError(
            f"--judge {spec}: cannot import module {target} ({type(exc).__name__}: {_one_line(exc)}); fix: install it or give a file path"
        ) from None
    except Exception as exc:
        raise UserError(
            f"--judge {spec}: importing {target} raised {type(exc).__name__}: {_one_line(exc)}; fix the judge module"
        ) from None
    prov["module"] = target
    mfile = getattr(module, "__file__", None)
    if mfile and Path(mfile).is_file():
        prov.update(
            {
                "file": str(Path(mfile).resolve()),
                "file_sha256": hashlib.sha256(Path(mfile).read_bytes()).hexdigest(),
            }
        )
    return module


def judge_from_callable(
    fn: Callable, *, spec: str, default_num_trials: int = 1, provenance: dict | None = None
) -> Judge:
    if not callable(fn):
        raise UserError(
            f"{spec}: the judge is {type(fn).__name__}, not a callable; fix: provide a function f(image) -> float"
        )
    nt = getattr(fn, "num_trials", default_num_trials)
    if isinstance(nt, bool) or not isinstance(nt, int) or nt < 1:
        raise UserError(f"{spec}: num_trials attribute {nt!r} must be a positive integer")
    prov = dict(provenance or {"kind": "callable", "spec": spec})
    prov.setdefault("qualname", getattr(fn, "__qualname__", type(fn).__name__))
    prov["num_trials"] = nt
    return Judge(fn, spec, nt, prov)


def load_rgb(path: Path):
    """A candidate as the judge sees it: uint8 HxWx3 RGB (EXIF orientation applied)."""
    import numpy as np
    from PIL import Image, ImageOps, UnidentifiedImageError

    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.files.images import check_header_size, exif_orientation

    where = f"{path} (candidate)"
    try:
        with open(path, "rb") as fh:  # the size in a PNG header, before Pillow parses anything
            head = fh.read(33)
        if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
            check_header_size(where, int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"))
        with Image.open(path) as im:
            check_header_size(where, *im.size)  # any format: the size from its header, nothing decoded yet
            n_frames = getattr(im, "n_frames", 1)
            if getattr(im, "is_animated", False) or n_frames > 1:
                raise JudgeFailure(
                    f"{where}: is animated ({n_frames} frames), not one still image; fix: replace the file with one frame"
                )
            exif_orientation(im, where)  # a malformed tag is this file's error, as in scoring
            im = ImageOps.exif_transpose(im)
            return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8))
    except UserError as exc:
        raise JudgeFailure(str(exc)) from None
    except Image.DecompressionBombError as exc:
        raise JudgeFailure(
            f"{where}: refused by Pillow's decompression-bomb check ({_one_line(exc)}); fix: use a smaller image"
        ) from None
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
        raise JudgeFailure(f"{where}: cannot be read as an image ({_one_line(exc)}); fix: replace the file") from None


def _number(value, judge: Judge, task, i: int) -> float:
    """One score as a finite float (JudgeFailure otherwise). A number: int, float, or a numeric scalar (numpy,
    torch) that converts with __float__; never a string ("1.0" would parse), bytes, bool or complex number."""
    bad = (
        isinstance(value, (str, bytes, bytearray, bool)) or not hasattr(type(value), "__float__") or _is_complex(value)
    )
    try:
        v = None if bad else float(value)
    except (TypeError, ValueError):
        bad = True
    except OverflowError:  # an int (or Fraction, Decimal) beyond the float range
        raise JudgeFailure(
            f"judge {judge.spec} returned a number too large for a float for task {task.id} candidate {i}; "
            "fix: return a finite number within the float range (higher = better)"
        ) from None
    if bad:
        raise JudgeFailure(
            f"judge {judge.spec} returned {type(value).__name__} for task {task.id} candidate {i}; "
            "fix: return one number (int or float, higher = better), not a string or bool"
            + (" (nor a complex number)" if _is_complex(value) else "")
        ) from None
    if not math.isfinite(v):
        raise JudgeFailure(
            f"judge {judge.spec} returned {v} for task {task.id} candidate {i}; fix: return a finite number"
        )
    return v


def _mean(values: list[float], judge: Judge, task, i: int) -> float:
    total = 0.0
    for v in values:  # summed in call order, as always (the same bits as before)
        total += v
    mean = total / judge.num_trials
    if not math.isfinite(mean):
        raise JudgeFailure(
            f"judge {judge.spec}: the mean of its {judge.num_trials} scores for task {task.id} candidate {i} is not a "
            "finite number (the scores are too large); fix: return scores well within the float range"
        )
    return mean


def score_candidates(task, judge: Judge) -> list[float]:
    """Mean of `judge.num_trials` calls per candidate, dataset order (a batch judge: `num_trials` calls on the
    task's candidates together)."""
    if judge.batch is not None:
        return _score_batch(task, judge)
    scores = []
    for i, path in enumerate(task.candidates):
        image = load_rgb(path)
        values: list[float] = []
        for _call in range(judge.num_trials):
            try:
                value = judge.fn(image.copy())
            except Exception as exc:
                raise JudgeFailure(
                    f"judge {judge.spec} raised {type(exc).__name__}: {_one_line(exc)} (task {task.id}, candidate {i}: {path.name})"
                ) from None
            values.append(_number(value, judge, task, i))
        scores.append(_mean(values, judge, task, i))
    return scores


def _score_batch(task, judge: Judge) -> list[float]:
    images = [load_rgb(path) for path in task.candidates]
    per_candidate: list[list[float]] = [[] for _ in images]
    for _call in range(judge.num_trials):
        try:
            values = list(judge.batch([im.copy() for im in images]))
        except Exception as exc:
            raise JudgeFailure(
                f"judge {judge.spec} raised {type(exc).__name__}: {_one_line(exc)} (task {task.id})"
            ) from None
        if len(values) != len(images):
            raise JudgeFailure(
                f"judge {judge.spec} returned {len(values)} scores for the {len(images)} candidates of task {task.id}"
            )
        for i, value in enumerate(values):
            per_candidate[i].append(_number(value, judge, task, i))
    return [_mean(values, judge, task, i) for i, values in enumerate(per_candidate)]


def _is_complex(value) -> bool:
    """A complex number (Python, numpy or torch) converts to float by dropping its imaginary part: refused."""
    if isinstance(value, complex):
        return True
    dtype = getattr(value, "dtype", None)
    if getattr(dtype, "kind", None) == "c":  # numpy complex scalar or 0-d array
        return True
    is_complex = getattr(value, "is_complex", None)  # torch tensors
    try:
        return bool(is_complex()) if callable(is_complex) else False
    except Exception:  # noqa: BLE001 - a foreign object's method: not complex as far as we can tell
        return False


def pick(scores: list[float], order) -> tuple[int, int]:
    """(best, worst) as dataset indices: highest / lowest score, earliest presentation position on ties."""
    presented = [scores[i] for i in order]
    best_pos = max(range(len(presented)), key=lambda p: (presented[p], -p))
    worst_pos = min(range(len(presented)), key=lambda p: (presented[p], p))
    return order[best_pos], order[worst_pos]


def answers_from_scores(task, scores: list[float], params) -> dict[str, list[dict]]:
    """Every asked prompt type answered from the same scores, per trial."""
    picks = [pick(scores, order) for order in orders_for(task, params)]
    out: dict[str, list[dict]] = {}
    for ptype in params.prompt_types_for(task.k):
        if ptype == "pick_best":
            out[ptype] = [answer_record(b, None, OK) for b, _w in picks]
        elif ptype == "pick_worst":
            out[ptype] = [answer_record(None, w, OK) for _b, w in picks]
        else:
            out[ptype] = [answer_record(b, w, OK) for b, w in picks]
    return complete_derived(task, out, params)

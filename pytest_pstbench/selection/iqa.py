"""pyiqa metrics as scoring-function judges: `--judge pyiqa:NAME` (and a `pstbench_judge` fixture that
returns the string `"pyiqa:NAME"`).

Any no-reference metric of pyiqa (IQA-PyTorch, `pip install 'pytest-pstbench[iqa]'`) scores each
candidate alone. The metric is created once per process (`pyiqa.create_metric(NAME, device=...)`, on
`--device`), then each task's candidates go through it in batches: the candidates of one size in one
float32 NCHW batch of RGB values in [0, 1] (candidates of another size in a batch of their own; a metric
that refuses a batch, as Q-Align does (one image per call), gets them one at a time). pyiqa's
`lower_better` is honoured: a lower-is-better metric (PIQE, NIQE, BRISQUE) is negated, so that the judge
is higher = better as every judge is; run.json's judge records the metric, pyiqa's version, the device,
`lower_better` and `negated`. The scores in per_task.csv are the ranked ones (negated where so recorded).

pyiqa is imported only here, and only when a pyiqa judge is asked for. Its weights are pyiqa's business:
it downloads them into its cache folder (`pyiqa.utils.download_util.DEFAULT_CACHE_DIR`, under torch's hub
folder; models built on Hugging Face, such as Q-Align, into the Hugging Face cache) on first use; a
metric that cannot be created (no network, no weights in the cache) is one UserError naming the metric
and that folder.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import sys
from pathlib import Path

from pytest_pstbench.core.errors import UserError

PREFIX = "pyiqa:"


def is_pyiqa_spec(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def _one_line(text) -> str:
    return " ".join(str(text).split())


def cache_dir() -> str:
    """pyiqa's weights folder (its DEFAULT_CACHE_DIR; torch's hub folder + /pyiqa when pyiqa does not say)."""
    try:
        folder = importlib.import_module("pyiqa.utils.download_util").DEFAULT_CACHE_DIR
    except Exception:  # noqa: BLE001 - another pyiqa layout: torch hub's folder, as pyiqa 0.1.x uses
        import torch

        folder = str(Path(torch.hub.get_dir()) / "pyiqa")
    return str(folder)


def _import_pyiqa(spec: str):
    try:
        return importlib.import_module("pyiqa")
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        why = "pyiqa is not installed" if missing in (None, "pyiqa") else f"importing pyiqa failed ({_one_line(exc)})"
        from pytest_pstbench.core.install_hints import extra_install

        raise UserError(f"--judge {spec}: {why}; fix: {extra_install('iqa')}") from None


def _metric_names(pyiqa, mode: str | None) -> list[str]:
    return [str(n) for n in (pyiqa.list_models(metric_mode=mode) if mode else pyiqa.list_models())]


def pyiqa_scorer(spec: str, *, device: str = "cpu", metric_name: str | None = None, adapt=None):
    """`pyiqa:NAME` as (batch function, provenance): the metric created once on `device`; the batch function
    maps a list of uint8 HxWx3 RGB arrays to one score each, higher = better (`judges.load_judge` makes the
    Judge). A scorer built on a pyiqa model (`selection.qalign`) names the metric (`metric_name`) and passes
    `adapt(metric) -> (forward, provenance)`: `forward` replaces the metric's own call on each batch, and its
    provenance is added to the judge's."""
    from pytest_pstbench.metrics.kernels import check_device

    name = metric_name or spec[len(PREFIX) :]
    if not name:
        raise UserError(
            f"--judge {spec}: name a pyiqa metric after 'pyiqa:' (e.g. pyiqa:piqe, pyiqa:qalign); fix: give pyiqa:NAME"
        )
    pyiqa = _import_pyiqa(spec)
    version = str(getattr(pyiqa, "__version__", "unknown"))
    _check_no_reference(pyiqa, spec, name, version)
    try:
        device = check_device(str(device))
    except UserError as exc:
        raise UserError(f"--judge {spec}: {exc}") from None
    import torch

    metric = _create_metric(pyiqa, spec, name, version, device)
    forward, adapted = (metric, {}) if adapt is None else adapt(metric)
    lower_better = bool(getattr(metric, "lower_better", False))
    batch = _batch_scorer(forward, name, device, -1.0 if lower_better else 1.0)
    provenance = {
        "kind": "pyiqa",
        "spec": spec,
        "metric": name,
        "pyiqa_version": version,
        "torch_version": str(torch.__version__),
        "device": device,
        "lower_better": lower_better,
        "negated": lower_better,
        "score_range": getattr(metric, "score_range", None),
        "input": "RGB float32 in [0, 1], NCHW; the candidates of one size of a task in one batch (one image per call "
        "where the metric refuses the batch)",
        "weights_cache": cache_dir(),
        **adapted,
    }
    return batch, provenance


def _check_no_reference(pyiqa, spec: str, name: str, version: str) -> None:
    """`name` is one of pyiqa's no-reference metrics, or a UserError (full-reference, or unknown: close names)."""
    no_reference = _metric_names(pyiqa, "NR")
    if name not in no_reference:
        if name in _metric_names(pyiqa, None):
            raise UserError(
                f"--judge {spec}: {name} is a full-reference pyiqa metric (it compares an image with a reference image); a "
                "judge scores each candidate alone; fix: give a no-reference metric (pyiqa.list_models(metric_mode='NR'), "
                "e.g. pyiqa:piqe, pyiqa:musiq, pyiqa:qalign)"
            )
        close = difflib.get_close_matches(name, no_reference, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UserError(
            f"--judge {spec}: pyiqa {version} has no metric {name}{hint}; fix: give a no-reference metric of "
            "pyiqa.list_models(metric_mode='NR'), e.g. pyiqa:piqe, pyiqa:musiq, pyiqa:qalign"
        )


def _create_metric(pyiqa, spec: str, name: str, version: str, device: str):
    """pyiqa's metric `name` on `device` (its download messages on stderr); a failure is one UserError."""
    import torch

    try:
        with contextlib.redirect_stdout(sys.stderr):  # pyiqa prints its downloads: keep stdout for the tables
            return pyiqa.create_metric(name, device=torch.device(device))
    except ImportError as exc:  # a module pyiqa's metric imports without declaring it: not the weights' fault
        from pytest_pstbench.core.install_hints import extra_install

        missing = getattr(exc, "name", None) or _one_line(exc)
        raise UserError(
            f"--judge {spec}: pyiqa {version}'s metric {name} imports the module {missing}, which is not installed "
            f"(pyiqa does not declare it); fix: {extra_install('iqa')} (the [iqa] extra brings what pyiqa's metrics "
            f"import), or pip install {missing}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - pyiqa's own failure (no weights, no network, a broken install)
        raise UserError(
            f"--judge {spec}: pyiqa {version} could not create metric {name} ({type(exc).__name__}: {_one_line(exc)[:300]}); "
            f"pyiqa fetches its weights into {cache_dir()} (models on Hugging Face, such as qalign, into the Hugging Face "
            f"cache); fix: `pstbench weights fetch {spec}` where they can be downloaded (checked against pinned digests), "
            "or run once there and copy that folder here (docs/selection.md, pinned pyiqa weights)"
        ) from None


def _batch_scorer(forward, name: str, device: str, sign: float):
    """The batch function: uint8 HxWx3 RGB arrays -> `sign` * `forward`'s score of each, one call per size group
    (each image alone where `forward` refuses the group)."""
    import torch

    def batch(images) -> list:
        """Scores of uint8 HxWx3 RGB arrays (higher = better): one pyiqa call per size group."""
        import numpy as np

        out: list = [None] * len(images)
        groups: dict[tuple, list[int]] = {}
        for i, img in enumerate(images):
            groups.setdefault(tuple(img.shape), []).append(i)

        def run(idx: list[int]) -> list:
            x = torch.from_numpy(np.stack([images[i] for i in idx])).permute(0, 3, 1, 2).to(torch.float32).div_(255.0)
            with torch.no_grad():
                scores = forward(x.to(device))
            if torch.is_tensor(scores):
                scores = scores.detach().to("cpu", torch.float64).reshape(-1).tolist()
            elif isinstance(scores, (int, float)):
                scores = [scores]
            else:
                scores = list(scores)
            if len(scores) != len(idx):
                raise ValueError(f"pyiqa metric {name} returned {len(scores)} scores for a batch of {len(idx)} images")
            return scores

        for idx in groups.values():
            try:
                scores = run(idx)
            except Exception:  # noqa: BLE001 - a metric that takes one image per call (Q-Align): each alone
                if len(idx) == 1:
                    raise
                scores = [s for i in idx for s in run([i])]
            for i, s in zip(idx, scores):
                out[i] = sign * s
        return out

    return batch

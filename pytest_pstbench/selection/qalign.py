"""Q-Align as the VAB paper scores it: `--judge vab-paper:qalign` (`vab-paper:NAME`, the paper's reward models).

The paper (§H.4.2) scores Q-Align with its aesthetic scorer: the prompt asks for the image's aesthetics, the
model's next-token logits for the five words excellent, good, fair, poor, bad go through a softmax, and the
probabilities are weighted [1, 0.75, 0.5, 0.25, 0]; each image is scored `num_trials` times (the protocol's
`judge.num_trials`) and averaged (`judges.score_candidates`). pyiqa's `qalign` metric (the `q-future/one-align`
model) exposes the aesthetic task (`task_='aesthetic'`) but weights the words [5, 4, 3, 2, 1] in float16; this
adapter takes the model's five logits (`model.score(..., return_dict=True)`) and computes the paper's score
from them in float64, so the paper's score is Q-Align's 1-5 aesthetic score mapped to [0, 1] by (s - 1) / 4
(the same order, without float16's rounding ties). `--judge pyiqa:qalign` stays what pyiqa calls it: the
quality task on the 1-5 scale.

The metric is created as every pyiqa judge is (`selection.iqa.pyiqa_scorer`, the same errors); run.json's
judge records the words, their weights, the task, num_trials, pyiqa's version and the model's repository and
revision (the commit of `q-future/one-align` that was loaded: the config's commit hash, or the Hugging Face
cache's `refs/main`).
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path

from pytest_pstbench.core.errors import UserError

PREFIX = "vab-paper:"
WORDS = ("excellent", "good", "fair", "poor", "bad")  # the order of Q-Align's level words (§H.4.2)
WORD_WEIGHTS = (1.0, 0.75, 0.5, 0.25, 0.0)  # the paper's weights of those words (§H.4.2)
TASK = "aesthetic"
REPOSITORY = "q-future/one-align"  # the Hugging Face model pyiqa's qalign loads (its `main`)


def is_paper_spec(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def paper_aesthetic_score(logits) -> float:
    """The paper's Q-Align score of one image from the logits of (excellent, good, fair, poor, bad): the
    softmax's probabilities weighted [1, 0.75, 0.5, 0.25, 0], in float64 (ValueError unless five finite logits)."""
    try:
        values = [float(v) for v in logits]
    except (TypeError, ValueError):
        values = []
    if len(values) != len(WORDS) or not all(math.isfinite(v) for v in values):
        raise ValueError(
            f"Q-Align's aesthetic score needs five finite logits (excellent, good, fair, poor, bad), got {logits!r}"
        )
    top = max(values)
    exps = [math.exp(v - top) for v in values]  # shifted by the largest: no overflow, the same softmax
    return math.fsum(w * e for w, e in zip(WORD_WEIGHTS, exps)) / math.fsum(exps)


def model_revision(model, hub_cache=None) -> str:
    """The commit of q-future/one-align that was loaded: the config's `_commit_hash` (transformers 4), else the
    `refs/main` of the Hugging Face cache (transformers 5 no longer records it), else "unknown"."""
    found = getattr(getattr(model, "config", None), "_commit_hash", None)
    if found:
        return str(found)
    if hub_cache is None:
        try:
            from huggingface_hub import constants

            hub_cache = constants.HF_HUB_CACHE
        except Exception:  # noqa: BLE001 - no huggingface_hub: nothing to read the revision from
            return "unknown"
    ref = Path(hub_cache) / ("models--" + REPOSITORY.replace("/", "--")) / "refs" / "main"
    try:
        return ref.read_text(encoding="utf-8").strip() or "unknown"
    except OSError:
        return "unknown"


def _aesthetic_adapter(spec: str):
    """adapt(metric) -> (forward, provenance) for `iqa.pyiqa_scorer`: forward scores a batch one image at a time."""

    def adapt(metric):
        import importlib

        import torch

        version = str(getattr(importlib.import_module("pyiqa"), "__version__", "unknown"))
        net = getattr(metric, "net", None)
        model = getattr(net, "model", None)
        if not callable(getattr(net, "preprocess", None)) or not callable(getattr(model, "score", None)):
            raise UserError(
                f"--judge {spec}: pyiqa {version}'s qalign metric does not expose Q-Align's logits (net.preprocess and "
                "net.model.score, as pyiqa 0.1.16 does); fix: install pyiqa 0.1.16, or use --judge pyiqa:qalign "
                "(pyiqa's own Q-Align quality score)"
            )

        def forward(x) -> list[float]:
            scores = []
            with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True), torch.no_grad():
                for i in range(x.shape[0]):  # Q-Align takes one image per call
                    out = model.score(
                        None, task_=TASK, input_="image", return_dict=True, image_tensor=net.preprocess(x[i : i + 1])
                    )
                    logits = out["logits"].detach().to("cpu", torch.float64).reshape(-1).tolist()
                    scores.append(paper_aesthetic_score(logits))
            return scores

        provenance = {
            "kind": "vab-paper",
            "model": "qalign",
            "paper_section": "H.4.2",
            "pyiqa_metric": "qalign",
            "task": TASK,
            "words": list(WORDS),
            "word_weights": list(WORD_WEIGHTS),
            "score_range": "0, 1",
            "model_repository": REPOSITORY,
            "model_revision": model_revision(model),
            "input": "RGB float32 in [0, 1], one image per call (pyiqa's Q-Align preprocessing: padded to a square, "
            "CLIP-resized); the five words' logits from model.score(return_dict=True), the score in float64",
        }
        return forward, provenance

    return adapt


def paper_scorer(spec: str, *, device: str = "cpu"):
    """`vab-paper:NAME` as (batch function, provenance), as `iqa.pyiqa_scorer` gives them; only `qalign` is
    reachable, the paper's other reward models are one-line UserErrors naming what is missing."""
    from pytest_pstbench.selection.iqa import pyiqa_scorer
    from pytest_pstbench.selection.paper_rewards import MISSING, MODELS, missing_message

    name = spec[len(PREFIX) :]
    if name == "qalign":
        return pyiqa_scorer(spec, device=device, metric_name="qalign", adapt=_aesthetic_adapter(spec))
    if name in MISSING:
        raise UserError(missing_message(spec, name))
    close = difflib.get_close_matches(name, MODELS, n=2)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise UserError(
        f"--judge {spec}: the paper's reward models are {', '.join(MODELS)}{hint}; fix: give vab-paper:qalign "
        "(the one reachable here) or another of those names"
    )

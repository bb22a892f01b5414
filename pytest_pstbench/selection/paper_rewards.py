"""The VAB paper's six reward models (§H.4) and where each can be run: `--judge vab-paper:NAME`.

The paper scores ArtiMuse, Q-Align, Q-Instruct, RealQA, PEAS-aes and PEAS-ava, each image scored `num_trials`
times and averaged. Only Q-Align is reachable through an installable package (pyiqa's `qalign`, the
`q-future/one-align` model): `vab-paper:qalign` (`selection.qalign`) runs it as the paper does. The others are
refused in one line naming what is missing, never replaced by a stand-in. Their scoring rules that can be written
without the model are pure functions here (for a function judge that runs the model): `qinstruct_score`,
`peas_score`, `realqa_parse` / `realqa_score`. ArtiMuse's two-letter decoding is not: its table is not known here.
"""

from __future__ import annotations

import math
import re

MODELS = ("artimuse", "qalign", "q-instruct", "realqa", "peas-aes", "peas-ava")

_FIX = (
    "fix: run the model with its authors' code and give the kit its scores as a function judge "
    "(module:function) or its picks as --answers (docs/selection.md, the paper's reward models)"
)

MISSING = {
    "artimuse": "ArtiMuse (§H.4.1: a two-letter output decoded to [0, 100]) is in neither pyiqa nor a package on "
    "the index (its checkpoints are on Hugging Face, built on InternVL-3), and the summary of the paper "
    "does not give the two-letter decoding table",
    "q-instruct": "Q-Instruct (§H.4.3: the logit of 'good' minus the logit of 'poor' under an image-token-wrapped "
    "prompt) is in neither pyiqa (its qalign is the one-align model, not Q-Instruct) nor a package on "
    "the index; the rule is paper_rewards.qinstruct_score",
    "realqa": "RealQA (§H.4.4: generated text parsed to a score in [0, 10], a second constrained prompt when "
    "parsing fails) is in neither pyiqa nor a package on the index; the parse is paper_rewards.realqa_score",
    "peas-aes": "PEAS-aes (§H.4.5: the expected value of a 10-bin score distribution) is in neither pyiqa nor a "
    "package on the index; the rule is paper_rewards.peas_score",
    "peas-ava": "PEAS-ava (§H.4.5: the expected value of a 10-bin score distribution) is in neither pyiqa nor a "
    "package on the index; the rule is paper_rewards.peas_score",
}


def missing_message(spec: str, name: str) -> str:
    """The one-line refusal of a paper reward model that no installable package provides."""
    return f"--judge {spec}: {MISSING[name]}; {_FIX}"


# --- the scoring rules of the models that no package provides (§H.4), for a function judge that runs them ---


def _finite(value, what: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return v


def qinstruct_score(logit_good, logit_poor) -> float:
    """Q-Instruct's score of one image (§H.4.3): the next-token logit of "good" minus that of "poor"."""
    return _finite(logit_good, "the logit of 'good'") - _finite(logit_poor, "the logit of 'poor'")


def peas_score(distribution) -> float:
    """PEAS-aes / PEAS-ava's score of one image (§H.4.5): the expected value of its 10-bin score distribution,
    bin i (1..10) worth i; the probabilities are normalised by their sum (non-negative, not all zero)."""
    probs = [_finite(p, "a bin's probability") for p in distribution]
    if len(probs) != 10:
        raise ValueError(f"PEAS's score distribution has 10 bins, got {len(probs)}")
    if min(probs) < 0 or math.fsum(probs) <= 0:
        raise ValueError("PEAS's bin probabilities must be non-negative and not all zero")
    return math.fsum(i * p for i, p in enumerate(probs, start=1)) / math.fsum(probs)


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?")


def realqa_parse(text) -> float | None:
    """RealQA's generated text as a score (§H.4.4): the first number in the text, kept if it lies in [0, 10]
    (e.g. "7.5", "Score: 8/10"); None where there is none, or it lies outside (the caller asks again)."""
    match = _NUMBER.search(str(text))
    if match is None:
        return None
    value = float(match.group())
    return value if 0.0 <= value <= 10.0 else None


def realqa_score(text, ask_constrained) -> float:
    """RealQA's score of one image: the first answer parsed; where that fails, `ask_constrained()` (the second,
    constrained prompt's answer) parsed; ValueError where both fail."""
    first = realqa_parse(text)
    if first is not None:
        return first
    second_text = ask_constrained()
    second = realqa_parse(second_text)
    if second is None:
        raise ValueError(
            f"RealQA's answers give no score in [0, 10]: {str(text)[:80]!r}, then {str(second_text)[:80]!r}"
        )
    return second

"""The VAB paper's six reward models (§H.4) and where each can be run: `--judge vab-paper:NAME`.

The paper scores ArtiMuse, Q-Align, Q-Instruct, RealQA, PEAS-aes and PEAS-ava, each image scored `num_trials`
times and averaged. Only Q-Align is reachable through an installable package (pyiqa's `qalign`, the
`q-future/one-align` model): `vab-paper:qalign` (`selection.qalign`) runs it as the paper does. The others are
refused in one line naming what is missing, never replaced by a stand-in.
"""
from __future__ import annotations

MODELS = ("artimuse", "qalign", "q-instruct", "realqa", "peas-aes", "peas-ava")

_FIX = ("fix: run the model with its authors' code and give the kit its scores as a function judge "
        "(module:function) or its picks as --answers (docs/selection.md, the paper's reward models)")

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

"""The one option table: every option that both front doors take, and the plugin's own, with its help
written once. The pytest plugin turns an entry NAME into `--pstbench-NAME` (and the ini key
`pstbench_NAME`, dashes as underscores); `pstbench score`, `demo` and the other commands turn it into
`--NAME`. Imported by the two front doors, `pytest_pstbench.plugin` and `pytest_pstbench.cli`, and by
nothing below them (the kinds, core, data and metrics take values, not options). Standard library only:
the plugin imports this module in every pytest run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    name: str  # "allow-resize" -> --allow-resize (CLI), --pstbench-allow-resize and ini pstbench_allow_resize (pytest)
    help: str
    kind: str = "value"  # "value" (one value), "flag" (store_true) or "list" (repeatable, appended)
    metavar: str | None = None
    ini: str | None = "string"  # the ini type (string, bool, linelist), None for no ini key
    ini_help: str | None = None  # when the ini key's meaning needs other words (e.g. "one per line")
    cli_default: object = None  # argparse default (pytest's is None: "not given", then the ini value)
    pytest_note: str = ""  # appended to the help in pytest only (what differs there)
    cli_note: str = ""  # appended to the help in the CLI only
    cli_nargs: str | None = None  # argparse nargs of a "value" option in the CLI (e.g. "+": several values)

    @property
    def dest(self) -> str:
        return "pstbench_" + self.name.replace("-", "_")


# Options of `pstbench score` that the plugin takes too (the plugin as --pstbench-NAME).
SCORING = (
    Option(
        "track",
        "track to score: demo, a remote track (pst50-paired, pst50-paired-log, acetone-transfer; fetch with "
        "`pstbench data fetch`) or a path to a local track.yaml",
        pytest_note="; one test item per pair",
    ),
    Option(
        "outputs",
        "folder with the method's outputs, one <pair_id>.png per pair; `identity` (or `log:identity`) scores "
        "the track's content images unchanged (selection tracks are scored with a judge instead)",
        cli_note="; several folders score several methods in one call (one run per folder, named after it), "
        "decoding each reference and style once",
        cli_nargs="+",
        metavar="DIR",
    ),
    Option(
        "name",
        "run name; run files go to RESULTS/<track>/<name>/ (default: method.yaml's `method`, else the outputs folder's name, or its parent's when it is named outputs)",
        pytest_note=", or 'pytest' without outputs",
    ),
    Option("results", "results root folder (default: results)", cli_default="results"),
    Option(
        "allow-resize",
        "resize outputs of another size to the reference size (the protocol's filter, bicubic), "
        "recorded per pair in run.json as a deviation",
        kind="flag",
        ini="bool",
    ),
    Option("device", "device for LPIPS and pyiqa judges: cpu, cuda or cuda:N (default: cpu)", cli_default="cpu"),
    Option(
        "protocol",
        "protocol id or YAML path, or BASE+VARIANT (e.g. pstbench+clustered) (default: pstbench; vab for selection tracks)",
    ),
    Option(
        "method-info",
        "method provenance recorded in run.json (repeatable); merged over method.yaml beside the outputs",
        kind="list",
        metavar="KEY=VALUE",
        ini=None,
    ),
    Option("no-cache", "do not read or write the per-pair score cache", kind="flag", ini="bool"),
    Option(
        "verify-cache",
        "rescore N random pairs found in the score cache and fail the run if any differs from its entry",
        metavar="N",
    ),
    Option(
        "allow-outside-links",
        "accept outputs that are links to files outside the outputs folder (each recorded in run.json as a deviation)",
        kind="flag",
        ini="bool",
    ),
)

# Options of a model's requests that `pstbench vab run` (selection/commands/vab_run.py, cli_args) and the
# plugin's --pstbench-model take alike (checked by selection.ask.settings.run_settings).
MODEL_REQUEST = (
    Option(
        "header",
        "extra HTTP header on every request to the model's endpoint (repeatable); VALUE env:VAR reads "
        "environment variable VAR; values are never written to any file (run.json keeps the names, the recorded "
        "command line shows <redacted>)",
        kind="list",
        metavar="NAME=VALUE",
        ini="linelist",
        ini_help="NAME=VALUE extra HTTP headers for --pstbench-model, one per line (VALUE env:VAR reads variable VAR)",
        pytest_note="; selection tracks, with --pstbench-model",
    ),
    Option(
        "extra-body",
        "extra field of every request body (repeatable), VALUE as JSON (a value that is not JSON is "
        "sent as a string), e.g. reasoning_effort='\"high\"'; recorded in run.json",
        kind="list",
        metavar="NAME=JSON",
        ini="linelist",
        ini_help="NAME=JSON extra request body fields for --pstbench-model, one per line",
        pytest_note="; selection tracks, with --pstbench-model",
    ),
)

# Options of the plugin only (the CLI has commands for these: vab score / vab run, compare).
PLUGIN_ONLY = (
    Option("answers", "selection tracks: JSON Lines answers file (raw responses or parsed best/worst labels)"),
    Option(
        "judge",
        "selection tracks: scoring function module:function or path/to/file.py:function (image -> float), "
        "or pyiqa:METRIC (a no-reference pyiqa metric, on --pstbench-device), or vab-paper:qalign (Q-Align as the paper scores it)",
    ),
    Option(
        "votes",
        "selection tracks: the experts' votes (CSV task_id,k,judge,best,worst, as `pstbench vab consensus` reads) "
        "for the human reference row: each expert scored against the consensus of the other experts (leave-one-out); "
        "default: the track's own (`votes:` in its track.yaml)",
        metavar="FILE",
    ),
    Option(
        "model",
        "selection tracks: ask this model at --pstbench-api-base (as `pstbench vab run`), appending to "
        "--pstbench-answers (default RESULTS/<track>/<name>.answers.jsonl; resumed), then score its answers",
    ),
    Option(
        "api-base",
        "selection tracks: OpenAI-compatible endpoint base URL for --pstbench-model (API_BASE/chat/completions)",
    ),
    Option(
        "api-key-env",
        "selection tracks: environment variable holding the API key for --pstbench-model (default "
        "API_KEY; never written)",
    ),
    Option(
        "concurrency",
        "selection tracks: requests in flight at once for --pstbench-model (default 10, the official "
        "rules), or `auto`: adapt to the endpoint's rate limit up to --pstbench-max-concurrency (as `pstbench vab run`)",
        metavar="N|auto",
    ),
    Option(
        "max-concurrency",
        "selection tracks: with --pstbench-concurrency auto, the ceiling of the adaptive limit (default 64)",
        metavar="M",
    ),
    *MODEL_REQUEST,
    Option(
        "baseline",
        "baseline run folder to gate against (repeatable): the session fails when the run is significantly "
        "worse on a gated metric (paired Wilcoxon; exact McNemar for selection tracks; Holm, alpha from the protocol); "
        "or a published run pinned to a commit, hf://datasets/OWNER/NAME@COMMIT/PATH (pulled once, verified, cached)",
        kind="list",
        metavar="RUN_DIR",
        ini="linelist",
        ini_help="baseline run folders (or hf://datasets/OWNER/NAME@COMMIT/PATH) to gate against (one per line)",
    ),
    Option(
        "baseline-allow-branch",
        "accept a published baseline named by a branch or tag (hf://...@main/PATH): the commit "
        "it points to now is used and recorded in run.json (default: a baseline URI must name a 40-hex commit)",
        kind="flag",
        ini="bool",
    ),
    Option(
        "gate-metrics",
        "comma-separated metrics the baseline gate checks (default: every ranked metric; selection: top1,bot1,tb1)",
        metavar="M1,M2",
        ini_help="metrics the baseline gate checks (comma-separated)",
    ),
    Option(
        "gate-margin",
        "non-inferiority margin of the baseline gate (repeatable; paired tracks): the gate fails on METRIC "
        "only when the run is significantly worse than the baseline by more than DELTA (one-sided Wilcoxon of the "
        "per-pair differences shifted by DELTA, in metrics.csv units; Holm over the gated tests); 0 (default): no margin",
        kind="list",
        metavar="METRIC=DELTA",
        ini="linelist",
        ini_help="METRIC=DELTA gate margins, one per line (e.g. lpips=0.002)",
    ),
    Option(
        "update-baseline",
        "score, then write this run as the new baseline: the one --pstbench-baseline folder, "
        "replaced whole (or created); the gate is not evaluated and the session fails, so that a baseline is never "
        "updated silently (review and commit it, then run without this flag)",
        kind="flag",
        ini=None,
    ),
    Option(
        "summary",
        "also write the results table and the gate's verdict as Markdown to FILE (replaced whole); with "
        "$GITHUB_STEP_SUMMARY set (GitHub Actions) the same Markdown is appended there",
        metavar="FILE",
    ),
    *(
        Option(
            bound,
            f"fail the session when a mean is {word} VALUE (repeatable); paired tracks: METRIC=VALUE, e.g. "
            f"psnr=22; selection tracks: METRIC.AGGREGATION=VALUE on the overall cell of summary.json, e.g. tb1.pass^3=0.3",
            kind="list",
            metavar="KEY=VALUE",
            ini="linelist",
            ini_help=f"KEY=VALUE bounds on means, one per line (fail {word}): psnr=22; tb1.pass^3=0.3",
        )
        for bound, word in (("min", "below"), ("max", "above"))
    ),
)

# Options of comparing runs that `pstbench compare` (--NAME) and the gate (--pstbench-NAME) take alike.
COMPARING = (
    Option(
        "strict-environment",
        "fail when a baseline was computed in another environment than the run it is compared "
        "with (torch, lpips, scikit-image, numpy or pyiqa version, device, torch thread count, LPIPS weights digest; "
        "core.drift); without it the drift is one line of the output and a note of the verdict",
        kind="flag",
        ini="bool",
        cli_note=" (exit 1, the line on stderr)",
        pytest_note=" (the gate fails)",
    ),
)

PLUGIN = SCORING + PLUGIN_ONLY + COMPARING
BY_NAME = {o.name: o for o in PLUGIN}


def add_to_pytest(parser, group, kinds_own: tuple = ()) -> None:
    """Every plugin option as `--pstbench-NAME` in `group`, and its ini key on `parser`; then `kinds_own`, the
    options each registered kind declares itself (its KindSpec's `options`)."""
    for o in (*PLUGIN, *kinds_own):
        help_text = o.help + o.pytest_note
        action = {"value": "store", "flag": "store_true", "list": "append"}[o.kind]
        kw = {"metavar": o.metavar} if o.metavar else {}
        group.addoption(f"--pstbench-{o.name}", action=action, default=None, dest=o.dest, help=help_text, **kw)
        if o.ini is not None:
            default = {"bool": False, "linelist": []}.get(o.ini)
            ini_type = None if o.ini == "string" else o.ini
            parser.addini(o.dest, o.ini_help or help_text, **({"type": ini_type} if ini_type else {}), default=default)


class Arg:
    """One argument of a `pstbench` command, declared in the command's table (a tuple of these beside the
    command): the option strings or positional name, then add_argument's keywords (help, type, nargs, default,
    choices, metavar, action, required, dest, const). Only the keywords given reach argparse, so an entry reads
    as the argument it makes; `add_args` is the one place that makes them."""

    KEYWORDS = frozenset(
        {"help", "type", "nargs", "default", "choices", "metavar", "action", "required", "dest", "const", "version"}
    )
    __slots__ = ("flags", "keywords")

    def __init__(self, *flags: str, **keywords) -> None:
        unknown = set(keywords) - self.KEYWORDS
        if not flags or unknown:
            raise TypeError(f"Arg{flags}: needs a name and takes only {sorted(self.KEYWORDS)} (not {sorted(unknown)})")
        self.flags = flags
        self.keywords = keywords

    def __getattr__(self, name: str):
        if name in Arg.KEYWORDS:
            return self.keywords.get(name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"Arg{self.flags}"


def add_args(parser, table) -> None:
    """Every entry of `table` (a tuple of `Arg`), in order, as an argument of the argparse (sub)parser."""
    for arg in table:
        parser.add_argument(*arg.flags, **arg.keywords)


def cli_args(*names: str, required: tuple[str, ...] = ()) -> tuple[Arg, ...]:
    """The options `names` (entries of the table above) as `--NAME` entries of a command's table; those in
    `required` must be given."""
    out = []
    for name in names:
        o = BY_NAME[name]
        kw: dict = {"help": o.help + o.cli_note}
        if name in required:
            kw["required"] = True
        if o.metavar:
            kw["metavar"] = o.metavar
        if o.kind == "flag":
            kw["action"] = "store_true"
        elif o.kind == "list":
            kw["action"] = "append"
        else:
            kw["default"] = o.cli_default
            if o.cli_nargs:
                kw["nargs"] = o.cli_nargs
        out.append(Arg(f"--{o.name}", **kw))
    return tuple(out)


# `-j/--workers N` of the commands that score pairs (CLI only).
WORKERS = Arg(
    "-j",
    "--workers",
    default=None,
    metavar="N",
    help="threads that read and decode the next pairs' images while the current pair's metrics are "
    "computed (default: the machine's CPU count); the values do not depend on it",
)


def option_value(config, name: str):
    """A plugin option's value: the command line's, else the ini file's (None when neither is set).
    Paths in the ini file are relative to the ini file's folder (the caller resolves them)."""
    dest = "pstbench_" + name.replace("-", "_")
    value = config.getoption(dest, default=None)
    if value is not None:
        return value
    value = config.getini(dest)
    if value in (None, "", []):
        return None
    return value

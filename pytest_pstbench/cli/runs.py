"""`pstbench runs pull|push|ls|eval-results`: published runs on the Hugging Face Hub, through the run store (core.store).

- `pull URI`: the runs under hf://datasets/OWNER/NAME@REVISION/PATH fetched into the cache, verified,
  with the commit and the pinned URI of each;
- `push RUN_DIR URI`: one commit holding the run's files; prints the commit and the pinned URI to gate on;
- `ls URI [--against RUN]`: the runs under a path with track, method, protocol, n, and whether each is
  comparable with RUN;
- `eval-results RUN --dataset-id OWNER/NAME`: the run's numbers as the Hub's `.eval_results/*.yaml`, printed, written
  (`--out`) or opened as a pull request on a model repository (`--push`): board/eval_results.py.
"""

from __future__ import annotations

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub.uri import URI_HELP
from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import Arg, add_args


def local_runs(runs, protocol_spec=None) -> list:
    """The run arguments of a command (compare, report) as local folders: a Hub URI is pulled into the
    cache and verified (core.store.backends), a local folder is kept as it is."""
    from pytest_pstbench.core.store.backends import run_paths

    return run_paths(runs, option="RUN_DIR", protocol_spec=protocol_spec, progress=_progress)


def cmd_pull(args) -> int:
    from pytest_pstbench.core.store.backends import pull

    result = pull(args.uri, protocol_spec=args.protocol, progress=_progress, option="URI")
    print(f"commit: {result.commit}")
    print(f"pinned: {result.pinned_uri}")
    for r in result.runs:
        print(f"{r.uri}  ->  {r.path}")
    how = f"{result.downloaded} files fetched and verified" if result.downloaded else "from the cache (verified)"
    print(f"{len(result.runs)} run{'s' if len(result.runs) != 1 else ''} at commit {result.commit[:12]}: {how}")
    return 0


def cmd_push(args) -> int:
    from pytest_pstbench.core.store.backends import pull, push

    result = push(
        args.run_dir,
        args.uri,
        replace=args.replace,
        create=args.create,
        private=args.private,
        message=args.message,
        progress=_progress,
    )
    print(f"commit: {result.commit}")
    print(f"pinned: {result.pinned_uri}")
    back = pull(result.pinned_uri, progress=_progress, option="pushed run")  # the round trip: fetched and checked
    print(f"verified: {len(back.runs)} run pulled back at that commit and checked against the Hub's digests")
    print(f"gate on it with: pytest ... --pstbench-baseline {result.pinned_uri}")
    return 0


def _method(run: dict) -> str:
    for key, fields in (("method", ("method", "name")), ("judge", ("model", "spec", "label", "kind"))):
        value = run.get(key)
        if isinstance(value, dict):
            for f in fields:
                if value.get(f):
                    return str(value[f])
    return "-"


def cmd_ls(args) -> int:
    from tabulate import tabulate

    from pytest_pstbench.core.kinds import run_kind
    from pytest_pstbench.core.store.backends import check_published, pull, run_paths
    from pytest_pstbench.core.store.reader import read_runs

    check_published(args.uri, "URI")
    against = None
    if args.against:  # first: a local RUN that cannot be read is refused before anything is fetched
        against_path = run_paths([args.against], option="--against", protocol_spec=args.protocol, one=True)[0]
        against = read_runs([against_path], protocol_spec=args.protocol)[1][0]
    result = pull(args.uri, protocol_spec=args.protocol, progress=_progress, option="URI")
    rows = []
    for src in result.runs:
        kind, runs, _ = read_runs([src.path], protocol_spec=args.protocol)
        r = runs[0]
        rec = r.record
        row = [
            src.path_in_repo or ".",
            rec.name,
            rec.kind,
            rec.track,
            _method(rec.data),
            rec.protocol_id,
            f"{rec.n_scored}/{rec.n_items}",
        ]
        if against is not None:
            if run_kind(against.path) != rec.kind:
                row.append(f"no: a {run_kind(against.path)} run against a {rec.kind} run")
            else:
                try:
                    kind.check_comparable([against, r])
                    row.append("yes")
                except UserError as exc:
                    why = str(exc).split(": ", 1)[-1].split("; fix:")[0]
                    row.append(f"no: {why}")
        rows.append(row)
    headers = ["run", "name", "kind", "track", "method", "protocol", "n"] + (
        ["comparable"] if against is not None else []
    )
    print(f"{result.pinned_uri} (commit {result.commit})")
    print(tabulate(rows, headers=headers, tablefmt="simple"))
    return 0


def cmd_eval_results(args) -> int:
    import sys

    from pytest_pstbench.board.eval_results import eval_results, push, write

    res = eval_results(args.run, args.dataset_id, args.task_id, args.protocol, push_to=args.push)
    if args.out is None and args.push is None:
        sys.stdout.write(res.text)
    if args.out is not None:
        print(f"wrote {write(res, args.out)} ({len(res.entries)} entries)")
    if args.push is not None:
        print(f"pull request: {push(res, args.push)} (adds {res.path} to {args.push})")
    if not res.published:  # said last: a failure above is one line
        print(
            f"pstbench: warning: {args.run} is a local run folder, not published: its entries name no source; to "
            "name one, publish it with `pstbench runs push` and give its pinned URI as RUN",
            file=sys.stderr,
        )
    return 0


PULL_ARGS = (
    Arg("uri", metavar="URI", help=URI_HELP + "; a run folder or a folder of run folders"),
    Arg(
        "--protocol",
        default=None,
        help="protocol id or YAML path the runs were made under (default: found by their sha256)",
    ),
)

PUSH_ARGS = (
    Arg("run_dir", metavar="RUN_DIR", help="the local run folder (results/<track>/<name>)"),
    Arg(
        "uri",
        metavar="URI",
        help="hf://datasets/OWNER/NAME[@BRANCH]/PATH: where the run's files go (default branch main)",
    ),
    Arg("--replace", action="store_true", help="replace what PATH holds on the branch (in the same commit)"),
    Arg("--create", action="store_true", help="create the dataset repo if it does not exist"),
    Arg("--private", action="store_true", help="with --create: make the new repo private"),
    Arg("-m", "--message", default=None, help="the commit message (default: names the run, its track and PATH)"),
)

LS_ARGS = (
    Arg("uri", metavar="URI", help=URI_HELP),
    Arg(
        "--against",
        default=None,
        metavar="RUN",
        help="a run folder or Hub URI: say whether each run is comparable with it",
    ),
    Arg(
        "--protocol",
        default=None,
        help="protocol id or YAML path the runs were made under (default: found by their sha256)",
    ),
)


EVAL_RESULTS_ARGS = (
    Arg("run", metavar="RUN", help="a run folder, or a published run's URI " + URI_HELP),
    Arg(
        "--dataset-id",
        required=True,
        metavar="OWNER/NAME",
        help="the benchmark's dataset on the Hub (a Benchmark: its eval.yaml declares the tasks)",
    ),
    Arg(
        "--task-id",
        default=None,
        metavar="T",
        help="task ids T.METRIC, as the benchmark's eval.yaml declares them (default: the metric, e.g. psnr, "
        "top1.pass^3)",
    ),
    Arg(
        "--out",
        default=None,
        metavar="DIR",
        help="write DIR/.eval_results/NAME.yaml (default: print the YAML, unless --push)",
    ),
    Arg(
        "--push",
        default=None,
        metavar="MODEL_REPO",
        help="open a pull request adding the file to this model (or judge) repository, OWNER/NAME",
    ),
    Arg(
        "--protocol",
        default=None,
        help="protocol id or YAML path the run was made under (default: found by its sha256)",
    ),
)


def add_runs_commands(subparsers) -> None:
    p = subparsers.add_parser("runs", help="published runs on the Hugging Face Hub: pull, push, ls, eval-results")
    sub = p.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    a = sub.add_parser(
        "pull", help="fetch the runs under a Hub URI into the cache, verified; print the commit and pinned URIs"
    )
    add_args(a, PULL_ARGS)
    a.set_defaults(func=cmd_pull)
    a = sub.add_parser(
        "push", help="publish a complete run folder as one Hub commit; print the commit and the pinned URI"
    )
    add_args(a, PUSH_ARGS)
    a.set_defaults(func=cmd_push)
    a = sub.add_parser("ls", help="the runs under a Hub URI: track, method, protocol, n, and comparability with a run")
    add_args(a, LS_ARGS)
    a.set_defaults(func=cmd_ls)
    a = sub.add_parser(
        "eval-results",
        help="a run's numbers as the Hub's .eval_results/*.yaml (one entry per ranked metric); --push opens them as "
        "a pull request on a model repository",
    )
    add_args(a, EVAL_RESULTS_ARGS)
    a.set_defaults(func=cmd_eval_results)

"""`pstbench data fetch | verify | list`: remote benchmark data (pytest_pstbench.data: manifest, fetch, verify)."""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_pstbench.options import Arg, add_args


def _reporter(args):
    """Progress on stderr: one bar on a terminal, a line every 5% otherwise (CI logs); per-file lines with -v."""
    from pytest_pstbench.core.progress import Reporter

    return Reporter(sys.stderr, verbose=getattr(args, "verbose", False))


def _track_dataset(track: str) -> tuple[str | None, list[str] | None]:
    """(dataset name, splits) that track `track` needs; (None, None) for the demo or a local track."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.kinds import registered
    from pytest_pstbench.data.manifest import TASKS, find_track, remote_track_ids

    found = find_track(track, kind=None)
    if found is not None:
        m, spec = found
        splits = (
            [str(spec["split"])]
            if m.layout == TASKS
            else list(dict.fromkeys(str(spec[r]) for r in ("content", "style", "reference")))
        )
        return m.name, splits
    if track in {s.demo_track for s in registered().values()} or Path(track).exists():
        return None, None
    raise UserError(
        f"--track {track}: not a remote track, the demo or an existing local track manifest; "
        f"fix: use one of {', '.join(remote_track_ids(kind=None))}, demo, or the path of a track.yaml"
    )


def cmd_data_fetch(args) -> int:
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.data.fetch import fetch_dataset

    if (args.name is None) == (args.track is None):
        raise UserError(
            "pstbench data fetch: give a dataset NAME or --track T (not both); fix: e.g. `pstbench data fetch pst50` "
            "or `pstbench data fetch --track pst50-paired-log`"
        )
    name, splits = args.name, args.splits
    if args.track is not None:
        if splits:
            raise UserError(f"--splits with --track {args.track}: the track decides the splits; fix: drop --splits")
        name, splits = _track_dataset(args.track)
        if name is None:
            print(f"track {args.track}: not a remote track; nothing to fetch")
            return 0
    result = fetch_dataset(
        name,
        splits,
        revision=args.revision,
        allow_other_revision=args.allow_other_revision,
        from_dir=Path(args.from_dir) if args.from_dir else None,
        progress=_reporter(args),
    )
    what = f"{result.files} files"
    if result.downloaded:
        what += f", {result.downloaded} downloaded"
    if result.refetched:
        what += f", {len(result.refetched)} re-fetched ({', '.join(result.refetched)})"
    print(f"{result.name}: {what}; revision {result.revision}; verified; in {result.root}")
    for track_id, n in (result.tasks or {}).items():
        print(f"{result.name}: track {track_id}: {n} tasks ready (pstbench vab score --track {track_id} ...)")
    if result.override:
        print(
            f"{result.name}: note: {result.override.get('detail') or f'revision {result.revision} is not the pinned one'}; "
            "runs on this data record it as a revision_override deviation"
        )
    return 0


def cmd_data_verify(args) -> int:
    from pytest_pstbench.data.manifest import TASKS, get_manifest
    from pytest_pstbench.data.verify import verify_dataset

    lock, bad = verify_dataset(args.name, progress=_reporter(args))
    if get_manifest(args.name).layout == TASKS:  # also the images extracted from the verified files (tasks)
        from pytest_pstbench.data.remote_selection import verify_extraction

        extracted = verify_extraction(get_manifest(args.name))
        if extracted:
            _print_failures(
                args.name,
                extracted,
                f"{len(extracted)} extracted files of {args.name} are missing or differ",
                f"run `pstbench data fetch {args.name}{_splits_arg(lock)}` (it extracts the tasks again)",
            )
            if not bad:
                return 1
    if bad:
        _print_failures(
            args.name,
            bad,
            f"{len(bad)} of {len(lock['files'])} files of {args.name} failed verification",
            f"run `pstbench data fetch {args.name}{_splits_arg(lock)}` (it re-fetches those files)",
        )
        return 1
    print(
        f"{args.name}: all {len(lock['files'])} files verified (size and sha256) against {lock['repo_id']}@{lock['revision']}"
    )
    return 0


def _print_failures(name: str, failures, summary: str, fix: str) -> None:
    """One error line per failed file, then the summary with its fix (stderr)."""
    for path, reason in failures:
        print(f"pstbench: error: {name}: {path}: {reason}", file=sys.stderr)
    print(f"pstbench: error: {summary}; fix: {fix}", file=sys.stderr)


def _splits_arg(lock: dict) -> str:
    from pytest_pstbench.data.dataset_lock import refetch_args
    from pytest_pstbench.data.manifest import get_manifest

    m = get_manifest(lock["dataset"])
    splits = sorted(lock.get("pairs", {}))
    return m.fetch_command(splits, refetch_args(m, lock))[len(f"pstbench data fetch {m.name}") :]


def cmd_data_revision(args) -> int:
    """Print the revision track T is pinned to (a remote track: the kit's pin; demo/local: the track's revision)."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.data.manifest import find_track

    found = find_track(args.track, kind=None)
    if found is not None:
        m = found[0]
        if not m.pinned:
            raise UserError(
                f"track {args.track}: dataset {m.name} is not pinned ({m.path.name}: revision: null), so it has no revision "
                f"before it is fetched; fix: fetch it with `pstbench data fetch {m.name} --revision <branch|tag|commit>` and key "
                "on that revision, or pin a commit in the manifest"
            )
        print(m.revision)
        return 0
    from pytest_pstbench.core.kinds import spec, track_kind

    print(spec(track_kind(args.track)).load("resolve_track")(args.track).revision)  # the kind that claims the track
    return 0


def cmd_data_list(args) -> int:
    from tabulate import tabulate

    from pytest_pstbench.core.paths import data_dir
    from pytest_pstbench.data.manifest import load_manifests
    from pytest_pstbench.data.verify import dataset_status

    rows = [dataset_status(m) for _, m in sorted(load_manifests().items())]
    print(f"data folder: {data_dir()}")
    print(tabulate([list(r.values()) for r in rows], headers=list(rows[0]) if rows else [], tablefmt="simple"))
    return 0


FETCH_ARGS = (
    Arg(
        "name",
        nargs="?",
        default=None,
        help="dataset name: pst50, acetone or vab (vab: its tasks are then extracted into a selection track)",
    ),
    Arg(
        "--track",
        default=None,
        metavar="T",
        help="fetch the dataset and splits track T needs instead of naming them "
        "(the demo or a local track: nothing to fetch, exit 0)",
    ),
    Arg(
        "--splits",
        nargs="+",
        default=None,
        metavar="SPLIT",
        help="splits to fetch (default: the manifest's default_splits; for pst50 those pst50-paired needs)",
    ),
    Arg(
        "--from",
        dest="from_dir",
        default=None,
        metavar="DIR",
        help="register a copy you already have (verified against the Hub's metadata first)",
    ),
    Arg(
        "--revision",
        default=None,
        help="a branch, tag, commit or commit prefix to fetch, resolved to a full commit; "
        "needed for an unpinned dataset (acetone: --revision main); for a pinned one, another revision needs "
        "--allow-other-revision; recorded as a deviation in the lock and every run.json",
    ),
    Arg(
        "--allow-other-revision",
        action="store_true",
        help="accept --revision other than the pinned one; recorded as a deviation",
    ),
    Arg(
        "-v",
        "--verbose",
        action="store_true",
        help="one line per file (default: one progress bar on a terminal, a line every 5%% elsewhere, and a summary)",
    ),
)

VERIFY_ARGS = (
    Arg("name", help="dataset name: pst50, acetone or vab (vab: also the extracted images)"),
    Arg(
        "-v", "--verbose", action="store_true", help="one line per file (default: one progress bar or a line every 5%%)"
    ),
)

REVISION_ARGS = (
    Arg("track", help="a remote track (its manifest's pin), demo or a local track manifest (the track's revision)"),
)


def add_data_commands(sub) -> None:
    """Add `pstbench data fetch|verify|list` to the top-level subparsers `sub`."""
    p = sub.add_parser("data", help="fetch, verify and list remote benchmark data (PST50, AceTone-Bench, VAB)")
    dsub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    f = dsub.add_parser(
        "fetch", help="fetch a dataset at its pinned revision into $PSTBENCH_DATA, verified file by file"
    )
    add_args(f, FETCH_ARGS)
    f.set_defaults(func=cmd_data_fetch)

    v = dsub.add_parser("verify", help="re-hash every file of a fetched dataset against its lock file")
    add_args(v, VERIFY_ARGS)
    v.set_defaults(func=cmd_data_verify)

    r = dsub.add_parser(
        "revision", help="print the revision track T is pinned to (e.g. for a CI cache key); no network"
    )
    add_args(r, REVISION_ARGS)
    r.set_defaults(func=cmd_data_revision)

    ls = dsub.add_parser("list", help="show which datasets are present, their revision and whether they verified")
    ls.set_defaults(func=cmd_data_list)

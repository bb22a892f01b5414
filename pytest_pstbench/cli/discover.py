"""`pstbench ls tracks|protocols|variants|metrics` and `pstbench cache prune`: what the kit offers and
what its cache holds. The lists are read from the data (protocols/*.yaml, protocols/tracks/*.yaml,
protocols/variants/*.yaml), not from a table in code."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.options import Arg, add_args


def _yaml(path: Path) -> dict:
    from pytest_pstbench.core.files.yamlfile import read_yaml

    data = read_yaml(path, path.name)
    return data if isinstance(data, dict) else {}


def _one_line(text) -> str:
    return " ".join(str(text or "").split())


def _print_table(rows: list[list], headers: list[str]) -> None:
    from tabulate import tabulate

    print(tabulate(rows, headers=headers, tablefmt="simple"))


def _protocol_files() -> list[Path]:
    from pytest_pstbench.core.protocol import protocols_dir

    return sorted(protocols_dir().glob("*.yaml"), key=lambda p: p.stem)


def ls_tracks() -> None:
    from pytest_pstbench.core.kinds import registered
    from pytest_pstbench.data.manifest import load_manifests
    from pytest_pstbench.data.verify import fetched_status

    rows = [[s.demo_track, s.name, "generated here (no download)", "-"] for s in registered().values() if s.demo_track]
    for m in sorted(load_manifests().values(), key=lambda m: m.name):
        fetched = fetched_status(m)  # the state `pstbench data list` shows, from the same function
        for tid in m.tracks:
            rows.append([tid, m.kind, f"{m.repo_id}@{m.revision or 'unpinned'} (dataset {m.name})", fetched])
    _print_table(rows, ["track", "kind", "source", "fetched"])
    print("or a local track: --track path/to/track.yaml (see docs/tracks-and-data.md)")


def ls_protocols() -> None:
    from pytest_pstbench.core.kinds import default_kind

    rows = []
    for path in _protocol_files():
        data = _yaml(path)
        rows.append(
            [
                data.get("id", path.stem),
                data.get("kind", default_kind()),
                data.get("version", ""),
                _one_line(data.get("description")),
            ]
        )
    _print_table(rows, ["protocol", "kind", "version", "description"])


def ls_variants() -> None:
    from pytest_pstbench.paired.variants import shipped_variant_ids, variants_dir

    rows = [[vid, _one_line(_yaml(variants_dir() / f"{vid}.yaml").get("description"))] for vid in shipped_variant_ids()]
    _print_table(rows, ["variant", "description"])
    print("use: pstbench sensitivity --track T --variants ID ... (see docs/sensitivity.md)")


def ls_metrics(protocol: str | None) -> None:
    from pytest_pstbench.core.protocol import load_protocol, protocols_dir

    spec = protocol or "pstbench"
    path = protocols_dir() / f"{spec}.yaml"
    if not path.is_file():
        path = Path(spec)
    if not path.is_file():
        ids = ", ".join(p.stem for p in _protocol_files())
        raise UserError(f"--protocol {spec}: no such protocol; fix: use one of {ids}, or the path of a protocol YAML")
    # read and checked as every command reads a protocol: what is listed is what scoring would use
    data = load_protocol(path).data
    metrics = data.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise UserError(f"{path}: has no `metrics` mapping; fix: give a protocol file (see `pstbench ls protocols`)")
    print(f"protocol: {data.get('id', path.stem)} ({path})")
    from pytest_pstbench.core.kinds import protocol_kind
    from pytest_pstbench.core.kinds import spec as kind_spec

    rows, headers = kind_spec(protocol_kind(data, path)).load("metric_table")(data)
    _print_table(rows, headers)


def cmd_ls(args) -> int:
    if args.what != "metrics" and args.protocol is not None:
        raise UserError(
            f"--protocol {args.protocol}: only `pstbench ls metrics` takes a protocol; fix: drop --protocol"
        )
    {"tracks": ls_tracks, "protocols": ls_protocols, "variants": ls_variants}.get(
        args.what, lambda: ls_metrics(args.protocol)
    )()
    return 0


def cmd_cache_prune(args) -> int:
    from pytest_pstbench.paired.scorecache import prune

    if args.older_than is not None and not (args.older_than >= 0):
        raise UserError(f"--older-than {args.older_than:g}: expected a number of days >= 0; fix: e.g. --older-than 30")
    if args.responses:
        return _prune_responses(args)
    report = prune(older_than_days=args.older_than, everything=args.all, dry_run=args.dry_run)
    n = sum(report.removed.values())
    verb = "would remove" if args.dry_run else "removed"
    mib = report.removed_bytes / 2**20
    print(f"score cache {report.root}: {verb} {n} of {report.examined} entries ({mib:.1f} MiB); kept {report.kept}")
    for reason, count in sorted(report.removed.items()):
        print(f"  {count}: {reason}")
    if report.kept_unknown:
        print(
            f"  kept {report.kept_unknown} entries written before entries recorded their engine "
            "(removed by --older-than DAYS or --all)"
        )
    return 0


def _prune_responses(args) -> int:
    """`cache prune --responses`: the model answers `vab run` cached (all, or those older than --older-than days)."""
    from pytest_pstbench.selection.ask.response_cache import prune_responses, responses_dir

    if args.older_than is None and not args.all:
        raise UserError("cache prune --responses: say which answers to remove; fix: add --older-than DAYS or --all")
    n, size = prune_responses(older_than_days=None if args.all else args.older_than, dry_run=args.dry_run)
    print(
        f"response cache {responses_dir()}: {'would remove' if args.dry_run else 'removed'} {n} answers ({size / 2**20:.1f} MiB)"
    )
    return 0


LS_ARGS = (
    Arg("what", choices=["tracks", "protocols", "variants", "metrics"], help="what to list"),
    Arg(
        "--protocol",
        default=None,
        metavar="P",
        help="ls metrics: protocol id or YAML path whose metrics to list (default: pstbench)",
    ),
)

PRUNE_ARGS = (
    Arg("--older-than", type=float, default=None, metavar="DAYS", help="also remove entries not written for DAYS days"),
    Arg("--all", action="store_true", help="remove every score cache entry"),
    Arg("--dry-run", action="store_true", help="say what would be removed; remove nothing"),
    Arg(
        "--responses",
        action="store_true",
        help="prune the model answers `vab run` cached ($PSTBENCH_CACHE/responses) "
        "instead of the score cache (with --older-than DAYS or --all)",
    ),
)


def add_discover_commands(sub) -> None:
    p = sub.add_parser("ls", help="list the tracks, protocols, sensitivity variants or a protocol's metrics")
    add_args(p, LS_ARGS)
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("cache", help="manage the per-pair score cache ($PSTBENCH_CACHE/scores)")
    csub = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    c = csub.add_parser(
        "prune",
        help="remove score cache entries that can no longer be hit (another metric engine, "
        "cache format or package versions), damaged ones and, on request, old ones",
    )
    add_args(c, PRUNE_ARGS)
    c.set_defaults(func=cmd_cache_prune)

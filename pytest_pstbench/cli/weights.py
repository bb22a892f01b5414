"""`pstbench weights fetch|verify|list`: the LPIPS backbone weights (data/weights/resolve.py) and the weight files
of pyiqa judges (`pyiqa:NAME`, data/weights/pyiqa_fetch.py), each checked against a pinned sha256."""

from __future__ import annotations

from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import Arg, add_args

PYIQA_VERSION_HELP = (
    "the pyiqa version whose files to use (default: the installed pyiqa's; needed where pyiqa is "
    "not installed, e.g. to fill a CI cache)"
)


def _fetch_pyiqa(args, *, download: bool) -> int:
    from pytest_pstbench.data.weights.pyiqa_fetch import fetch, parse_pins

    pins = parse_pins(getattr(args, "pin", None))
    results = fetch(
        args.judges,
        args.pyiqa_version,
        trust_first_use=getattr(args, "trust_on_first_use", False),
        pins=pins,
        download_missing=download,
        progress=_progress,
    )
    from pytest_pstbench.data.weights.pyiqa_table import metric_weights

    for spec in dict.fromkeys(args.judges):
        mine = [r for r in results if r.spec == spec]
        entry = metric_weights(spec, args.pyiqa_version)
        if not entry.files:
            print(
                f"{spec}: no weight files of pyiqa's own to fetch"
                + (f"; it also downloads {entry.other}" if entry.other else "")
            )
            continue
        got = sum(r.downloaded for r in mine)
        print(
            f"{spec}: {len(mine)} file(s) {'ready' if download else 'verified'}"
            + (f" ({got} downloaded)" if got else "")
            + "".join(f"; {r.path} sha256 {r.sha256}" for r in mine)
        )
    return 0


def cmd_weights_fetch(args) -> int:
    from pytest_pstbench.data.weights.backbones import BACKBONE_OF_NET
    from pytest_pstbench.data.weights.resolve import fetch_weights

    if args.judges:
        _fetch_pyiqa(args, download=True)
    for net in args.net if args.net is not None else ([] if args.judges else ["alex"]):
        backbone = BACKBONE_OF_NET[net]
        info = fetch_weights(progress=_progress, backbone=backbone)
        print(f"LPIPS {net} ({backbone}) weights ready: {info.get('path')} (source: {info.get('source')})")
    return 0


def cmd_weights_verify(args) -> int:
    return _fetch_pyiqa(args, download=False)


def cmd_weights_list(args) -> int:
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.data.weights.pyiqa_table import installed_pyiqa_version, lock_path, read_lock, read_table

    _, versions = read_table()
    version = args.pyiqa_version or installed_pyiqa_version()
    if version is None or version not in versions:
        raise UserError(
            f"--pyiqa-version {version}: the kit's weights table has no such pyiqa version; fix: pass one of "
            f"{', '.join(sorted(versions))}"
            if version
            else f"pyiqa is not installed here; fix: pass --pyiqa-version (one of {', '.join(sorted(versions))})"
        )
    lock = read_lock()
    print(f"pyiqa {version}: the weight files of each metric (pinned: by the kit, by your lock {lock_path()}, or not)")
    for metric, entry in sorted(versions[version].items()):
        files = []
        for f in entry.files:
            pin = "kit" if f.sha256 else ("lock" if f.key in lock else "not pinned")
            files.append(f"{f.name} [{pin}, {'present' if f.dest().is_file() else 'absent'}]")
        print(
            f"pyiqa:{metric}: "
            + (", ".join(files) or "no files")
            + (f"; also downloads (not fetched here): {entry.other}" if entry.other else "")
        )
    return 0


FETCH_ARGS = (
    Arg(
        "judges",
        nargs="*",
        metavar="pyiqa:NAME",
        help="pyiqa judges whose weight files to fetch into the folders pyiqa reads (a file already there "
        "whose digest matches is kept: no request)",
    ),
    Arg(
        "--net",
        nargs="+",
        choices=["alex", "vgg", "squeeze"],
        default=None,
        help="LPIPS nets whose backbone weights to fetch: alex (the protocol's; the default without pyiqa:NAME), vgg "
        "(used by the lpips-vgg sensitivity variant), squeeze (no offline source: only found in torchvision's cache)",
    ),
    Arg("--pyiqa-version", default=None, metavar="VERSION", help=PYIQA_VERSION_HELP),
    Arg(
        "--trust-on-first-use",
        action="store_true",
        help="a file whose sha256 the kit does not ship and your lock does not hold: record the digest of "
        "what is fetched now in $PSTBENCH_CACHE/weights/pyiqa-weights.lock.json, checked from then on",
    ),
    Arg(
        "--pin",
        action="append",
        default=None,
        metavar="NAME=SHA256",
        help="the sha256 a file must have (repeatable); recorded in the lock once the file matches",
    ),
)

VERIFY_ARGS = (
    Arg("judges", nargs="+", metavar="pyiqa:NAME", help="pyiqa judges whose files to check"),
    Arg("--pyiqa-version", default=None, metavar="VERSION", help=PYIQA_VERSION_HELP),
)

LIST_ARGS = (Arg("--pyiqa-version", default=None, metavar="VERSION", help=PYIQA_VERSION_HELP),)


def add_weights_commands(sub) -> None:
    p = sub.add_parser("weights", help="manage model weights")
    wsub = p.add_subparsers(dest="weights_command", required=True, metavar="ACTION")
    w = wsub.add_parser(
        "fetch",
        help="fetch LPIPS backbone weights (default: AlexNet) or the weight files of pyiqa "
        "judges, each checked against a pinned sha256",
    )
    add_args(w, FETCH_ARGS)
    w.set_defaults(func=cmd_weights_fetch)
    v = wsub.add_parser(
        "verify", help="check the weight files of pyiqa judges against their pinned sha256 (no network)"
    )
    add_args(v, VERIFY_ARGS)
    v.set_defaults(func=cmd_weights_verify)
    ls = wsub.add_parser(
        "list", help="the weight files of each pyiqa metric the kit knows, pinned or not, present or not"
    )
    add_args(ls, LIST_ARGS)
    ls.set_defaults(func=cmd_weights_list)

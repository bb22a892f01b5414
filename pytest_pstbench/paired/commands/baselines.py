"""`pstbench baseline METHOD ... --track T --out DIR`: outputs folders of the reference baselines.

Imports nothing heavy at module level (`pstbench` imports this module to register the command).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import Arg, add_args

METHODS_HELP = (
    "identity (content unchanged), reinhard / mkl (color-matcher 0.6.0), idt (python-color-transfer 0.1.2a0 "
    "pdf_transfer, fetched into the cache on first use), histmatch (skimage match_histograms), or all; several may be given"
)


def cmd_baseline(args) -> int:
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.paired.baselines import (
        BaselineFailed,
        check_baseline_protocol,
        check_out_dir,
        parse_methods,
        prepare_reference_baseline,
        write_reference_baseline,
    )

    methods = parse_methods(args.methods)
    if not args.fetch_only and (args.track is None or args.out is None):
        missing = " and ".join(o for o, v in (("--track", args.track), ("--out", args.out)) if v is None)
        raise UserError(
            f"pstbench baseline: {missing} required; fix: pstbench baseline {' '.join(args.methods)} --track T --out DIR"
        )
    # Check every package first (and fetch python-color-transfer for idt), so that a missing one
    # stops the command before anything is written.
    prepared = [prepare_reference_baseline(m, progress=_progress) for m in methods]
    if args.fetch_only:
        for p in prepared:
            impl = p.implementation
            where = f" ({impl['source']}: {impl['path']})" if "source" in impl else ""
            print(f"{p.name}: ready, {impl.get('package')} {impl.get('version') or ''}".rstrip() + where)
        return 0
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.tracks import resolve_track

    protocol = load_protocol(args.protocol)
    check_baseline_protocol(protocol, args.protocol)
    out = Path(args.out)
    targets = [(p, out) for p in prepared] if len(prepared) == 1 else [(p, out / p.name) for p in prepared]
    for _, target in targets:
        check_out_dir(target, args.overwrite)
    track = resolve_track(args.track, progress=_progress)
    from pytest_pstbench.core.files.write import refuse_overwriting_inputs

    # before any work: an outputs folder replaced whole never holds the track's files or the protocol
    refuse_overwriting_inputs(
        "--out",
        [t for _, t in targets],
        files=[
            ("the track manifest", track.manifest),
            ("protocol file", protocol.path),
            *(
                (f"pair {pr.id}'s {role} image", getattr(pr, role))
                for pr in track.pairs
                for role in ("content", "style", "reference")
            ),
        ],
    )
    for p, target in targets:
        try:
            write_reference_baseline(
                p,
                track,
                target,
                protocol=protocol,
                overwrite=args.overwrite,
                command=args.command_line,
                progress=_progress,
            )
        except BaselineFailed as exc:
            print(f"pstbench: error: {exc}; nothing was written to {target}", file=sys.stderr)
            return 1
        print(f"{p.name}: {target} ({len(track.pairs)} outputs and method.yaml)")
    return 0


BASELINE_ARGS = (
    Arg("methods", nargs="+", metavar="METHOD", help=METHODS_HELP),
    Arg("--track", default=None, help="paired track: demo, a remote track (pst50-paired, ...) or a local track.yaml"),
    Arg("--out", default=None, help="outputs folder (one method) or parent of one folder per method (several)"),
    Arg(
        "--overwrite",
        action="store_true",
        help="replace an existing non-empty outputs folder (only one holding nothing but PNGs and method.yaml)",
    ),
    Arg(
        "--protocol",
        default=None,
        help="protocol whose I/O rules read the content and style images (default: pstbench)",
    ),
    Arg(
        "--fetch-only",
        action="store_true",
        help="only check the methods' packages (and fetch python-color-transfer for idt into the cache); --track and --out are not needed",
    ),
)


def add_baseline_command(subparsers) -> None:
    """Register `pstbench baseline`."""
    p = subparsers.add_parser(
        "baseline",
        help="write the outputs folder of a reference baseline (identity, reinhard, mkl, idt, histmatch)",
        description="Run reference colour-transfer baselines with pinned packages on every pair of a paired track "
        "and write one <pair_id>.png per pair plus a method.yaml (provenance) into an outputs folder, ready for "
        "`pstbench score`. With one method, --out is the outputs folder; with several (or all), --out gets one "
        "subfolder per method (--out/<method>/).",
    )
    add_args(p, BASELINE_ARGS)
    p.set_defaults(func=cmd_baseline)

"""`pstbench sensitivity`: how much do the protocol's choices change the ranking of methods?

Scores every method under the protocol and under each evaluation variant (`protocols/variants/`),
writes `scores.csv`, `analysis.json` and `analysis.md`, and prints the analysis. The engine is in
`pytest_pstbench.paired.sensitivity` (variants in `paired/variants.py`); this module only parses the command line, so
it stays cheap to import.
"""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import Arg, add_args


def cmd_sensitivity(args) -> int:
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.sensitivity import parse_method_specs, resolve_methods
    from pytest_pstbench.paired.sensitivity_analysis import run_sensitivity
    from pytest_pstbench.paired.tracks import resolve_track
    from pytest_pstbench.paired.variants import load_variants

    specs = parse_method_specs(args.methods)
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        from pytest_pstbench.core.errors import UserError

        raise UserError(f"--device {args.device!r}: expected cpu or cuda (or cuda:N)")
    base = load_protocol(args.protocol)
    variants = load_variants(args.variants, base, progress=_progress)
    track = resolve_track(args.track, progress=_progress)
    methods = resolve_methods(track, specs)
    out_dir = Path(args.out) if args.out else Path("results") / "sensitivity" / track.id
    _check_out(out_dir, track, base, variants, methods)
    _resolve_backbones(base, variants)
    _progress(
        f"sensitivity: {len(methods)} methods x {len(variants)} variants (protocol first) on {len(track.pairs)} pairs of {track.id}"
    )
    result = run_sensitivity(
        track,
        base,
        variants,
        methods,
        device=args.device,
        out_dir=out_dir,
        allow_resize=args.allow_resize,
        progress=_progress,
    )
    if result.resized:
        _progress(
            f"sensitivity: {len(result.resized)} outputs resized to the reference size (--allow-resize; listed in analysis.json `resized`)"
        )
    _print_analysis(result.analysis, base, out_dir)
    return 0


def _check_out(out_dir: Path, track, base, variants, methods) -> None:
    """The analysis folder can be written and holds no input: checked before minutes of scoring, not after."""
    from pytest_pstbench.core.files.write import refuse_overwriting_inputs
    from pytest_pstbench.core.store.names import check_results_writable
    from pytest_pstbench.paired.sensitivity_analysis import ANALYSIS_FILES

    check_results_writable(out_dir, out_dir, option="--out", what="analysis files")
    refuse_overwriting_inputs(
        "--out",
        [out_dir / name for name in ANALYSIS_FILES],
        files=[
            ("the track manifest", track.manifest),
            ("protocol file", base.path),
            *(("variant file", v.file) for v in variants),
            *((f"an output of {m.name}", p) for m in methods for p in m.outputs.values()),
        ],
    )


def _resolve_backbones(base, variants) -> None:
    """Resolve (fetch) the LPIPS backbone weights the variants use up front, with progress, not in the middle of
    the run; a variant's net without weights (e.g. squeeze offline) is reported as unavailable in the analysis,
    the protocol's own must work."""
    nets = sorted(
        {str(m.get("net", "alex")) for v in variants for m in v.protocol.metrics.values() if m.get("kind") == "lpips"}
    )
    if not nets:
        return
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.data.weights.backbones import BACKBONE_OF_NET
    from pytest_pstbench.data.weights.resolve import resolve_features

    base_nets = {str(m.get("net", "alex")) for m in base.metrics.values() if m.get("kind") == "lpips"}
    for net in nets:
        try:
            resolve_features(BACKBONE_OF_NET[net], progress=_progress)
        except UserError:
            if net in base_nets:
                raise


def _print_analysis(a: dict, base, out_dir: Path) -> None:
    from pytest_pstbench.paired.sensitivity_analysis import analysis_tables

    print(
        f"track: {a['track']}   protocol: {a['protocol']}   dataset: {a['dataset']}@{a['dataset_revision']}   n={a['n_pairs']}"
    )
    for title, table in analysis_tables(a, base, reason_width=200):
        print(f"\n{title}\n{table}")
    print(
        f"\n{a['computations']['computed']} metric computations for {a['computations']['values']} values "
        f"({a['computations']['reused']} reused); {a['timings']['total_s']:.1f} s"
    )
    print(
        f"files: {out_dir}/ (scores.csv, analysis.json, analysis.md; the full reasons and every variant's ranking are there)"
    )


SENSITIVITY_ARGS = (
    Arg(
        "methods",
        nargs="+",
        metavar="NAME=PATH",
        help="a method: NAME and its outputs folder (one <pair_id>.png per pair), or identity / log:identity for the "
        "track's content images; at least two; give them before --variants",
    ),
    Arg("--track", required=True, help="built-in track (demo), remote track id or path to a local track.yaml"),
    Arg(
        "--out",
        default=None,
        help="folder for scores.csv, analysis.json, analysis.md (default: results/sensitivity/<track>)",
    ),
    Arg(
        "--variants",
        nargs="+",
        default=None,
        metavar="FILE_OR_ID",
        help="variants to run: shipped ids (protocols/variants/<id>.yaml) or paths to variant YAML files (default: every shipped variant)",
    ),
    Arg("--device", default="cpu", help="device for LPIPS: cpu or cuda (default: cpu)"),
    Arg(
        "--allow-resize",
        action="store_true",
        help="resize outputs whose size differs from the reference's (the protocol's filter), as `pstbench score --allow-resize`; "
        "each one is listed in analysis.json `resized`",
    ),
    Arg("--protocol", default=None, help="base protocol id or YAML path the variants patch (default: pstbench)"),
)


def add_sensitivity_command(subparsers) -> None:
    """Register `pstbench sensitivity`."""
    p = subparsers.add_parser(
        "sensitivity",
        help="score methods under the protocol and its evaluation variants; rankings, Kendall tau, swaps",
        description=(
            "Score every method under the protocol and under each evaluation variant (resolution, SSIM, PSNR, "
            "LPIPS, delta E, H-Corr and aggregation choices), then report each variant's ranking of the methods, "
            "Kendall tau against the protocol's ranking, and the method pairs that swap order, with their paired "
            "Wilcoxon tests (Holm over each variant and metric). Writes scores.csv, analysis.json, analysis.md."
        ),
    )
    add_args(p, SENSITIVITY_ARGS)
    p.set_defaults(func=cmd_sensitivity)

"""One builder from options to a scoring run: `ScoreRequest` holds what a front door was given (the
CLI's `pstbench score` arguments or the plugin's options, paths already resolved), and
`open_scoring` turns it into the loaded protocol, the track, the outputs and the `RunSession`. Both
front doors build their runs here, so they apply the same defaults and rules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class ScoreRequest:
    track: str
    outputs: str | None  # an outputs folder (resolved), `identity` / `log:identity`, or None (pytest only)
    name: str | None  # None: `default_run_name` (`identity_name` for identity outputs; `fallback_name` without outputs)
    results: Path
    protocol: str | None = None
    allow_resize: bool = False
    device: str = "cpu"
    method_info: tuple[str, ...] = ()  # KEY=VALUE items
    use_cache: bool = True
    verify_cache: object = None  # N, as given
    allow_outside_links: bool = False
    command: str | None = None
    option_prefix: str = "--"  # how options are spelled in messages: "--" (CLI) or "--pstbench-" (pytest)
    fallback_name: str = "pytest"
    verify_seed: str | None = None  # xdist workers draw the same random pairs to verify


@dataclass
class Scoring:
    protocol: object
    track: object
    outputs: dict | None  # pair id -> output path (None: no outputs folder, pytest fixtures score in-process)
    session: object  # session.RunSession


def open_scoring(req: ScoreRequest, progress=None) -> Scoring:
    """Load the protocol and track, resolve the outputs and method provenance, and open the run."""
    return open_scorings([req], progress=progress)[0]


def open_scorings(reqs: list[ScoreRequest], progress=None) -> list[Scoring]:
    """`open_scoring` for several runs of one track and protocol (the protocol and track are loaded once,
    from the first request): one run per outputs folder. Two runs with one name are refused."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.tracks import resolve_track

    protocol = load_protocol(reqs[0].protocol)
    if any(req.allow_resize for req in reqs) and protocol.resolution.allow_resize_filter is None:
        raise UserError(
            f"--allow-resize: protocol {protocol.id} ({protocol.path}) names no resolution.allow_resize_filter, so it "
            "allows no resizing; fix: add one to the protocol (e.g. allow_resize_filter: bicubic), or drop --allow-resize"
        )
    track = resolve_track(reqs[0].track, progress=progress)
    scorings = [open_on(req, protocol, track) for req in reqs]
    seen: dict[str, str] = {}
    for req, s in zip(reqs, scorings):
        if s.session.name in seen:
            raise UserError(
                f"--outputs {seen[s.session.name]} and {req.outputs}: both would be run {s.session.name} "
                f"(a run is named after method.yaml's `method`, else its folder); fix: score them one call each with --name"
            )
        seen[s.session.name] = str(req.outputs)
    return scorings


def identity_request(req: ScoreRequest) -> ScoreRequest:
    """The request of the table's Identity row beside `req`'s run: the track's content images as the outputs
    (`--outputs identity`), under `req`'s results folder, protocol, device and cache rules (--no-cache,
    --verify-cache). The Identity row is scored like every other run, through the score cache (keyed by the
    content of every file read), never reused from a run folder (whose dataset revision may be a label)."""
    return replace(req, outputs="identity", name=None, method_info=(), allow_resize=False, allow_outside_links=False)


RESERVED_DEFAULT_NAMES = ("outputs", "identity")  # never taken from a folder name or method.yaml


def default_run_name(outputs_dir: Path, method_info: dict, option: str = "--name") -> str:
    """The run name when none is given: method.yaml's `method` (what `pstbench baseline` writes), else the
    outputs folder's name, else (a folder named `outputs`, as in `results/demo/reinhard/outputs`) its parent's.

    A candidate is skipped when it is not a valid run name, is `outputs` (says nothing about the method) or
    `identity` (reserved for the kit's Identity run: method.yaml saying `method: identity` does not make one);
    when none is left: UserError naming the folder and the fix (--name)."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.store.names import check_run_name

    folder = Path(os.path.realpath(outputs_dir))
    method = method_info.get("method") if isinstance(method_info, dict) else None
    candidates = [method if isinstance(method, str) else None, folder.name]
    if folder.name == "outputs":
        candidates.append(folder.parent.name)
    for name in candidates:
        if not name or name in RESERVED_DEFAULT_NAMES:
            continue
        try:
            check_run_name(name)
        except UserError:
            continue
        return name
    raise UserError(
        f"{outputs_dir}: no run name found (method.yaml names no usable `method`, and the folder names "
        f"{' / '.join(repr(c) for c in candidates[1:])} are reserved or not plain names); "
        f"fix: pass {option} NAME or write `method: NAME` into method.yaml"
    )


def open_on(req: ScoreRequest, protocol, track) -> Scoring:
    """`open_scoring` with the protocol and track already loaded (the track `req` names)."""
    from pytest_pstbench.paired.identity import (
        identity_name,
        identity_outputs,
        is_identity_spec,
        refuse_identity_method,
    )
    from pytest_pstbench.paired.method_info import load_method_yaml, parse_method_info
    from pytest_pstbench.paired.session import RunSession, RunSettings
    from pytest_pstbench.paired.tracks import resolve_outputs
    from pytest_pstbench.paired.verify_cache import parse_verify_cache

    if req.outputs is not None and is_identity_spec(str(req.outputs)):
        # `identity` / `log:identity`: the track's content images are the outputs
        outputs, outputs_dir = identity_outputs(track, str(req.outputs)), None
        method_info = {"method": "identity", "description": "the content image, unchanged"}
        default_name = identity_name(protocol.id)  # each protocol keeps its own Identity run
        identity = True
    elif req.outputs is not None:
        outputs_dir = Path(req.outputs)
        outputs = resolve_outputs(track, outputs_dir, req.allow_outside_links)
        method_info = load_method_yaml(outputs_dir)
        refuse_identity_method(method_info, str(outputs_dir / "method.yaml"))  # before a name is derived from it
        default_name = (
            default_run_name(outputs_dir, method_info, f"{req.option_prefix}name") if req.name is None else None
        )
    else:
        outputs = outputs_dir = None
        method_info = {}
        default_name = req.fallback_name
    if req.outputs is None or not is_identity_spec(str(req.outputs)):
        identity = False
    extra = parse_method_info(list(req.method_info))
    method_info = {**method_info, **extra}
    session = RunSession(
        track,
        protocol,
        RunSettings(
            name=str(req.name or default_name),
            results_dir=req.results,
            allow_resize=req.allow_resize,
            device=req.device,
            outputs_dir=outputs_dir,
            method_info=method_info,
            command=req.command,
            use_cache=req.use_cache,
            verify_cache=parse_verify_cache(req.verify_cache, f"{req.option_prefix}verify-cache"),
            allow_outside_links=req.allow_outside_links,
            verify_seed=req.verify_seed,
            identity=identity,
            method_source=f"{req.option_prefix}method-info" if "method" in extra else None,
        ),
    )
    session.outputs = outputs
    return Scoring(protocol, track, outputs, session)

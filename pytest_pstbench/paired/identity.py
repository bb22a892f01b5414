"""The Identity rules of the paired kind, in one place: the Identity outputs (`--outputs identity` /
`--outputs <encoding>:identity`: the track's content images as the outputs), the reserved name and method
(no other run may take them), and which run folder is the kit's Identity run (`is_identity_run`).

`pstbench score --track pst50-paired-log --outputs log:identity` scores the Log-encoded content
(`content_log`) unchanged, i.e. the Identity method of that track. The prefix names the content's
split (`log` for `content_log`, `709` for `content_709`, or the full split name) and is checked
against the track, so an Identity run cannot silently read another encoding.

The name is reserved: no other run may take it or say it is Identity (`refuse_identity_claim`).
"""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError

IDENTITY = "identity"


def is_identity_spec(spec: str) -> bool:
    return spec == IDENTITY or spec.endswith(":" + IDENTITY)


def identity_outputs(track, spec: str) -> dict[str, Path]:
    """Pair id -> the pair's content file, after checking the `<prefix>:` against the track's content split."""
    if Path(spec).exists():
        raise UserError(
            f"--outputs {spec}: ambiguous: it names the Identity outputs (the track's content) and an existing "
            f"path; fix: pass ./{spec} for the folder"
        )
    prefix = spec[: -len(IDENTITY)].rstrip(":")
    if prefix:
        split = str(track.info.get("content_split") or "")
        if not split or prefix not in (split, split.removeprefix("content_")):
            raise UserError(
                f"--outputs {spec}: track {track.id}'s content is {split or 'not a named split'}, not {prefix}; "
                f"fix: use --outputs identity (the track's content unchanged) or the track whose content is {prefix}"
            )
    return {p.id: p.content for p in track.pairs}


IDENTITY_NAME = IDENTITY  # the Identity run's name under the default protocol (its folder results/<track>/identity)
DEFAULT_PROTOCOL_ID = "pstbench"  # the protocol `load_protocol()` gives: its Identity run is `identity`


def identity_name(protocol_id) -> str:
    """The Identity run's name under protocol `protocol_id`: `identity` under the default protocol (`pstbench`),
    `identity@<protocol id>` under any other (`identity@pstbench+clustered`), so each protocol keeps its own
    Identity run beside the others and scoring under a variant never replaces the default protocol's."""
    if protocol_id is None or protocol_id == DEFAULT_PROTOCOL_ID:
        return IDENTITY_NAME
    return f"{IDENTITY_NAME}@{protocol_id}"


def run_protocol_id(run):
    """The protocol id a run folder read back records (run.json `protocol.id`), or None."""
    protocol = run.run.get("protocol") if isinstance(run.run, dict) else None
    return protocol.get("id") if isinstance(protocol, dict) else None


def names_identity(value) -> bool:
    """`value` reads as Identity: `identity` in any case, with any punctuation or spaces (`Identity`, `IDENTITY `),
    in fullwidth or other compatibility letters (core.store.names.is_reserved_name), alone or as the name of a
    protocol's Identity run (`identity@<protocol id>`: what precedes the first `@` reads as Identity)."""
    from pytest_pstbench.core.store.names import is_reserved_name

    if isinstance(value, str) and "@" in value and is_reserved_name(value.partition("@")[0], IDENTITY_NAME):
        return True
    return is_reserved_name(value, IDENTITY_NAME)


def refuse_identity_claim(
    name: str, method_info: dict, outputs_dir: Path | None, method_source: str | None = None
) -> None:
    """The Identity row is the track's content images, scored by the kit (`--outputs identity`); a run of
    other outputs may neither take its name nor say it is Identity (method.yaml `method: identity`,
    --method-info method=identity): the table would print another method's numbers as Identity."""
    refuse_identity_method(
        method_info,
        method_source or (f"{Path(outputs_dir) / 'method.yaml'}" if outputs_dir is not None else "method info"),
    )
    if names_identity(name):
        raise UserError(
            f"--name {name}: reserved for the Identity run (the track's content unchanged, which `pstbench score` "
            "scores beside every method as the table's Identity row); fix: give this run another --name, "
            "or pass --outputs identity to score Identity"
        )


def refuse_identity_method(method_info: dict, where: str) -> None:
    """Outputs whose provenance says they are Identity (`method: identity`, in any spelling) are refused:
    the Identity row is the track's content images, scored by the kit only."""
    method = method_info.get("method") if isinstance(method_info, dict) else None
    if names_identity(method):
        raise UserError(
            f"{where}: method {method!r} is reserved for the kit's Identity run (the track's content images, scored by "
            "the kit itself); these outputs are not scored as Identity; fix: score Identity with --outputs identity, or "
            "name this method otherwise"
        )


def is_identity_run(run) -> bool:
    """A run folder read back (`paired.runs.Run`) is the kit's Identity run: method identity, named identity or
    the Identity name of the protocol it records (`identity_name`). Only the kit writes such a run
    (`refuse_identity_claim` refuses the names and the method to any other)."""
    method = run.run.get("method")
    return (
        run.name in (IDENTITY_NAME, identity_name(run_protocol_id(run)))
        and isinstance(method, dict)
        and method.get("method") == IDENTITY
    )

"""Evaluation variants of a protocol: named patches (data in `protocols/variants/*.yaml`).

A variant file holds `id`, `description` and `changes`, a mapping deep-merged into the base
protocol (mappings merge key by key; any other value, lists included, replaces the base's). The
patched protocol is validated like a protocol file, plus the rules of the sensitivity engine:

- only `resolution.evaluate`, `metrics.<name>.<parameter>`, `aggregation` and `comparison` may change;
- a metric's bookkeeping keys (`kind`, `label`, `decimals`, `higher_is_better`, `ranked`, `against`)
  stay, and no metric is added, so every variant ranks the same metrics in the same direction;
- `resolution.evaluate` is `{mode: full}`, `{mode: short_side, pixels: N, filter: F}` or
  `{mode: fixed, width: W, height: H, filter: F}` (F a PIL resampling filter name);
- `aggregation.statistic` is `mean` or `median`; `aggregation.per_metric.<metric>.statistic` may also
  be `pooled_mse` for a metric of kind psnr (aggregate 10 log10(R^2 / mean over pairs of the MSE)).
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import protocols_dir
from pytest_pstbench.paired.protocol import PairedProtocol

BASE_ID = "protocol"
_VARIANT_KEYS = ("id", "description", "changes")
_CHANGEABLE_SECTIONS = ("resolution", "metrics", "aggregation", "comparison")
# Shipped variants that change no run's numbers, only its intervals and tests (and need the track's clusters):
# not among the default set of `pstbench sensitivity`, used with `--protocol pstbench+clustered`.
SCORING_ONLY = ("clustered",)
_FIXED_METRIC_KEYS = ("kind", "label", "decimals", "higher_is_better", "ranked", "against")


@dataclass(frozen=True)
class Variant:
    id: str
    description: str
    file: str | None  # None for the base protocol
    changes: dict
    protocol: PairedProtocol  # the patched protocol
    sha256: str | None = None  # of the variant file


def variants_dir() -> Path:
    return protocols_dir() / "variants"


def shipped_variant_ids() -> list[str]:
    d = variants_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def deep_merge(base: Any, patch: Any) -> Any:
    """`patch` merged into a deep copy of `base`: mappings key by key, everything else replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


def flatten(d: Any, prefix: tuple = ()) -> dict[tuple, Any]:
    """Nested mappings -> {path tuple: leaf value} (lists are leaves)."""
    if isinstance(d, dict) and d:
        out: dict[tuple, Any] = {}
        for k, v in d.items():
            out.update(flatten(v, prefix + (k,)))
        return out
    return {prefix: d}


def base_variant(base: PairedProtocol) -> Variant:
    return Variant(BASE_ID, f"the protocol as written ({base.path.name})", str(base.path), {}, base, base.sha256)


def resolve_variant_spec(spec: str) -> Path:
    """A variant id (a file in the shipped `protocols/variants/`) or a path to a variant YAML file."""
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UserError(
                f"--variants {spec}: file not found; fix: give an existing variant YAML file or a shipped id"
            )
        return path
    shipped = variants_dir() / f"{spec}.yaml"
    if shipped.is_file():
        return shipped
    raise UserError(
        f"--variants {spec}: unknown variant; fix: give a shipped variant id "
        f"({', '.join(shipped_variant_ids())}) or the path of a variant YAML file"
    )


def load_variant(path: Path, base: PairedProtocol) -> Variant:
    """Read a variant file and apply it to `base`; every rule broken is a one-line UserError."""
    from pytest_pstbench.core.files.yamlfile import read_yaml
    from pytest_pstbench.paired.protocol import validate as _validate

    path = Path(path)
    raw = path.read_bytes()
    data = read_yaml(path, "variant file")

    def bad(rule: str) -> UserError:
        return UserError(f"{path}: invalid variant: {rule}")

    if not isinstance(data, dict):
        raise bad("the file must be a mapping with keys id, description, changes")
    unknown = [k for k in data if k not in _VARIANT_KEYS]
    if unknown:
        raise bad(f"unknown key(s) {', '.join(map(str, unknown))}; fix: use only {', '.join(_VARIANT_KEYS)}")
    for key in _VARIANT_KEYS:
        if key not in data:
            raise bad(f"missing key '{key}'")
    vid = data["id"]
    if not isinstance(vid, str) or not vid or "/" in vid or vid.startswith(".") or vid == BASE_ID:
        raise bad(f"id {vid!r} must be a plain name other than '{BASE_ID}'")
    changes = data["changes"]
    if not isinstance(changes, dict) or not changes:
        raise bad("'changes' must be a non-empty mapping (a patch of the protocol)")
    for section in changes:
        if section not in _CHANGEABLE_SECTIONS:
            raise bad(
                f"changes.{section}: a variant may change only {', '.join(_CHANGEABLE_SECTIONS)} "
                "(images are read once under the base protocol's io rules)"
            )
    res = changes.get("resolution")
    if res is not None and (not isinstance(res, dict) or set(res) != {"evaluate"}):
        raise bad("changes.resolution may only set 'evaluate' (the evaluation size); the reference-size rule stays")
    metrics = changes.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, dict):
            raise bad("changes.metrics must be a mapping of metric name -> parameters")
        for name, params in metrics.items():
            if name not in base.metrics:
                raise bad(
                    f"changes.metrics.{name}: no such metric in protocol {base.id} ({', '.join(base.metric_names)})"
                )
            if not isinstance(params, dict) or not params:
                raise bad(f"changes.metrics.{name} must be a non-empty mapping of parameters")
            for key in params:
                if key in _FIXED_METRIC_KEYS:
                    raise bad(f"changes.metrics.{name}.{key}: a variant may not change a metric's {key}")
    patched = deep_merge(base.data, changes)
    label = f"{path} (applied to {base.path.name})"
    _validate(label, patched)
    sha = hashlib.sha256(raw).hexdigest()
    proto = PairedProtocol(id=f"{base.id}+{vid}", path=path.resolve(), sha256=sha, data=patched)
    return Variant(vid, str(data["description"]).strip(), str(path), changes, proto, sha)


def load_variants(specs: list[str] | None, base: PairedProtocol, progress=None) -> list[Variant]:
    """The base protocol (id `protocol`) followed by the variants named (default: every shipped one,
    less those that change a metric the base protocol does not have, which are skipped with a note)."""
    if specs:
        paths = [resolve_variant_spec(s) for s in specs]
    else:
        from pytest_pstbench.core.files.yamlfile import read_yaml

        paths = []
        for v in shipped_variant_ids():
            path = variants_dir() / f"{v}.yaml"
            changed = ((read_yaml(path, "variant file") or {}).get("changes") or {}).get("metrics") or {}
            absent = [m for m in changed if m not in base.metrics]
            if absent:
                if progress:
                    progress(f"variant {v} skipped: protocol {base.id} has no metric {', '.join(absent)}")
                continue
            if v in SCORING_ONLY:
                continue
            paths.append(path)
    loaded = []
    seen: dict[str, Path] = {}
    for p in paths:
        v = load_variant(p, base)
        if v.id in seen:
            raise UserError(f"{p}: variant id {v.id!r} is also the id of {seen[v.id]}; fix: give each variant once")
        seen[v.id] = p
        loaded.append(v)
    if not specs:  # the shipped set in the protocol file's order of what they change, then by id
        loaded.sort(key=lambda v: (min(_position(base.data, path) for path in flatten(v.changes)), v.id))
    return [base_variant(base), *loaded]


def _position(data: dict, path: tuple) -> tuple:
    """Where `path` sits in the protocol file: the index of each key in its mapping (absent keys go last)."""
    pos = []
    node = data
    for key in path:
        if not isinstance(node, dict):
            break
        keys = list(node)
        if key not in node:
            pos.append(len(keys))
            break
        pos.append(keys.index(key))
        node = node[key]
    return tuple(pos)


def protocol_with_variant(base: PairedProtocol, variant_id: str) -> PairedProtocol:
    """`--protocol BASE+VARIANT` (core.protocol.load_protocol): the shipped variant `variant_id` applied to `base`,
    as a protocol of its own. Its id is `BASE+VARIANT`, its path the variant file's, and its sha256 the digest of
    `<base sha256>+<variant file sha256>` (run.json records it; compare finds the protocol again by it)."""
    path = variants_dir() / f"{variant_id}.yaml"
    if not path.is_file():
        from pytest_pstbench.core.errors import did_you_mean

        raise UserError(
            f"--protocol {base.id}+{variant_id}: no shipped variant {variant_id!r}"
            f"{did_you_mean(variant_id, shipped_variant_ids())}; fix: name one of "
            f"{', '.join(shipped_variant_ids())} after the '+'"
        )
    v = load_variant(path, base)
    digest = hashlib.sha256(f"{base.sha256}+{v.sha256}".encode()).hexdigest()
    return PairedProtocol(id=v.protocol.id, path=v.protocol.path, sha256=digest, data=v.protocol.data)

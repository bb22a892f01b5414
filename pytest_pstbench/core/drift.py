"""Environment drift: a baseline computed in another environment than the candidate it is compared with
(`pstbench compare`, the gate). Both runs' run.json `environment` are read; the fields that can move a value's
last digits are compared: the versions of torch, lpips, scikit-image, numpy and pyiqa, the device, torch's
thread count and the LPIPS weights' digest (where the weights lie does not count). A field neither run records
is not compared; one recorded by one run only is named ("not recorded" on the other side).

This only says so: the comparison itself is unchanged (differences below the protocol's tie thresholds stay
ties), unless the strict option (`compare --strict-environment`, `--pstbench-strict-environment`) makes a
drift a failure. Standard library only (the plugin reads it)."""

from __future__ import annotations

FIELDS = ("torch", "lpips", "scikit-image", "numpy", "pyiqa", "device", "torch_threads", "lpips_weights")
FIX = (
    "fix: score the baseline again in this environment (or the candidate in the baseline's), or pin the versions, "
    "device and thread count both runs use"
)


def _weights(value):
    """The LPIPS weights' digest(s) of an environment (one net: its digest; several: net -> digest)."""
    if not isinstance(value, dict):
        return value
    if "digest" in value or "path" in value:
        return value.get("digest")
    return {net: _weights(info) for net, info in sorted(value.items())}


def _value(env: dict, name: str):
    v = env.get(name)
    return _weights(v) if name == "lpips_weights" else v


def drift(baseline_env, candidate_env) -> list[tuple[str, object, object]]:
    """(field, the baseline's value, the candidate's) of each field of FIELDS that differs; [] when none does or
    either environment is missing."""
    if not isinstance(baseline_env, dict) or not isinstance(candidate_env, dict):
        return []
    out = []
    for name in FIELDS:
        if name not in baseline_env and name not in candidate_env:
            continue
        a, b = _value(baseline_env, name), _value(candidate_env, name)
        if a != b:
            out.append((name, a, b))
    return out


def _shown(v) -> str:
    if v is None:
        return "not recorded"
    if isinstance(v, str) and len(v) == 64:  # a sha256 digest
        return v[:12]
    if isinstance(v, dict):
        return ", ".join(f"{k} {_shown(x)}" for k, x in v.items())
    return str(v)


def drift_line(baseline_name: str, candidate_name: str, fields) -> str:
    """One line naming the fields in which the baseline's environment differs from the candidate's."""
    said = "; ".join(f"{name} {_shown(a)} (baseline) vs {_shown(b)} (candidate)" for name, a, b in fields)
    return (
        f"environment drift: baseline {baseline_name} was computed in another environment than {candidate_name} "
        f"({', '.join(f[0] for f in fields)} differ: {said}); values may differ in their last digits (below the "
        "protocol's tie thresholds they stay ties)"
    )


def pairs_drift(pairs) -> list[str]:
    """One line per (baseline, candidate) pair of loaded runs (`.run`: run.json, `.path`) whose environments
    differ; [] when none does."""
    lines = []
    for base, cand in pairs:
        fields = drift((base.run or {}).get("environment"), (cand.run or {}).get("environment"))
        if fields:
            lines.append(drift_line(str(base.path), str(cand.path), fields))
    return lines


def gate_drift(result, candidate_run: dict, baselines, strict: bool) -> None:
    """The gate: a note per baseline whose run.json environment differs from the candidate run's (`result`: a
    gate.GateResult); with `strict`, a reason too (the gate fails)."""
    from pathlib import Path

    from pytest_pstbench.core.files.jsonfile import read_json

    for b in baselines:
        try:
            env = read_json(Path(b) / "run.json").get("environment")
        except (OSError, ValueError, AttributeError):  # the gate's loader has already refused a bad baseline
            continue
        fields = drift(env, candidate_run.get("environment"))
        if not fields:
            continue
        line = drift_line(str(b), "this run", fields)
        result.notes.append(line)
        if strict:
            result.reasons.append(f"{line}; --pstbench-strict-environment makes that a failure; {FIX}")

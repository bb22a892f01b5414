"""run.json of a paired run: the record `RunSession.finish` writes (what was scored, how, where, and each
deviation from the protocol's rules) and the environment its values were computed in.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from pytest_pstbench.core.store.folder import RUN_FORMAT


def run_record(session, order: list[str], complete: bool, n_scored: int) -> dict:
    """run.json of a paired run (`RunSession.finish`): what was scored, how, where, and what deviated from the
    protocol's rules."""
    from pytest_pstbench.core.environment import git_provenance, run_environment

    results = [session.results[pid] for pid in order]
    resized = [{"pair": r.pair_id, **r.notes["resized"]} for r in results if "resized" in r.notes]
    converted = [{"pair": r.pair_id, **r.notes["converted"]} for r in results if "converted" in r.notes]
    deviations = _deviations(session, results, resized, converted)
    env, differs = run_environment(session.environment(), session.computed_in, order, "pair", values_key=values_key)
    if differs:
        deviations.append(differs)
    return {
        "format": RUN_FORMAT,
        "protocol": {"id": session.protocol.id, "sha256": session.protocol.sha256, "path": str(session.protocol.path)},
        "track": session.track.id,
        "dataset": {
            "id": session.track.dataset_id,
            "revision": session.track.revision,
            "source": session.track.source,
            # a local track is found again by its manifest (e.g. by `pstbench report`)
            **(
                {"manifest": str(Path(session.track.manifest).resolve())}
                if session.track.source == "local" and session.track.manifest
                else {}
            ),
            # dataset images other than PNG (JPEG, WebP, TIFF): the decoders that read them
            **(
                {"image_decoders": session.track.info["image_decoders"]}
                if session.track.info.get("image_decoders")
                else {}
            ),
        },
        "name": session.name,
        "complete": complete,
        "n_pairs": len(session.track.pairs),
        "n_scored": n_scored,
        "allow_resize": session.allow_resize,
        "resized": resized,
        "icc_converted": [
            {"pair": r.pair_id, **r.notes["icc_converted"]} for r in results if "icc_converted" in r.notes
        ],
        "converted": converted,
        "exif_oriented": [
            {"pair": r.pair_id, "orientation": r.notes["exif_orientation"]}
            for r in results
            if "exif_orientation" in r.notes
        ],
        "deviations": deviations,
        **(
            {"clusters": run_clusters(session.track, session.protocol)} if _clustered(session.protocol) else {}
        ),  # what the bootstrap resampled
        "failures": [{"pair": r.pair_id, "message": r.error} for r in results if not r.ok],
        "outputs_dir": str(session.outputs_dir) if session.outputs_dir else None,
        "outputs": [{"pair": r.pair_id, "path": r.output, "sha256": r.output_sha256} for r in results if r.output],
        "environment": env,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": session.command,
        **({"baselines": session.baselines} if session.baselines else {}),  # what a gated run was compared against
        "method": session.method_info,
        "git": git_provenance(
            session.outputs_dir
        ),  # commit, branch, dirty of the outputs' and working folder's repositories
    }


def _deviations(session, results: list, resized: list, converted: list) -> list[dict]:
    """run.json's `deviations` of a paired run, but a differing environment (run_record adds that one last)."""
    deviations = []
    not_scored = [pid for pid in session.track.pair_ids if pid not in session.results]
    if not_scored:
        deviations.append({"kind": "pairs_not_scored", "pairs": not_scored})
    if resized:
        deviations.append({"kind": "resized", "flag": "--allow-resize", "pairs": [r["pair"] for r in resized]})
    outside = [{"pair": r.pair_id, "target": r.notes["outside_link"]} for r in results if "outside_link" in r.notes]
    if outside:
        deviations.append({"kind": "outputs_outside_folder", "flag": "--allow-outside-links", "outputs": outside})
    if converted:
        deviations.append({"kind": "mode_converted", "pairs": [c["pair"] for c in converted]})
    if session.track.info.get("revision_override"):
        deviations.append({"kind": "revision_override", **session.track.info["revision_override"]})
    made_for = session.method_info.get("track")  # method.yaml of `pstbench baseline` names the track it ran on
    if isinstance(made_for, dict) and (made_for.get("id"), made_for.get("revision")) != (
        session.track.id,
        session.track.revision,
    ):
        deviations.append(
            {
                "kind": "outputs_made_for_other_track",
                "method_yaml": {"track": made_for.get("id"), "revision": made_for.get("revision")},
                "scored": {"track": session.track.id, "revision": session.track.revision},
            }
        )
    return deviations


def _clustered(protocol) -> bool:
    boot = protocol.aggregation.bootstrap
    return boot is not None and boot.clustered


def run_clusters(track, protocol=None) -> dict:
    from pytest_pstbench.paired.clusters import run_clusters as clusters

    return clusters(track, protocol)


PACKAGES = ("numpy", "scikit-image", "pillow", "torch", "lpips")  # what a paired run computes with


def environment(device: str, backbones: list[str] | tuple[str, ...] = ("alexnet",), threads: int | None = None) -> dict:
    """run.json's `environment` of a paired run: `core.environment` with its packages, the device and the
    pretrained weights the learned metrics load (`backbones`; recorded per LPIPS net, `lpips_weights`)."""
    from pytest_pstbench.core.environment import environment as base_environment

    # torch's CPU thread count, where LPIPS's last digits depend on it (paired.scorecache.compute_threads; else None)
    env = {**base_environment(PACKAGES), "device": device, "torch_threads": threads}
    # The backbone weights of each LPIPS net the protocol uses (alexnet for the pstbench protocol).
    from pytest_pstbench.data.weights.backbones import BACKBONE_OF_NET

    lpips_nets = sorted(net for net, backbone in BACKBONE_OF_NET.items() if backbone in backbones)
    if lpips_nets:
        from pytest_pstbench.data.weights.cachefile import cached_info

        infos = {}
        for net in lpips_nets:
            try:
                infos[net] = cached_info(BACKBONE_OF_NET[net])
            except Exception:  # pragma: no cover - informational only
                infos[net] = None
        env["lpips_weights"] = infos["alex"] if list(lpips_nets) == ["alex"] else infos
    return env


def values_key(env: dict) -> dict:
    """What of an environment decides a paired run's values: all of it but where the LPIPS weights lie
    (hosts keep their caches in different folders; the digest says which weights they are)."""
    weights = env.get("lpips_weights")
    if not isinstance(weights, dict):
        return env
    strip = lambda info: {k: v for k, v in info.items() if k != "path"} if isinstance(info, dict) else info  # noqa: E731
    return {
        **env,
        "lpips_weights": strip(weights) if "digest" in weights else {n: strip(i) for n, i in weights.items()},
    }

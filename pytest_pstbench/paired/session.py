"""One scoring run: score pairs, collect per-pair results (also from xdist workers), aggregate,
write the run files. The CLI and the pytest plugin both drive this class.

What run.json records is `run_record` (its environment too); --verify-cache's choices are
`verify_cache`; the Identity rules `identity`; the method's provenance `method_info`.
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.paths import file_sha256
from pytest_pstbench.core.store.folder import ItemResult
from pytest_pstbench.metrics.registry import pretrained_backbones
from pytest_pstbench.paired import clusters as _clusters
from pytest_pstbench.paired.identity import refuse_identity_claim
from pytest_pstbench.paired.protocol import PairedProtocol
from pytest_pstbench.paired.run_record import environment, run_record
from pytest_pstbench.paired.tracks import Pair, Track
from pytest_pstbench.paired.verify_cache import parse_verify_cache, verify_order


@dataclass
class PairResult(ItemResult):
    ID_FIELD: ClassVar[str] = "pair_id"
    VALUE_FIELD: ClassVar[str] = "metrics"

    pair_id: str
    metrics: dict | None = None  # metric name -> float; None when the pair failed
    error: str | None = None
    notes: dict = field(default_factory=dict)
    output: str | None = None
    output_sha256: str | None = None


@dataclass
class PendingPair:
    """A pair whose images are loaded (`RunSession.load`) and whose metrics are not computed yet."""

    result: PairResult
    output: object  # uint8 HxWx3 arrays
    reference: object
    style: object
    label: Path  # how the output is named in messages
    key: str | None  # its score cache key (None: not cached)
    material: dict | None  # what the key was made of (`ScoreCache.key`'s arguments)
    hit: dict | None  # the cache entry being verified (--verify-cache)
    outside: dict | None  # --allow-outside-links note


@dataclass
class RunOutcome:
    run_dir: Path
    summary: dict
    run: dict

    @property
    def complete(self) -> bool:
        return bool(self.run["complete"])


@dataclass(frozen=True)
class RunSettings:
    """How one run over a track is made (`RunSession`): its name and folder, and the options of the call."""

    name: str
    results_dir: Path | str = "results"
    allow_resize: bool = False
    device: str = "cpu"
    outputs_dir: Path | None = None
    method_info: dict | None = None
    command: str | None = None  # run.json's `command` (default: this process's argv)
    use_cache: bool = True
    allow_outside_links: bool = False
    verify_cache: int = 0
    verify_seed: str | None = None
    identity: bool = False  # the outputs are the content images the kit reads itself (`--outputs identity`)
    method_source: str | None = None  # where method_info's `method` comes from (for messages)


class RunSession:
    """The state of one run over a track (`settings`): results per pair, then aggregation and run files."""

    def __init__(self, track: Track, protocol: PairedProtocol, settings: RunSettings):
        from pytest_pstbench.core.store import names as _runs

        name, device, method_info, outputs_dir = (
            settings.name,
            settings.device,
            settings.method_info,
            settings.outputs_dir,
        )
        _runs.check_run_name(name)
        if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
            raise UserError(f"--device {device!r}: expected cpu or cuda (or cuda:N)")
        if device != "cpu":  # every metric runs there: refused before anything is scored (torch loads only here)
            from pytest_pstbench.metrics.kernels import check_device

            check_device(device)
        if not settings.identity:  # outputs other than the content images the kit reads itself (`--outputs identity`)
            refuse_identity_claim(name, method_info or {}, outputs_dir, settings.method_source)
        self.track = track
        self.protocol = protocol
        _clusters.warn_shared_once(
            track, protocol
        )  # pairs sharing input files, intervals over pairs: one line on stderr
        self.name = name
        self.results_dir = Path(settings.results_dir)
        _runs.check_results_writable(self.run_dir, self.results_dir)
        self.allow_resize = settings.allow_resize
        self.allow_outside_links = bool(settings.allow_outside_links)
        self.device = device
        self.outputs_dir = Path(outputs_dir) if outputs_dir is not None else None
        self.method_info = dict(method_info or {})
        self.command = settings.command if settings.command is not None else " ".join(sys.argv)
        self.baselines: list[dict] = []  # a gated session's baselines (pinned records), set by the pytest frame
        self.results: dict[str, PairResult] = {}
        # results computed in other processes (pytest-xdist workers): [(their environment, worker id, pair id)]
        self.computed_in: list[tuple[dict, str | None, str]] | None = None
        self._scorer = None
        self.cache = None
        if settings.use_cache:
            from pytest_pstbench.paired.scorecache import ScoreCache

            self.cache = ScoreCache()
        # --verify-cache N: the first N cache hits, in an order drawn at random (shared by xdist workers
        # through `verify_seed`), are rescored and compared with their entries.
        self.verify_cache = parse_verify_cache(settings.verify_cache)
        self._verify_rank = verify_order(track.pair_ids, settings.verify_seed) if self.verify_cache else {}
        self.verified: list[str] = []
        self._verify_lock = threading.Lock()
        self._verify_ids: set[str] | None = None
        self.outputs: dict | None = None  # pair id -> output path, when known before scoring

    @property
    def run_dir(self) -> Path:
        return self.results_dir / self.track.id / self.name

    # ---- scoring -------------------------------------------------------------------------------
    @property
    def scorer(self):
        if self._scorer is None:
            from pytest_pstbench.paired.engine import pair_scorer

            self._scorer = pair_scorer(self.protocol, self.device)
        return self._scorer

    def score_pair(self, pair: Pair, output: Path | object) -> PairResult:
        """Score one output (a path, or an in-memory uint8 HxWx3 array) for `pair`.

        A user error (bad or missing file) is caught and returned as a failed PairResult.
        """
        step = self.load(pair, output, lambda: self.load_dataset_images(pair))
        return step if isinstance(step, PairResult) else self.compute(step)

    def load_dataset_images(self, pair: Pair):
        """The pair's reference and style under the protocol's dataset image rules: (reference, style)."""
        from pytest_pstbench.paired.imageio import load_dataset_image

        reference = load_dataset_image(pair.reference, self.protocol, role=f"reference of {pair.id}")
        style = load_dataset_image(pair.style, self.protocol, role=f"style of {pair.id}")
        return reference, style

    def load(self, pair: Pair, output: Path | object, dataset_images) -> PairResult | PendingPair:
        """The I/O half of scoring a pair: hash the output, look it up in the score cache, decode the
        output (and, through `dataset_images()`, the reference and style) and apply the I/O rules.

        Returns the finished PairResult for a cache hit or a user error, else a `PendingPair` for
        `compute`. Safe to run in a worker thread (it reads files and the cache; it writes nothing).
        """
        from pytest_pstbench.paired.imageio import (
            LoadedImage,
            check_output_array,
            fit_to_reference,
            load_output,
            output_rules,
        )

        result = PairResult(pair.id)
        key = hit = outside = material = None
        try:
            if isinstance(output, (str, Path)):
                out_path = Path(output)
                from pytest_pstbench.paired.tracks import check_inside_outputs, missing_output_error

                if not out_path.is_file():
                    raise missing_output_error(out_path, pair.id)
                if self.outputs_dir is not None:  # checked again here: the folder may have changed since
                    outside = check_inside_outputs(out_path, self.outputs_dir, allow=self.allow_outside_links)
                result.output = str(out_path)
                result.output_sha256 = file_sha256(out_path)
                rules = output_rules(out_path, pair.content)  # the content image itself: the dataset's rules (Identity)
                if self.cache is not None:
                    key, material = self._cache_key(pair, result.output_sha256, rules)
                    hit = self.cache.get(key, self.protocol.metric_names)
                    if hit is not None:
                        if not self._should_verify(pair.id):
                            result.metrics, result.notes = hit["metrics"], hit["notes"]
                            if outside:
                                result.notes = {**result.notes, "outside_link": outside}
                            return result
            reference, style = dataset_images()
            if isinstance(output, (str, Path)):
                ref_h, ref_w = reference.array.shape[:2]
                loaded = load_output(
                    out_path,
                    rules,
                    self.protocol,
                    role="output",
                    expected_size=(ref_w, ref_h),
                    allow_resize=self.allow_resize,
                )
                label = out_path
                if key is not None and (loaded.sha256, reference.sha256, style.sha256) != (
                    result.output_sha256,
                    material["reference_sha256"],
                    material["style_sha256"],
                ):
                    key = hit = None  # a file changed while it was being scored: the key no longer names these bytes
                result.output_sha256 = loaded.sha256
            else:
                loaded = LoadedImage(check_output_array(output, pair.id))
                result.output = "<array>"
                result.output_sha256 = hashlib.sha256(loaded.array.tobytes()).hexdigest()
                label = Path(f"<array for {pair.id}>")
            loaded = fit_to_reference(loaded, reference.array.shape, label, self.protocol, self.allow_resize)
            result.notes = loaded.notes
        except UserError as exc:
            return self._failed(result, exc, outside)
        return PendingPair(result, loaded.array, reference.array, style.array, label, key, material, hit, outside)

    def compute(self, pending: PendingPair, shared: dict | None = None) -> PairResult:
        """The metric half of scoring a pair: every protocol metric on the loaded images at the protocol's
        evaluation resolution, the finite check, the score cache entry (or its --verify-cache check).

        `shared` (optional): a dict kept per pair across runs of one protocol, where the reference-side
        work (evaluation-size images, LPIPS features of the reference and style) is done once.
        """
        result, label, key, hit = pending.result, pending.label, pending.key, pending.hit
        try:
            images = self._at_evaluation_resolution(pending.output, pending.reference, pending.style, shared=shared)
            metrics = self.scorer.score(*images, shared=shared)
            for m, v in metrics.items():
                if not math.isfinite(v):
                    raise UserError(
                        f"{label} (output): metric {m} is {v} for pair {result.pair_id}, not a finite number; the pair is not "
                        "scored (and not cached); fix: check the output and reference images (e.g. a constant image)"
                    )
            result.metrics = metrics
            if key is not None:
                used = self.scorer.weights_used()
                if used != pending.material["weights"]:  # the weights the values were computed with (e.g. none
                    # were cached when the key was made, or the cache changed since this process built its models)
                    key, hit = self.cache.key(**{**pending.material, "weights": used}), None
                if hit is not None:  # --verify-cache: the fresh values must equal the entry's
                    self._check_entry(key, result.pair_id, hit, result)
                    result.notes = {**result.notes, "cache_verified": True}
                else:
                    self.cache.put(key, result.metrics, result.notes)
        except UserError as exc:
            return self._failed(result, exc, pending.outside)
        if pending.outside:  # --allow-outside-links: recorded (not cached: the link, not the content, decides it)
            result.notes = {**result.notes, "outside_link": pending.outside}
        return result

    @staticmethod
    def _failed(result: PairResult, exc: UserError, outside) -> PairResult:
        result.error = str(exc)
        result.metrics = None
        if outside:
            result.notes = {**result.notes, "outside_link": outside}
        return result

    def _at_evaluation_resolution(self, output, reference, style, shared: dict | None = None):
        """The three images resized to the protocol's `resolution.evaluate` (unchanged at full resolution);
        the reference's and style's resized once per `shared` dict."""
        from pytest_pstbench.paired.resolution import evaluation_resolution, res_key, resize_image

        spec = evaluation_resolution(self.protocol)
        if shared is None:
            return resize_image(output, spec), resize_image(reference, spec), resize_image(style, spec)
        key = ("evaluation images", res_key(spec))
        if key not in shared:
            shared[key] = (resize_image(reference, spec), resize_image(style, spec))
        return (resize_image(output, spec), *shared[key])

    def _cache_key(self, pair: Pair, output_sha256: str, read_as: str) -> tuple[str, dict]:
        """The score cache key of `pair`'s output with digest `output_sha256`, read under the I/O rules `read_as`
        (`imageio.output_rules`), and what it is made of: every file's digest and the weights' (`ScoreCache.key`)."""
        from pytest_pstbench.paired.engine import weights_digests
        from pytest_pstbench.paired.scorecache import dataset_file_sha256

        digests = {}
        for role in ("reference", "style"):
            path = getattr(pair, role)
            try:
                digests[role] = dataset_file_sha256(path)
            except OSError as exc:
                raise UserError(
                    f"{path} ({role} of {pair.id}): cannot be read ({exc.strerror or exc}); fix: restore the track's files "
                    "(for a remote track: pstbench data verify / fetch)"
                ) from None
        material = dict(
            output_sha256=output_sha256,
            read_as=read_as,
            weights=weights_digests(self.protocol),
            reference_sha256=digests["reference"],
            style_sha256=digests["style"],
            dataset_id=self.track.dataset_id,
            revision=self.track.revision,
            pair_id=pair.id,
            protocol_sha256=self.protocol.sha256,
            allow_resize=self.allow_resize,
            device=self.device,
            threads=self._threads(),
        )
        return self.cache.key(**material), material

    def _threads(self) -> int | None:
        if not hasattr(self, "_threads_value"):
            from pytest_pstbench.paired.scorecache import compute_threads

            self._threads_value = compute_threads(self.device, self.protocol)
        return self._threads_value

    def _should_verify(self, pair_id: str) -> bool:
        """Whether this cache hit is rescored (--verify-cache N). With the outputs known (`self.outputs`),
        the N pairs are drawn at random among those with a cache entry; otherwise the first N hits."""
        if not self.verify_cache:
            return False
        with self._verify_lock:  # `load` may run in several threads (paired/planner.py)
            return self._should_verify_locked(pair_id)

    def _should_verify_locked(self, pair_id: str) -> bool:
        if self.outputs is not None:
            if self._verify_ids is None:
                from pytest_pstbench.paired.scorecache import dataset_file_sha256

                chosen: set[str] = set()
                for pid in sorted(self.track.pair_ids, key=self._verify_rank.__getitem__):
                    if len(chosen) >= self.verify_cache:
                        break
                    out = self.outputs.get(pid)
                    if isinstance(out, (str, Path)) and Path(out).is_file():
                        try:
                            from pytest_pstbench.paired.imageio import output_rules

                            pair = self.track.pair(pid)
                            key, _ = self._cache_key(pair, dataset_file_sha256(out), output_rules(out, pair.content))
                        except (UserError, OSError):  # that pair fails when it is scored
                            continue
                        if self.cache.get(key, self.protocol.metric_names) is not None:
                            chosen.add(pid)
                self._verify_ids = chosen
            if pair_id not in self._verify_ids:
                return False
        elif len(self.verified) >= self.verify_cache:
            return False
        self.verified.append(pair_id)
        return True

    def _check_entry(self, key: str, pair_id: str, hit: dict, result: PairResult) -> None:
        for m, fresh in result.metrics.items():
            cached = hit["metrics"].get(m)
            if cached is None or abs(cached - fresh) > 1e-9 * max(1.0, abs(fresh)):
                self.cache.discard(key)
                raise UserError(
                    f"score cache entry {self.cache.path(key)} for pair {pair_id} differs from a fresh computation "
                    f"({m}: cached {cached!r}, recomputed {fresh!r}); the entry was removed and the pair fails; fix: delete "
                    f"the score cache {self.cache.root} and restore caches only from trusted writers (in CI: trusted branches)"
                )

    def add(self, result: PairResult) -> None:
        self.results[result.pair_id] = result

    # ---- aggregation ---------------------------------------------------------------------------
    def finish(self, write: bool = True) -> RunOutcome:
        from pytest_pstbench.paired import runs
        from pytest_pstbench.paired.aggregation import summary_entry

        order = [pid for pid in self.track.pair_ids if pid in self.results]
        if not order:
            raise UserError(
                f"track {self.track.id}: no pair was scored, so no run files were written; "
                "fix: check the outputs folder and the pair selection"
            )
        names = self.protocol.metric_names
        scored = [self.results[pid] for pid in order if self.results[pid].ok]
        clusters = _clusters.scored_clusters(self.track, self.protocol, [r.pair_id for r in scored])
        metrics_summary = {m: summary_entry([r.metrics[m] for r in scored], self.protocol, m, clusters) for m in names}
        complete = len(scored) == len(self.track.pairs)
        summary = {
            "track": self.track.id,
            "protocol": self.protocol.id,
            "dataset_revision": self.track.revision,
            "name": self.name,
            "n": len(scored),
            "complete": complete,
            "metrics": metrics_summary,
        }
        run = run_record(self, order, complete, len(scored))
        metrics_text = runs.metrics_csv(names, [(pid, self.results[pid].metrics) for pid in order])
        if write:
            runs.write_run(self.run_dir, metrics_text, summary, run)
        return RunOutcome(self.run_dir, summary, run)

    def environment(self) -> dict:
        """The environment this process computes the run's values in (run.json's `environment`)."""
        env = getattr(self, "_environment", None)
        if env is None:  # ~10 ms (package metadata): once per process, when the LPIPS weights are in the cache
            backbones = pretrained_backbones(self.protocol.metrics)  # what the learned metrics load
            env = environment(self.device, backbones=backbones, threads=self._threads())
            weights = env.get("lpips_weights", {})
            if weights is not None and (backbones == ["alexnet"] or None not in weights.values()):
                self._environment = env
        return env

"""The lab's front door (``QuantLab``) and one background run of it (``LabRun``).

A run creates the requested variants, measures the reference first (its distributions go
to disk once and are reused by later runs), then every other variant against it. The lab
loads models itself, one at a time, with the user's thread/GPU/KV settings.

Why about 400 lines: the front door and the run share the variant bookkeeping (which files
exist, which to create, which measurements are stale); the measuring itself is in
``metrics``, ``quantize`` and ``variants``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..base import InglenookError, InvalidRequest, JobCancelled, ModelRecord
from ..models import ModelRegistry
from ..runtime import LoadOptions, LoadedModel, physical_cores, supports_gpu_offload
from ..store import Paths, Store
from .backend import ArrayBackend, select_backend
from .evaltext import EvalText, Window, make_windows, tokens_digest
from .machine import available_ram, machine_key, rss_bytes, vram_bytes
from .measure import MeasureConfig, evaluate_against, evaluate_reference, measure_speed
from .metrics import ReferenceChunk, quality_stats
from .quantize import output_path, quantize
from .recommend import Recommendation, recommend
from .reference import load_reference, reference_path, save_reference
from .results import LabResult, LabResults, MeasureSettings
from .variants import Variant, VariantGroup, all_groups, find_variants

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabProgress:
    fraction: float  # of the whole run, 0..1
    message: str  # e.g. "Q4_0: perplexity and KL divergence"
    model_id: str | None = None


@dataclass
class LabReport:
    results: list[LabResult] = field(default_factory=list)
    reference_id: str | None = None
    recommendation: Recommendation | None = None
    cancelled: bool = False
    error: InglenookError | None = None
    created: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


ProgressListener = Callable[[LabProgress], None]
ResultListener = Callable[[LabResult], None]


class QuantLab:
    """Compare quantization variants of installed models. One per engine; thread-safe reads."""

    def __init__(
        self, registry: ModelRegistry, store: Store, paths: Paths, load_options: Callable[[], LoadOptions],
        exclusive: Callable[[Callable[[], Any]], Any] | None = None,
    ) -> None:
        """``exclusive(work)`` runs ``work`` with the machine to itself and returns its value;
        an engine passes its scheduler's ``run_exclusive``, so the lab's loads queue with chats."""
        self.registry = registry
        self.paths = paths
        self.results = LabResults(store)
        self._load_options = load_options
        self.exclusive = exclusive or (lambda work: work())
        self._machine: str | None = None

    @classmethod
    def for_engine(cls, engine) -> "QuantLab":  # noqa: ANN001 — engine.core.Engine, not imported: no cycle
        return cls(engine.registry, engine.store, engine.paths, engine.load_options, engine.scheduler.run_exclusive)

    # -- what there is ----------------------------------------------------------------

    def groups(self) -> list[VariantGroup]:
        return all_groups(self.registry)

    def variants(self, model_id: str, with_hub: bool = True) -> VariantGroup:
        return find_variants(self.registry, model_id, with_hub=with_hub)

    @property
    def machine(self) -> str:
        if self._machine is None:
            self._machine = machine_key()
        return self._machine

    def settings_for(self, eval_text: EvalText, config: MeasureConfig) -> MeasureSettings:
        options = self._load_options()
        gpu_layers = options.gpu_layers if supports_gpu_offload() else 0
        return MeasureSettings(
            threads=options.threads or physical_cores(),
            gpu_layers=gpu_layers,
            window=config.window,
            kv_cache_type=options.kv_cache_type,
            eval_digest=eval_text.digest,
            eval_tokens=config.max_eval_tokens,
            top_k=config.top_k,
        )

    def saved(self, model_id: str, eval_text: EvalText | None = None, config: MeasureConfig | None = None) -> list[LabResult]:
        """The last measurements of every variant of ``model_id`` on this machine, instantly."""
        group = self.variants(model_id, with_hub=False)
        settings = self.settings_for(eval_text or EvalText.load(), config or MeasureConfig())
        return self.results.latest([v.record for v in group.variants], self.machine, settings, group.reference.record)

    def recommendation(self, results: list[LabResult]) -> Recommendation | None:
        return recommend(results, available_ram())

    # -- running ----------------------------------------------------------------------

    def start(
        self,
        model_ids: list[str],
        create: list[str] | None = None,
        eval_text: EvalText | None = None,
        config: MeasureConfig | None = None,
        on_progress: ProgressListener | None = None,
        on_result: ResultListener | None = None,
    ) -> "LabRun":
        """Start measuring in a background thread; returns at once."""
        run = self.prepare(model_ids, create, eval_text, config, on_progress, on_result)
        run.start()
        return run

    def prepare(
        self,
        model_ids: list[str],
        create: list[str] | None = None,
        eval_text: EvalText | None = None,
        config: MeasureConfig | None = None,
        on_progress: ProgressListener | None = None,
        on_result: ResultListener | None = None,
    ) -> "LabRun":
        """A run that has not started: ``start()`` it, or ``execute()`` it on a thread you own."""
        if not model_ids:
            raise InvalidRequest("choose at least one model to measure", param="model")
        return LabRun(self, list(model_ids), [q.upper() for q in create or []], eval_text or EvalText.load(),
                      config or MeasureConfig(), on_progress, on_result)

    def run(self, model_ids: list[str], **kwargs) -> LabReport:  # noqa: ANN003
        """Measure in the calling thread (the terminal uses this; a GUI should use ``start``)."""
        run = self.start(model_ids, **kwargs)
        return run.wait()

    def load(self, record: ModelRecord, window: int, decode_tokens: int) -> LoadedModel:
        base = self._load_options()
        context = max(window, 64 + decode_tokens)
        options = LoadOptions(
            context_size=context, threads=base.threads, gpu_layers=base.gpu_layers,
            kv_cache_type=base.kv_cache_type, batch_size=min(512, context),
            every_logit=True,  # perplexity and KL read the logits after every position
        )
        return LoadedModel(record, options)


class LabRun:
    """One run in a background thread: progress callbacks, a cancel, and a final report.

    Callbacks run on the lab's thread; GUI callers forward them as queued signals.
    """

    def __init__(
        self, lab: QuantLab, model_ids: list[str], create: list[str], eval_text: EvalText,
        config: MeasureConfig, on_progress: ProgressListener | None, on_result: ResultListener | None,
    ) -> None:
        self.lab = lab
        self.model_ids = model_ids
        self.create = create
        self.eval_text = eval_text
        self.config = config
        self._on_progress = on_progress
        self._on_result = on_result
        self._cancel = threading.Event()
        self._done = threading.Event()
        self.report = LabReport()
        self._thread = threading.Thread(target=self._work, name="inglenook-lab", daemon=True)
        self._units = 1.0
        self._units_done = 0.0
        self._last_fraction = 0.0

    # -- control ----------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def execute(self) -> LabReport:
        """Run in the calling thread (a GUI's worker thread); callbacks fire on it too."""
        self._work()
        return self.report

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> LabReport:
        self._done.wait(timeout)
        return self.report

    # -- work -------------------------------------------------------------------------

    def _progress(self, within: float, message: str, model_id: str | None = None) -> None:
        if self._on_progress is None:
            return
        fraction = min(1.0, (self._units_done + max(0.0, min(1.0, within))) / self._units)
        # Estimates of the work left can shrink (a reference already on disk); never go back.
        fraction = self._last_fraction = max(self._last_fraction, fraction)
        try:
            self._on_progress(LabProgress(fraction, message, model_id))
        except Exception:  # a broken listener must not end the run
            log.exception("lab progress listener failed")

    def _work(self) -> None:
        try:
            self._run()
        except JobCancelled:
            self.report.cancelled = True
        except InglenookError as exc:
            log.warning("lab run failed: %s", exc)
            self.report.error = exc
        except Exception as exc:  # reported, never lost in a thread
            log.exception("lab run crashed")
            self.report.error = InglenookError(f"the lab run failed: {exc}")
        finally:
            if self._cancel.is_set():
                self.report.cancelled = True
            self._done.set()

    def _run(self) -> None:
        lab, config = self.lab, self.config
        # Every named file is registered before the group is formed: grouping reads the
        # registry, so a path registered only later (by ``_chosen``) would not be a member,
        # and the run's outcome would depend on which files an earlier run had registered.
        self.model_ids = [lab.registry.resolve(model_id).id for model_id in self.model_ids]
        group = lab.variants(self.model_ids[0], with_hub=False)
        chosen = self._chosen(group)
        # Each quantization and each variant is one unit; created variants are measured too.
        self._units = 2 * len(self.create) + len(chosen) + 1
        self._create_variants(group)
        group = lab.variants(self.model_ids[0], with_hub=False)
        created = [v for mid in self.report.created if (v := group.get(mid)) is not None]
        chosen = self._chosen(group) + created
        chosen = list({v.id: v for v in chosen}.values())
        reference = group.reference
        self._units = self._units_done + len(chosen) + (0 if reference in chosen else 1)
        self.report.reference_id = reference.id
        settings = lab.settings_for(self.eval_text, config)
        xp = select_backend(config.backend)

        # The reference first: its distributions are what every other variant is measured against.
        # Each load-and-measure runs as one exclusive scheduler job: a chat waits at most one variant.
        ref_chunks, windows = lab.exclusive(lambda: self._reference(reference, settings, xp, measure=reference in chosen))
        others = [v for v in chosen if v.id != reference.id]
        for variant in others:
            # partial binds this variant now; a closure would see only the loop's last one.
            lab.exclusive(partial(self._measure_variant, variant, reference, settings, xp, windows, ref_chunks))
        every = lab.results.latest([v.record for v in group.variants], lab.machine, settings, reference.record)
        chosen_ids = {v.id for v in chosen}
        self.report.results = [r for r in every if r.model_id in chosen_ids]
        # Recommend among every current measurement of the model, not only this run's.
        self.report.recommendation = lab.recommendation(every)
        self._progress(1.0, "done")

    def _chosen(self, group: VariantGroup) -> list[Variant]:
        chosen = []
        for model_id in self.model_ids:
            record = self.lab.registry.resolve(model_id)
            variant = group.get(record.id)
            if variant is None:
                raise InvalidRequest(
                    f"{record.id} is not a variant of {group.name}; compare one model's quantizations at a time",
                    param="model",
                )
            if variant not in chosen:  # two paths to one file are one model, measured once
                chosen.append(variant)
        return chosen

    def _create_variants(self, group: VariantGroup) -> None:
        source = group.reference.record
        threads = self.lab._load_options().threads
        for quant in self.create:
            target = output_path(source.path, quant, self.lab.paths.models)
            if not target.exists():
                message = f"creating {quant} from {source.quantization}"
                self._progress(0.0, message)
                quantize(source.path, target, quant, threads=threads, cancel=self._cancel,
                         progress=partial(self._progress, message=message))
            record = self.lab.registry.register_file(target, source="quantized")
            self.report.created.append(record.id)
            self._units_done += 1

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise JobCancelled("the lab run was cancelled")

    def _windows(self, model: LoadedModel) -> list[Window]:
        tokens = model.tokenize(self.eval_text.text, add_special=False, parse_special=False)
        bos = model.info.special_tokens.get("bos", (None, None))[0] if model.add_bos else None
        return make_windows(tokens, self.config.window, bos, self.config.max_eval_tokens)

    def _reference(
        self, reference: Variant, settings: MeasureSettings, xp: ArrayBackend, measure: bool
    ) -> tuple[list[ReferenceChunk], list[Window] | None]:
        cache_dir = self.lab.paths.cache / "lab"
        record = reference.record
        # The reference is loaded even when its distributions are on disk: its tokenizer
        # cuts the windows, and loading is cheap next to evaluating (the weights are mmapped).
        message = f"{record.quantization}: reference"
        self._check_cancel()
        model, result = self._load_and_time(reference, message)
        try:
            windows = self._windows(model)
            digest = tokens_digest(windows)
            path = reference_path(cache_dir, record.fingerprint, digest, self.config.top_k)
            chunks = load_reference(path, record.fingerprint, digest)
            if chunks is not None and not measure:
                self._units_done += 1
                return chunks, windows
            if measure:
                self._speed(model, windows, result, message)
            if chunks is None:
                chunks = evaluate_reference(
                    model, windows, xp, self.config, self._cancel,
                    lambda f: self._progress(0.3 + 0.7 * f, f"{message}: perplexity and top tokens", reference.id),
                )
                save_reference(path, chunks, record.fingerprint, digest)
        finally:
            model.close()
        stats = quality_stats(np.concatenate([c.nll for c in chunks]), None, None)
        result.perplexity, result.positions = stats.perplexity, stats.positions
        # The reference agrees with itself by definition.
        result.kld_mean, result.kld_p99, result.same_top = 0.0, 0.0, 1.0
        result.is_reference, result.backend = True, xp.name
        if measure:
            self._finish(result, settings)
        self._units_done += 1
        return chunks, windows

    def _load_and_time(self, variant: Variant, message: str) -> tuple[LoadedModel, LabResult]:
        record = variant.record
        self._progress(0.0, f"{message}: loading", variant.id)
        before = rss_bytes()
        model = self.lab.load(record, self.config.window, self.config.decode_tokens)
        result = LabResult(
            model_id=record.id, path=str(record.path), quantization=record.quantization,
            fingerprint=record.fingerprint, size_bytes=record.size_bytes,
            bits_per_weight=variant.bits_per_weight, load_s=model.load_seconds,
            reference_id=None, reference_fingerprint=None,
        )
        result.ram_bytes = before  # replaced by the delta once the weights have been used
        return model, result

    def _speed(self, model: LoadedModel, windows: list[Window], result: LabResult, message: str) -> None:
        self._progress(0.1, f"{message}: speed", result.model_id)
        tokens = [t for w in windows for t in w.tokens]
        speed = measure_speed(model, tokens, self.config, self._cancel)
        result.prompt_tps, result.decode_tps = speed.prompt_tps, speed.decode_tps
        # After a prompt and a decode every weight has been read: the pages are resident.
        result.ram_bytes = max(0, rss_bytes() - (result.ram_bytes or 0))
        if model.options.gpu_layers != 0 and supports_gpu_offload():
            result.vram_bytes = vram_bytes()
        self._progress(0.3, f"{message}: speed measured", result.model_id)

    def _measure_variant(
        self, variant: Variant, reference: Variant, settings: MeasureSettings, xp: ArrayBackend,
        windows: list[Window] | None, ref_chunks: list[ReferenceChunk],
    ) -> None:
        self._check_cancel()
        message = variant.quantization
        model, result = self._load_and_time(variant, message)
        try:
            mine = self._windows(model)
            if windows is not None and tokens_digest(mine) != tokens_digest(windows):
                raise InvalidRequest(f"{variant.id} tokenizes the text differently from {reference.id}")
            self._speed(model, mine, result, message)
            comparison = evaluate_against(
                model, mine, ref_chunks, xp, self._cancel,
                lambda f: self._progress(0.3 + 0.7 * f, f"{message}: perplexity and KL divergence", variant.id),
            )
        finally:
            model.close()
        stats = quality_stats(comparison.nll, comparison.kld, comparison.same_top)
        result.perplexity, result.positions = stats.perplexity, stats.positions
        result.kld_mean, result.kld_p99, result.same_top = stats.kld_mean, stats.kld_p99, stats.same_top
        result.reference_id, result.reference_fingerprint = reference.id, reference.record.fingerprint
        result.backend = xp.name
        self._finish(result, settings)
        self._units_done += 1

    def _finish(self, result: LabResult, settings: MeasureSettings) -> None:
        result.measured_at = time.time()
        if result.is_reference:
            result.reference_id, result.reference_fingerprint = result.model_id, result.fingerprint
        self.lab.results.save(result, self.lab.machine, settings)
        if self._on_result is not None:
            try:
                self._on_result(result)
            except Exception:
                log.exception("lab result listener failed")

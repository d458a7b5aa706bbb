"""The engine's front door: wires paths, store, settings, registry, scheduler and chats.

Front ends (terminal, GUI, HTTP server) construct one ``Engine`` and use its parts.
There are no module-level singletons: tests open as many engines as they like, each
under its own ``INGLENOOK_HOME``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from ..base import InglenookError, ModelLoadError, ModelNotFound, ModelRecord
from ..chat import BackgroundWork, ChatService
from ..models import STARTER_ID, AdapterRegistry, ModelRegistry
from ..runtime import LoadOptions, detect_machine
from ..scheduling import (
    ChatModels, LoadPlan, Scheduler, budget_from_setting, context_for, context_loader,
    estimate_resident_bytes, plan_load,
)
from ..store import MIB, NOMINAL_AUTO_CONTEXT, CacheUsage, Paths, PrefixCache, Settings, Store
from ..usage import UsageRecorder
from .crashguard import CrashGuard

log = logging.getLogger(__name__)


class Engine:
    def __init__(self, paths: Paths | None = None, scan: bool = True, crash_guard: CrashGuard | None = None,
                 full_check: bool = False, sequences: int | None = None) -> None:
        """``crash_guard`` (one per process, started by the front end) hears what the engine
        is doing, so a native crash can be explained on the next start. ``full_check``: the
        store's whole integrity check at open (the app's start), not the quick one.
        ``sequences``: answers each loaded model serves at once; None follows the
        ``parallel_sequences`` setting (the window, its background work and the API share a
        model). A terminal chat is one conversation and passes 1: a KV stream per sequence is
        memory and load time that a lone chat never uses."""
        self.sequences = sequences
        self.paths = (paths or Paths.default()).ensure()
        self.store = Store(self.paths.database, full_check=full_check)
        self.settings = Settings.load(self.store)
        self.registry = ModelRegistry(self.store, self.paths, self.settings.models_dirs)
        if scan:
            self.registry.refresh()
        self.adapters = AdapterRegistry(self.store)  # imported LoRA adapters (lora_registry)
        self.cache = PrefixCache(
            self.paths.state_cache,
            disk_budget_bytes=lambda: self.settings.cache_budget_mb * MIB,
            ram_budget_bytes=lambda: self.settings.cache_ram_mb * MIB,
        )
        self.scheduler = Scheduler(
            resolve=self.registry.resolve,
            load_options=self.load_options,
            idle_unload_s=self.settings.idle_unload_s,
            cache=self.cache,
            activity=crash_guard.doing if crash_guard is not None else None,
            prefill_chunk=self.settings.prefill_chunk,
            # Each model gets its own context setting, or "auto" from its size and free memory.
            loader=context_loader(lambda: self.settings),
            memory_budget=lambda: budget_from_setting(self.settings.memory_budget_mb),
            estimate=self._resident_estimate,
        )
        # A model llama.cpp refuses is marked with the reason (list, Models page) until it loads.
        self.scheduler.add_listener(self._record_load_outcome)
        # Every generation's counts (never its content), written off the scheduler's thread.
        self.usage = UsageRecorder(self.store, lambda: self.settings.usage_retention_days)
        self.scheduler.add_finished_observer(self.usage.observe)
        self.chats = ChatService(self.store, self.scheduler, self.default_model_id, cache=self.cache, usage=self.usage,
                                 adapters=self.adapters)
        # Titles on the smallest chat model, only while nothing else runs.
        self.background = BackgroundWork(self.scheduler, self.store, lambda: self.settings, ChatModels(self.registry))
        self.chats.background = self.background
        self.cache.prune_conversations({c.id for c in self.store.list_conversations()})

    def _record_load_outcome(self, model_id: str, state: str, detail: object) -> None:
        if state == "failed":
            self.registry.mark_problem(model_id, str(detail))
        elif state == "loaded":
            self.registry.mark_problem(model_id, None)

    def _resident_estimate(self, record: ModelRecord, options: LoadOptions) -> int:
        """What ``record`` will take once loaded, at the context it will be loaded with."""
        context = context_for(record, self.settings, options)
        return estimate_resident_bytes(record, dataclasses.replace(options, context_size=context))

    def load_plan(self, model_id: str) -> LoadPlan:
        """What loading ``model_id`` would take now (context, sequences, cache type, memory),
        for a front end to show before it loads. Reads the model's header: not on a GUI thread."""
        return plan_load(self.registry.resolve(model_id), self.settings, self.load_options())

    def load_plans(self) -> dict[str, LoadPlan]:
        """``load_plan`` for every installed model whose header can be read."""
        plans: dict[str, LoadPlan] = {}
        options = self.load_options()
        machine = detect_machine()  # once for the whole list, not twice per model
        for record in self.registry.list():
            try:
                plans[record.id] = plan_load(record, self.settings, options, machine)
            except (InglenookError, OSError) as exc:
                log.info("no load plan for %s: %s", record.id, exc)
        return plans

    def load_options(self) -> LoadOptions:
        s = self.settings
        return LoadOptions(
            context_size=s.context_size or NOMINAL_AUTO_CONTEXT, threads=s.threads, gpu_layers=s.gpu_layers, kv_cache_type=s.kv_cache_type,
            parallel=max(1, self.sequences or s.parallel_sequences),
            speculative=s.speculative, draft_model=self._draft_record(),
        )

    def _draft_record(self) -> ModelRecord | None:
        """The draft model's record when speculative decoding uses one (the load says if it is missing)."""
        s = self.settings
        if s.speculative != "draft":
            return None
        if not s.draft_model:
            return None  # the load explains that a draft model must be picked
        try:
            return self.registry.resolve(s.draft_model)
        except ModelNotFound:
            raise ModelLoadError(f"the draft model {s.draft_model} is not installed; pick another one "
                                 "in Settings → Performance, or switch speculative decoding to prompt lookup") from None

    def update_settings(self, **changes: object) -> Settings:
        self.settings = self.settings.save(self.store, **changes)
        self.scheduler.idle_unload_s = self.settings.idle_unload_s
        self.scheduler.prefill_chunk = self.settings.prefill_chunk
        if "cache_budget_mb" in changes or "cache_ram_mb" in changes:
            self.cache.enforce_budget()
        return self.settings

    def cache_usage(self) -> CacheUsage:
        """Space the prompt cache uses on disk and in RAM, and both budgets (Settings page)."""
        return self.cache.usage()

    def clear_cache(self) -> int:
        """Delete every saved prompt state (Settings' Clear button); returns bytes freed."""
        return self.cache.clear()

    def default_model_id(self) -> str:
        """The configured default, else the starter model, else the first installed model."""
        models = self.registry.list()
        ids = {m.id for m in models}
        if self.settings.default_model and self.settings.default_model in ids:
            return self.settings.default_model
        if STARTER_ID in ids:
            return STARTER_ID
        if models:
            # A model llama.cpp refused is not a sensible default while another one works.
            return next((m.id for m in models if m.usable), models[0].id)
        raise ModelNotFound("no models are installed; `inglenook pull REPO` downloads one")

    def close(self) -> None:
        self.background.close()
        self.scheduler.close()
        self.usage.close()  # the last answers' counts reach the store before it closes
        self.cache.close()  # queued state files reach the disk before the process ends
        self.store.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def open_engine(home: Path | None = None) -> Engine:
    return Engine(Paths.under(home) if home else None)

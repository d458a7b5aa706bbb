"""The engine's front door: wires paths, store, settings, registry, scheduler and chats.

Front ends (terminal, GUI, HTTP server) construct one ``Engine`` and ask it: its methods are
what they may do (load a model, list or import models, read usage, hear titles), and the
parts they may hold are the public ones — ``chats``, ``adapters``, ``paths`` and the
``settings`` value. The scheduler, store, registry, cache, usage recorder and background
work stay attributes for the engine's own packages and tests, but a front end never reaches
through them (``tests/unit/test_import_boundaries.py``), so they can be rebuilt behind these
methods. The HTTP API sees the engine through a Protocol (``api/shared/api_engine.py``).
There are no module-level singletons: tests open as many engines as they like, each
under its own ``INGLENOOK_HOME``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import InglenookError, Job, JobHandle, ModelListener, ModelLoadError, ModelNotFound, ModelRecord
from ..chat import BackgroundWork, ChatService
from ..models import (
    STARTER_ID, AdapterRegistry, FoundModel, ImportResult, ModelRegistry, import_found, import_path,
    scan_known_places, with_alias,
)
from ..runtime import LoadOptions, detect_machine
from ..scheduling import (
    ChatModels, LoadPlan, Scheduler, budget_from_setting, context_for, context_loader,
    estimate_resident_bytes, plan_load,
)
from ..speech import Speech
from ..tools import McpManager
from ..store import (
    MIB, NOMINAL_AUTO_CONTEXT, CacheUsage, Conversation, Message, Paths, PrefixCache, Settings, Store,
)
from ..usage import UsageRecorder, UsageSummary
from .crashguard import CrashGuard

if TYPE_CHECKING:  # the hub's modules load only when an encoder is offered (not on `inglenook run`'s path)
    from ..documents import FoundPassage
    from ..models import DownloadProgress, EncoderOffer
    from ..tools import McpServerConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineHealth:
    """What ``/health`` reports: the models in memory and loading, the queue, and the
    longest-running unit of work now (``busy_s`` and ``doing``; None when the worker is idle)."""

    loaded_models: list[str]
    loading_models: list[str]
    queue_depth: int
    busy_s: float | None = None
    doing: str | None = None


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
                                 adapters=self.adapters, images_folder=self.paths.images)
        # Which installed models can chat (template read once per file): background work and
        # the API's routing alias ask the same one.
        self.chat_models = ChatModels(self.registry)
        # Titles on the smallest chat model, only while nothing else runs.
        self.background = BackgroundWork(self.scheduler, self.store, lambda: self.settings, self.chat_models)
        self._speech: Speech | None = None
        self._speech_lock = threading.Lock()
        self.chats.background = self.background
        self.chats.resolve = self.registry.resolve  # a tool turn reads the model's template
        self.chats.planned_context = self.planned_context  # documents are placed against it
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

    def planned_context(self, model_id: str) -> int:
        """Tokens per answer ``model_id`` would load with now (its setting, the app's, or the
        automatic choice for this machine). Reads the model's header: not on a GUI thread."""
        return context_for(self.registry.resolve(model_id), self.settings, self.load_options())

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

    def base_models(self) -> set[str]:
        """Installed models whose file carries no chat template (base models, trained to continue
        text): a chat with one is rendered with the fallback template (ChatML,
        ``text/chat_template.py``), which the model never saw. Reads headers (cached per file version): not on a GUI thread."""
        return {record.id for record in self.registry.list()
                if record.usable and not self.chat_models.can_chat(record)}

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

    @property
    def speech(self) -> Speech:
        """Speech to text and text to speech (``speech/``), made on first use: an engine that
        never hears or speaks loads neither CTranslate2 nor a voice."""
        with self._speech_lock:
            if self._speech is None:
                self._speech = Speech(folder=self.paths.models / "speech")
            return self._speech

    @property
    def tools(self) -> McpManager:
        """The MCP servers (configs, connections): the chats' and the API's."""
        return self.chats.tools

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

    # -- what front ends and the API ask ---------------------------------------------------
    # Thin on purpose: each says what a caller may do, so the window, the CLI and the API
    # never hold the scheduler, store or registry themselves.

    def override_settings(self, **changes: Any) -> Settings:
        """``changes`` for this process only (``serve --context``): the saved settings stay."""
        self.settings = dataclasses.replace(self.settings, **changes)
        return self.settings

    def models(self) -> list[ModelRecord]:
        """The installed models."""
        return self.registry.list()

    def model(self, model_id: str) -> ModelRecord:
        """The installed model with exactly this id (``ModelNotFound`` when none)."""
        return self.registry.get(model_id)

    def resolve_model(self, name: str) -> ModelRecord:
        """A model by id, by id without its quantization when unambiguous, or by file path."""
        return self.registry.resolve(name)

    def owns_model_file(self, record: ModelRecord) -> bool:
        """Whether removing ``record`` deletes its file (Inglenook put or found it in its folder)."""
        return self.registry.owns_file(record)

    def remove_model(self, model_id: str) -> ModelRecord:
        """Forget a model; its file is deleted only when ``owns_model_file`` says so."""
        return self.registry.remove(model_id)

    def import_path(self, path: Path | str) -> ImportResult:
        """Register a file, or every GGUF under a folder, in place (may hash large files)."""
        return import_path(self.registry, path)

    def import_found(self, found: list[FoundModel]) -> ImportResult:
        """Register models found in other apps' folders (``find_known_places``), in place."""
        return import_found(self.registry, found)

    def scan_known_places(self) -> ImportResult:
        """Find and register the models of the Hugging Face cache, LM Studio and Ollama."""
        return scan_known_places(self.registry)

    def rescan_models(self) -> list[ModelRecord]:
        """Register the models of the folders in the ``models_dirs`` setting (after it changed)."""
        self.registry.extra_dirs = [Path(d) for d in self.settings.models_dirs]
        return self.registry.refresh()

    def add_alias(self, name: str, model: str) -> dict[str, str]:
        """Save the alias ``name`` → ``model`` (resolved to an installed id); returns every alias."""
        aliases = with_alias(self.settings, self.registry, name, model)
        self.update_settings(model_aliases=aliases)
        return aliases

    def load_model(self, model_id: str) -> JobHandle:
        """Load ``model_id`` ahead of its first request; returns once the load is queued."""
        return self.scheduler.load(model_id)

    def submit_many(self, jobs: Iterable[Job]) -> list[JobHandle]:
        """Queue ``jobs`` together (all or none, admitted in the same pass)."""
        return self.scheduler.submit_many(jobs)

    def add_model_listener(self, listener: ModelListener) -> None:
        """``listener(model_id, state, detail)`` hears loads and unloads (on the scheduler's thread)."""
        self.scheduler.add_listener(listener)

    def remove_model_listener(self, listener: ModelListener) -> None:
        self.scheduler.remove_listener(listener)

    def loaded_model_ids(self) -> list[str]:
        """The models in memory, most recently used first. Never waits for a load."""
        return [model.record.id for model in self.scheduler.loaded_models()]

    def loaded_contexts(self) -> dict[str, int]:
        """Model id -> context size of each model loaded for chat (an embedding load runs one
        short sequence, so it says nothing about the context a chat gets)."""
        return {model.record.id: model.n_ctx for model in self.scheduler.loaded_models()
                if not model.options.embeddings}

    def health(self) -> EngineHealth:
        """Loaded and loading models, the queue, and how long the current unit of work has run."""
        scheduler = self.scheduler
        beat = scheduler.heartbeat()
        return EngineHealth(
            loaded_models=self.loaded_model_ids(), loading_models=scheduler.loading_models(),
            queue_depth=scheduler.queue_depth,
            busy_s=beat.busy_s if beat is not None else None, doing=beat.doing if beat is not None else None,
        )

    def usage_summary(self, days: int) -> UsageSummary:
        """Token usage of the last ``days`` days with their prices (reads the store)."""
        return UsageSummary.read(self.store, self.settings, days)

    @property
    def database_set_aside(self) -> Path | None:
        """Where the damaged database was kept when it was replaced at open; None when it was sound."""
        return self.store.set_aside

    @property
    def database_salvaged(self) -> dict[str, int]:
        """Rows copied out of a damaged database, per table (empty when nothing was salvaged)."""
        return dict(self.store.salvaged or {})

    def conversation(self, conversation_id: int) -> Conversation:
        return self.store.get_conversation(conversation_id)

    def latest_conversation(self) -> Conversation | None:
        """The conversation with the most recent activity, if any."""
        return self.store.latest_conversation()

    def update_conversation(self, conversation_id: int, **changes: Any) -> Conversation:
        """Change a conversation's stored fields (``model_id``, ``system_prompt``, ``title``…)."""
        return self.store.update_conversation(conversation_id, **changes)

    def messages(self, conversation_id: int) -> list[Message]:
        """A conversation's messages, oldest first."""
        return self.store.messages(conversation_id)

    def add_title_listener(self, listener: Callable[[int, str], None]) -> None:
        """``listener(conversation_id, title)`` hears each title written in the background
        (on the background worker's thread)."""
        self.background.add_title_listener(listener)

    def add_summary_listener(self, listener: Callable[[int, str], None]) -> None:
        """``listener(conversation_id, summary)`` hears each summary written in the background."""
        self.background.add_summary_listener(listener)

    def conversation_summaries(self) -> dict[int, str]:
        """Conversation id -> its background summary (reads the store)."""
        return self.background.summaries.all()

    def request_index(self) -> None:
        """Make the messages not yet searchable by meaning searchable, once the machine is idle."""
        self.background.request_index()

    def search_indexing(self) -> bool:
        """True while messages are being made searchable by meaning (a search may miss them)."""
        return self.background.indexing

    def encoder_offer(self, online: bool = True) -> EncoderOffer | None:
        """None when an embedding model is installed (search uses the smallest one); else the
        recommended one (repo, file, size in bytes). ``online``: its size from the hub's file
        listing (a network call: not on a GUI thread), falling back to the known size when the
        hub cannot be reached; False: the known size, no network."""
        from ..models import downloader_for, installed_encoder, known_offer, recommended_encoder  # noqa: PLC0415

        if installed_encoder(self.registry) is not None:
            return None
        return recommended_encoder(downloader_for(self).hub) if online else known_offer()

    def download_encoder(self, offer: EncoderOffer | None = None, *,
                         progress: Callable[[DownloadProgress], None] | None = None,
                         cancel: threading.Event | None = None) -> ModelRecord:
        """Download and register the recommended encoder (``offer``, else the known one) as
        any other download: resumable, sha256-checked, ``progress`` on this thread, ``cancel``
        raising ``JobCancelled``. Blocks: call it from a worker. Search picks it at once."""
        from ..models import downloader_for, known_offer  # noqa: PLC0415 — the hub, only when asked

        offer = offer or known_offer()
        return downloader_for(self).download(offer.repo, offer.option, commit=offer.commit,
                                             progress=progress, cancel=cancel)

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

    # -- what the window asks instead of reaching through ``chats`` (app/services/app_engine.py) --

    def name_client(self, client: str) -> None:
        """Whose answers the chats are in the usage table ("window" for the desktop app)."""
        self.chats.client = client

    def tool_servers(self) -> list[McpServerConfig]:
        """The MCP tool servers configured (read from the store)."""
        return self.chats.tools.servers.all()

    def remote_models(self) -> list[ModelRecord]:
        """The remote engines' models (asks each engine: blocks on the network)."""
        return self.chats.remotes.records()

    def passages_used(self, conversation_id: int) -> list[FoundPassage] | None:
        """The document passages the last answer in ``conversation_id`` was given, if any."""
        return self.chats.passages_used.get(conversation_id)

    def close(self) -> None:
        if self._speech is not None:
            self._speech.close()  # the voices' helper processes end with the engine
        self.chats.tools.close()  # MCP servers' processes end with the engine
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

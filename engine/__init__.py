"""Inglenook's engine: inference, models, cache, storage and the HTTP API. No Qt.

This module is the engine's public API: front ends (the GUI in ``inglenook.app``, the
terminal in ``inglenook``) import from here and from nowhere deeper, so the rooms behind
it can be rebuilt without touching them (``tests/unit/test_import_boundaries.py`` holds
them to it). ``__all__`` lists what they may use: the ``Engine`` and the types they pass
to it or get back from it.

Names resolve lazily (PEP 562): ``import inglenook.engine`` loads nothing heavy, and each
name imports its module on first use. So ``inglenook --help`` stays fast, FastAPI loads
only when the API server starts, numpy and the lab only when the lab opens; llama.cpp is
never imported here (engine modules import it inside functions).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Which module defines each public name. Keep in step with the TYPE_CHECKING block below
# (a test compares the two): that block is what type checkers and IDEs read.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "core": ("Engine", "open_engine"),
    "chat": ("ChatService", "ConversationSearch", "Turn", "title_from"),
    "scheduler": ("EmbedJob", "Embeddings", "ExclusiveJob", "GenerateJob", "JobHandle", "ModelListener", "Scheduler"),
    # A generation's events live in the light generation_events (runtime re-exports them):
    # a front end names them without loading the runtime (the loader, Jinja, the fit estimate).
    "generation_events": ("Chunk", "Finished", "GenerationEvent", "PromptProgress", "TokenLogprob", "Timings", "Usage"),
    "runtime": ("LoadOptions",),
    "sampling": ("SamplingParams",),
    "errors": (
        "ContextLengthExceeded", "ConversationNotFound", "DownloadError", "InglenookError", "InvalidRequest",
        "JobCancelled", "ModelLoadError", "ModelNotFound", "PortInUse", "QueueFull", "ServerError",
        "StateFileInvalid", "StorageUnavailable", "StoreError", "UnsupportedCpu",
    ),
    "store": ("Conversation", "Message", "Store"),
    "registry": ("ModelRecord", "ModelRegistry"),
    "settings": ("Settings",),
    "aliases": ("validated_name", "with_alias", "without_alias"),
    "client_configs": ("CLIENTS", "ClientConfigError", "ClientSetup", "Endpoint", "client_setup", "write_client_config"),
    "paths": ("DiskState", "Paths", "disk_state"),
    "cache": ("CacheUsage",),
    "crashguard": ("CrashGuard", "LastCrash"),
    "diagnostics": ("DoctorReport", "SelfTest", "collect"),
    "fit": ("CPU_ONLY", "FITS_GPU", "PARTIAL", "TOO_LARGE", "FitEstimate", "GpuMemory", "MachineMemory", "detect_machine"),
    "model_context": ("LoadPlan",),
    "hub": ("HubClient", "HubModel", "QuantOption", "RepoListing", "fit_options", "quant_from_name", "resolve_token"),
    "downloads": ("DownloadProgress", "Downloader", "PendingDownload", "downloader_for"),
    "importers": ("FoundModel", "ImportResult", "find_known_places", "import_found", "import_path", "scan_known_places"),
    "gguf": ("GGUFInfo", "read_gguf"),
    "starter": ("STARTER_ID", "find_starter_model"),
    "units": ("human_count", "human_duration", "human_size"),
    "reasoning": ("Split", "split_whole"),
    "atomic": ("atomic_write_bytes", "atomic_write_text"),
    "server": ("ApiServer",),
    "api_keys": ("ApiKeyRecord", "ApiKeys", "KeyLimits"),
    "tls": ("TlsFiles",),
    "remote": ("RemoteEndpoint", "RemoteEngine", "RemoteEngineError"),
    "remote_catalogue": ("REMOTE_SOURCE", "RemoteCatalogue", "keyring_available"),
    "rpc": ("RPC_NO_AUTH_WARNING", "RpcError", "Worker", "check_worker_host", "parse_workers", "worker_command",
            "worker_env", "worker_reachable"),
    "rpc_setup": ("attach_rpc_workers", "start_rpc_host"),
    "pricing": ("DEFAULT_PRICES", "MachineCost", "Price", "validated_prices"),
    "usage": ("TokenCounts", "UsageReport", "checked_days"),
    "usage_summary": ("UsageSummary", "machine_cost_of"),
    "lora": ("MAX_SCALE", "AdapterError"),
    "lora_registry": ("AdapterImport", "AdapterRecord", "AdapterRegistry"),
    "lora_hub": ("pull_adapters",),
    "lab": ("LabProgress", "LabReport", "LabResult", "LabRun", "QuantLab", "Variant", "VariantGroup"),
    "lab.evaltext": ("EvalText",),
    "lab.measure": ("MeasureConfig",),
    "lab.recommend": ("Recommendation",),
}

_MODULE_OF: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from .api_keys import ApiKeyRecord as ApiKeyRecord, ApiKeys as ApiKeys, KeyLimits as KeyLimits
    from .atomic import atomic_write_bytes as atomic_write_bytes, atomic_write_text as atomic_write_text
    from .cache import CacheUsage as CacheUsage
    from .chat import (
        ChatService as ChatService,
        ConversationSearch as ConversationSearch,
        Turn as Turn,
        title_from as title_from,
    )
    from .core import Engine as Engine, open_engine as open_engine
    from .crashguard import CrashGuard as CrashGuard, LastCrash as LastCrash
    from .diagnostics import DoctorReport as DoctorReport, SelfTest as SelfTest, collect as collect
    from .downloads import (
        Downloader as Downloader,
        DownloadProgress as DownloadProgress,
        PendingDownload as PendingDownload,
        downloader_for as downloader_for,
    )
    from .errors import (
        ContextLengthExceeded as ContextLengthExceeded,
        ConversationNotFound as ConversationNotFound,
        DownloadError as DownloadError,
        InglenookError as InglenookError,
        InvalidRequest as InvalidRequest,
        JobCancelled as JobCancelled,
        ModelLoadError as ModelLoadError,
        ModelNotFound as ModelNotFound,
        PortInUse as PortInUse,
        QueueFull as QueueFull,
        ServerError as ServerError,
        StateFileInvalid as StateFileInvalid,
        StorageUnavailable as StorageUnavailable,
        StoreError as StoreError,
        UnsupportedCpu as UnsupportedCpu,
    )
    from .model_context import LoadPlan as LoadPlan
    from .fit import (
        CPU_ONLY as CPU_ONLY,
        FITS_GPU as FITS_GPU,
        PARTIAL as PARTIAL,
        TOO_LARGE as TOO_LARGE,
        FitEstimate as FitEstimate,
        GpuMemory as GpuMemory,
        MachineMemory as MachineMemory,
        detect_machine as detect_machine,
    )
    from .gguf import GGUFInfo as GGUFInfo, read_gguf as read_gguf
    from .hub import (
        HubClient as HubClient,
        HubModel as HubModel,
        QuantOption as QuantOption,
        RepoListing as RepoListing,
        fit_options as fit_options,
        quant_from_name as quant_from_name,
        resolve_token as resolve_token,
    )
    from .importers import (
        FoundModel as FoundModel,
        ImportResult as ImportResult,
        find_known_places as find_known_places,
        import_found as import_found,
        import_path as import_path,
        scan_known_places as scan_known_places,
    )
    from .lab import (
        LabProgress as LabProgress,
        LabReport as LabReport,
        LabResult as LabResult,
        LabRun as LabRun,
        QuantLab as QuantLab,
        Variant as Variant,
        VariantGroup as VariantGroup,
    )
    from .lab.evaltext import EvalText as EvalText
    from .lora import MAX_SCALE as MAX_SCALE, AdapterError as AdapterError
    from .lora_registry import (
        AdapterImport as AdapterImport,
        AdapterRecord as AdapterRecord,
        AdapterRegistry as AdapterRegistry,
    )
    from .lora_hub import pull_adapters as pull_adapters
    from .lab.measure import MeasureConfig as MeasureConfig
    from .lab.recommend import Recommendation as Recommendation
    from .paths import DiskState as DiskState, Paths as Paths, disk_state as disk_state
    from .registry import ModelRecord as ModelRecord, ModelRegistry as ModelRegistry
    from .generation_events import (
        Chunk as Chunk,
        Finished as Finished,
        GenerationEvent as GenerationEvent,
        PromptProgress as PromptProgress,
        Timings as Timings,
        TokenLogprob as TokenLogprob,
        Usage as Usage,
    )
    from .runtime import LoadOptions as LoadOptions
    from .sampling import SamplingParams as SamplingParams
    from .scheduler import (
        EmbedJob as EmbedJob,
        Embeddings as Embeddings,
        ExclusiveJob as ExclusiveJob,
        GenerateJob as GenerateJob,
        JobHandle as JobHandle,
        ModelListener as ModelListener,
        Scheduler as Scheduler,
    )
    from .server import ApiServer as ApiServer
    from .remote import (
        RemoteEndpoint as RemoteEndpoint,
        RemoteEngine as RemoteEngine,
        RemoteEngineError as RemoteEngineError,
    )
    from .remote_catalogue import (
        REMOTE_SOURCE as REMOTE_SOURCE,
        RemoteCatalogue as RemoteCatalogue,
        keyring_available as keyring_available,
    )
    from .rpc import (
        RPC_NO_AUTH_WARNING as RPC_NO_AUTH_WARNING,
        RpcError as RpcError,
        Worker as Worker,
        check_worker_host as check_worker_host,
        parse_workers as parse_workers,
        worker_command as worker_command,
        worker_env as worker_env,
        worker_reachable as worker_reachable,
    )
    from .rpc_setup import attach_rpc_workers as attach_rpc_workers, start_rpc_host as start_rpc_host
    from .settings import Settings as Settings
    from .tls import TlsFiles as TlsFiles
    from .pricing import (
        DEFAULT_PRICES as DEFAULT_PRICES,
        MachineCost as MachineCost,
        Price as Price,
        validated_prices as validated_prices,
    )
    from .usage import TokenCounts as TokenCounts, UsageReport as UsageReport, checked_days as checked_days
    from .usage_summary import UsageSummary as UsageSummary, machine_cost_of as machine_cost_of
    from .aliases import validated_name as validated_name, with_alias as with_alias, without_alias as without_alias
    from .client_configs import (
        CLIENTS as CLIENTS,
        ClientConfigError as ClientConfigError,
        ClientSetup as ClientSetup,
        Endpoint as Endpoint,
        client_setup as client_setup,
        write_client_config as write_client_config,
    )
    from .starter import STARTER_ID as STARTER_ID, find_starter_model as find_starter_model
    from .store import Conversation as Conversation, Message as Message, Store as Store
    from .reasoning import Split as Split, split_whole as split_whole
    from .units import human_count as human_count, human_duration as human_duration, human_size as human_size

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

from typing import TYPE_CHECKING

from .base import lazy_door

# Which package's door serves each public name (each package's own ``_EXPORTS`` says which of
# its modules defines it). Keep in step with the TYPE_CHECKING block below (a test compares
# the two): that block is what type checkers and IDEs read.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "core": (
        "CrashGuard", "DoctorReport", "Engine", "LastCrash", "SelfTest", "attach_rpc_workers", "collect",
        "open_engine", "start_rpc_host",
    ),
    "chat": (
        "Assistant", "AssistantApplied", "AssistantLibrary", "CallFinished", "CallProposed", "CallRecord", "ChatService",
        "ConversationSearch", "RoundFinished", "RoundStats", "ToolTurn", "ToolTurnEvent", "Turn", "title_from",
    ),
    "scheduling": ("LoadPlan", "Scheduler"),
    "documents": ("AUDIO_KIND", "Added", "CollectionFile", "Document", "Limits", "Recordings", "convert_bytes_safely",
                  "convert_file", "is_recording_name", "parse_clock", "read_recording"),
    "base": (
        "AdapterError", "Chunk", "ContextLengthExceeded", "ConversationNotFound", "DocumentError", "DownloadError",
        "EmbedJob", "Embeddings", "ExclusiveJob", "Finished", "GGUFInfo", "GenerateJob", "GenerationEvent",
        "ImageInput", "InglenookError", "InvalidRequest", "JobCancelled", "JobHandle", "MAX_SCALE", "ModelListener",
        "ModelLoadError", "ModelNotFound", "ModelRecord", "PortInUse", "PromptProgress", "QueueFull",
        "SamplingParams", "ServerError", "StateFileInvalid", "StorageUnavailable", "StoreError", "Timings",
        "TokenLogprob", "UnsupportedCpu", "Usage", "atomic_write_bytes", "atomic_write_text", "human_count",
        "human_duration", "human_size", "decode_image", "find_projector", "read_gguf", "read_image_file",
    ),
    "runtime": (
        "CPU_ONLY", "FITS_GPU", "FitEstimate", "GpuMemory", "LoadOptions", "MachineMemory", "PARTIAL",
        "TOO_LARGE", "detect_machine",
    ),
    "text": ("Split", "split_whole"),
    "speech": (
        "AudioError", "SPEECH_FORMATS", "Speech", "SpeechModel", "TRANSCRIPT_FORMATS", "Transcript",
        "TranscriptionOptions", "VoiceUnavailable", "encode_pcm", "render_transcript",
        "PLAYBACK_RATE", "PcmReader",
    ),
    "store": (
        "CacheUsage", "Conversation", "DiskState", "Message", "Paths", "Settings", "Store", "StoredImage",
        "disk_state",
    ),
    "models": (
        "VOICES_REPO", "SpeechDownload", "piper_voices", "pull_speech", "search_whisper", "voice_sample",
        "whisper_download", "AdapterImport", "AdapterRecord", "AdapterRegistry", "DownloadProgress", "Downloader", "EncoderOffer", "FoundModel",
        "HubClient", "HubModel", "ImportResult", "ModelRegistry", "PendingDownload", "QuantOption",
        "RepoListing", "STARTER_ID", "downloader_for", "find_known_places", "find_starter_model",
        "fit_options", "import_found", "import_path", "pull_adapters", "quant_from_name", "resolve_token",
        "scan_known_places", "validated_name", "with_alias", "without_alias",
    ),
    "usage": (
        "DEFAULT_PRICES", "MachineCost", "Price", "TokenCounts", "UsageReport", "UsageSummary",
        "checked_days", "machine_cost_of", "validated_prices",
    ),
    "remote": (
        "REMOTE_SOURCE", "RPC_NO_AUTH_WARNING", "RemoteCatalogue", "RemoteEndpoint", "RemoteEngine",
        "RemoteEngineError", "RpcError", "Worker", "check_worker_host", "keyring_available",
        "parse_workers", "worker_command", "worker_env", "worker_reachable",
    ),
    "api": (
        "ApiServer", "CLIENTS", "ClientConfigError", "ClientSetup", "Endpoint", "TlsFiles", "client_setup",
        "write_client_config",
    ),
    "api.shared": ("ApiKeyRecord", "ApiKeys", "KeyLimits"),
    "tools": (
        "DEFAULT_MAX_ROUNDS", "CallRequest", "Decision", "McpError", "McpManager", "McpServerConfig", "McpServers", "McpTool",
        "ServerState", "ToolResult", "other_app_configs", "parse_mcp_servers", "parse_pairs", "read_mcp_file",
    ),
    "lab": (
        "EvalText", "LabProgress", "LabReport", "LabResult", "LabRun", "MeasureConfig", "QuantLab",
        "Recommendation", "Variant", "VariantGroup",
    ),
}

_MODULE_OF: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .api import (
        CLIENTS as CLIENTS, ApiServer as ApiServer, ClientConfigError as ClientConfigError,
        ClientSetup as ClientSetup, Endpoint as Endpoint, TlsFiles as TlsFiles, client_setup as client_setup,
        write_client_config as write_client_config,
    )
    from .api.shared import ApiKeyRecord as ApiKeyRecord, ApiKeys as ApiKeys, KeyLimits as KeyLimits
    from .base import (
        MAX_SCALE as MAX_SCALE, AdapterError as AdapterError, Chunk as Chunk,
        ContextLengthExceeded as ContextLengthExceeded, ConversationNotFound as ConversationNotFound,
        DocumentError as DocumentError, DownloadError as DownloadError, EmbedJob as EmbedJob, Embeddings as Embeddings,
        ExclusiveJob as ExclusiveJob, Finished as Finished, GGUFInfo as GGUFInfo, GenerateJob as GenerateJob,
        GenerationEvent as GenerationEvent, ImageInput as ImageInput, InglenookError as InglenookError,
        InvalidRequest as InvalidRequest, JobCancelled as JobCancelled, JobHandle as JobHandle,
        ModelListener as ModelListener, ModelLoadError as ModelLoadError, ModelNotFound as ModelNotFound,
        ModelRecord as ModelRecord, PortInUse as PortInUse, PromptProgress as PromptProgress,
        QueueFull as QueueFull, SamplingParams as SamplingParams, ServerError as ServerError,
        StateFileInvalid as StateFileInvalid, StorageUnavailable as StorageUnavailable,
        StoreError as StoreError, Timings as Timings, TokenLogprob as TokenLogprob,
        UnsupportedCpu as UnsupportedCpu, Usage as Usage, atomic_write_bytes as atomic_write_bytes,
        atomic_write_text as atomic_write_text, human_count as human_count, human_duration as human_duration,
        human_size as human_size, decode_image as decode_image, find_projector as find_projector,
        read_gguf as read_gguf, read_image_file as read_image_file,
    )
    from .chat import (
        Assistant as Assistant, AssistantApplied as AssistantApplied, AssistantLibrary as AssistantLibrary,
        CallFinished as CallFinished, CallProposed as CallProposed, CallRecord as CallRecord,
        ChatService as ChatService, ConversationSearch as ConversationSearch, RoundFinished as RoundFinished,
        RoundStats as RoundStats, ToolTurn as ToolTurn, ToolTurnEvent as ToolTurnEvent, Turn as Turn,
        title_from as title_from,
    )
    from .core import (
        CrashGuard as CrashGuard, DoctorReport as DoctorReport, Engine as Engine, LastCrash as LastCrash,
        SelfTest as SelfTest, attach_rpc_workers as attach_rpc_workers, collect as collect,
        open_engine as open_engine, start_rpc_host as start_rpc_host,
    )
    from .documents import (
        AUDIO_KIND as AUDIO_KIND, Added as Added, CollectionFile as CollectionFile, Document as Document,
        Limits as Limits, Recordings as Recordings, convert_bytes_safely as convert_bytes_safely,
        convert_file as convert_file, is_recording_name as is_recording_name, parse_clock as parse_clock,
        read_recording as read_recording,
    )
    from .lab import (
        EvalText as EvalText, LabProgress as LabProgress, LabReport as LabReport, LabResult as LabResult,
        LabRun as LabRun, MeasureConfig as MeasureConfig, QuantLab as QuantLab,
        Recommendation as Recommendation, Variant as Variant, VariantGroup as VariantGroup,
    )
    from .models import (
        VOICES_REPO as VOICES_REPO, SpeechDownload as SpeechDownload, piper_voices as piper_voices,
        pull_speech as pull_speech, search_whisper as search_whisper, voice_sample as voice_sample,
        whisper_download as whisper_download, STARTER_ID as STARTER_ID, AdapterImport as AdapterImport, AdapterRecord as AdapterRecord,
        AdapterRegistry as AdapterRegistry, DownloadProgress as DownloadProgress, Downloader as Downloader,
        EncoderOffer as EncoderOffer, FoundModel as FoundModel, HubClient as HubClient, HubModel as HubModel, ImportResult as ImportResult,
        ModelRegistry as ModelRegistry, PendingDownload as PendingDownload, QuantOption as QuantOption,
        RepoListing as RepoListing, downloader_for as downloader_for, find_known_places as find_known_places,
        find_starter_model as find_starter_model, fit_options as fit_options, import_found as import_found,
        import_path as import_path, pull_adapters as pull_adapters, quant_from_name as quant_from_name,
        resolve_token as resolve_token, scan_known_places as scan_known_places,
        validated_name as validated_name, with_alias as with_alias, without_alias as without_alias,
    )
    from .remote import (
        REMOTE_SOURCE as REMOTE_SOURCE, RPC_NO_AUTH_WARNING as RPC_NO_AUTH_WARNING,
        RemoteCatalogue as RemoteCatalogue, RemoteEndpoint as RemoteEndpoint, RemoteEngine as RemoteEngine,
        RemoteEngineError as RemoteEngineError, RpcError as RpcError, Worker as Worker,
        check_worker_host as check_worker_host, keyring_available as keyring_available,
        parse_workers as parse_workers, worker_command as worker_command, worker_env as worker_env,
        worker_reachable as worker_reachable,
    )
    from .runtime import (
        CPU_ONLY as CPU_ONLY, FITS_GPU as FITS_GPU, PARTIAL as PARTIAL, TOO_LARGE as TOO_LARGE,
        FitEstimate as FitEstimate, GpuMemory as GpuMemory, LoadOptions as LoadOptions,
        MachineMemory as MachineMemory, detect_machine as detect_machine,
    )
    from .scheduling import LoadPlan as LoadPlan, Scheduler as Scheduler
    from .store import (
        CacheUsage as CacheUsage, Conversation as Conversation, DiskState as DiskState, Message as Message,
        Paths as Paths, Settings as Settings, Store as Store, StoredImage as StoredImage, disk_state as disk_state,
    )
    from .speech import (
        SPEECH_FORMATS as SPEECH_FORMATS, TRANSCRIPT_FORMATS as TRANSCRIPT_FORMATS, AudioError as AudioError,
        Speech as Speech, SpeechModel as SpeechModel, Transcript as Transcript,
        TranscriptionOptions as TranscriptionOptions, VoiceUnavailable as VoiceUnavailable, encode_pcm as encode_pcm,
        render_transcript as render_transcript,
    )
    from .speech import PLAYBACK_RATE as PLAYBACK_RATE, PcmReader as PcmReader
    from .text import Split as Split, split_whole as split_whole
    from .tools import (
        DEFAULT_MAX_ROUNDS as DEFAULT_MAX_ROUNDS, CallRequest as CallRequest, Decision as Decision,
        McpError as McpError, McpManager as McpManager,
        McpServerConfig as McpServerConfig, McpServers as McpServers, McpTool as McpTool,
        ServerState as ServerState, ToolResult as ToolResult, other_app_configs as other_app_configs,
        parse_mcp_servers as parse_mcp_servers, parse_pairs as parse_pairs, read_mcp_file as read_mcp_file,
    )
    from .usage import (
        DEFAULT_PRICES as DEFAULT_PRICES, MachineCost as MachineCost, Price as Price,
        TokenCounts as TokenCounts, UsageReport as UsageReport, UsageSummary as UsageSummary,
        checked_days as checked_days, machine_cost_of as machine_cost_of,
        validated_prices as validated_prices,
    )

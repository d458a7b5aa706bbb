"""Which models there are: the registry of GGUF files, the Hugging Face hub and downloads,
the embedding model recommended for search, imports from other apps, the starter model,
aliases, LoRA adapters' registry and hub, speech models (Whisper, Piper voices) from the hub.

May import: base, runtime, store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "aliases": (
        "ROUTING_ALIAS", "alias_key", "lookup", "resolve_alias", "validated_name", "with_alias",
        "without_alias",
    ),
    "downloads": ("DownloadProgress", "Downloader", "PendingDownload", "downloader_for"),
    "encoder": ("EncoderOffer", "installed_encoder", "known_offer", "recommended_encoder"),
    "hub": (
        "HubClient", "HubModel", "QuantOption", "RepoListing", "fit_options", "quant_from_name",
        "resolve_token",
    ),
    "importers": (
        "FoundModel", "ImportResult", "find_known_places", "import_found", "import_path",
        "scan_known_places",
    ),
    "lora_hub": ("pull_adapters",),
    "lora_registry": ("AdapterImport", "AdapterRecord", "AdapterRegistry"),
    "registry": ("EMBEDDING_ARCHITECTURES", "ModelRegistry"),
    "speech_hub": (
        "VOICES_REPO", "SpeechDownload", "piper_voices", "pull_speech", "search_whisper", "voice_sample",
        "whisper_download",
    ),
    "starter": ("STARTER_ID", "find_starter_model"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .aliases import (
        ROUTING_ALIAS as ROUTING_ALIAS, alias_key as alias_key, lookup as lookup,
        resolve_alias as resolve_alias, validated_name as validated_name, with_alias as with_alias,
        without_alias as without_alias,
    )
    from .downloads import (
        DownloadProgress as DownloadProgress, Downloader as Downloader, PendingDownload as PendingDownload,
        downloader_for as downloader_for,
    )
    from .encoder import (
        EncoderOffer as EncoderOffer, installed_encoder as installed_encoder, known_offer as known_offer,
        recommended_encoder as recommended_encoder,
    )
    from .hub import (
        HubClient as HubClient, HubModel as HubModel, QuantOption as QuantOption, RepoListing as RepoListing,
        fit_options as fit_options, quant_from_name as quant_from_name, resolve_token as resolve_token,
    )
    from .importers import (
        FoundModel as FoundModel, ImportResult as ImportResult, find_known_places as find_known_places,
        import_found as import_found, import_path as import_path, scan_known_places as scan_known_places,
    )
    from .lora_hub import pull_adapters as pull_adapters
    from .lora_registry import (
        AdapterImport as AdapterImport, AdapterRecord as AdapterRecord, AdapterRegistry as AdapterRegistry,
    )
    from .registry import EMBEDDING_ARCHITECTURES as EMBEDDING_ARCHITECTURES, ModelRegistry as ModelRegistry
    from .speech_hub import (
        VOICES_REPO as VOICES_REPO, SpeechDownload as SpeechDownload, piper_voices as piper_voices,
        pull_speech as pull_speech, search_whisper as search_whisper, voice_sample as voice_sample,
        whisper_download as whisper_download,
    )
    from .starter import STARTER_ID as STARTER_ID, find_starter_model as find_starter_model

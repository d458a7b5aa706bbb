"""Typed application settings, stored as JSON values in the ``settings`` table."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .store import Store

AUTO_CONTEXT = 0  # context_size: chosen per model at load time from its size and free memory
# What an estimate made before any load (the Models page's fit badge) assumes for "auto".
NOMINAL_AUTO_CONTEXT = 4096


@dataclass
class Settings:
    # Inference
    # Tokens of context each answer gets; 0 (auto): what the model was trained for, as far
    # as this machine's memory allows (fit.auto_context). ``model_context`` overrides it
    # per model id.
    context_size: int = AUTO_CONTEXT
    model_context: dict[str, int] = field(default_factory=dict)
    threads: int = 0  # 0: one per physical core
    gpu_layers: int = -1  # -1: as many as fit (auto), 0: CPU only
    # auto (f16 with flash attention: runtime.fit.kv_cache_type_for) | f16 | q8_0
    kv_cache_type: str = "auto"
    # Answers one model works on at once (window, terminal and API share them), batched
    # into one decode per step; they share one KV pool of context_size tokens.
    parallel_sequences: int = 4
    # Speculative decoding: "off", "lookup" (drafts copied from the prompt and the answer
    # so far: fast edits and quotes, no extra model; a sequence whose drafts keep failing
    # stops drafting) or "draft" (``draft_model``, an installed model with the same
    # vocabulary, drafts beside the chat model). Greedy output is unchanged by either.
    speculative: str = "off"
    draft_model: str | None = None
    # The most prompt tokens fed per step while other answers stream; the scheduler feeds
    # fewer when its measurements say a chunk would stall the streams (deep in a long prompt).
    prefill_chunk: int = 256
    idle_unload_s: float = 600.0
    # Memory the resident models may take together (MiB: weights + KV + scratch, as
    # estimated before each load); least recently used idle models leave to make room.
    # 0: automatic, 60% of physical RAM.
    memory_budget_mb: int = 0
    default_model: str | None = None
    models_dirs: list[str] = field(default_factory=list)  # extra folders scanned for GGUFs
    # API server
    api_enabled: bool = True
    api_host: str = "127.0.0.1"
    api_port: int = 8484
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    allowed_hosts: list[str] = field(default_factory=list)
    strict_model_names: bool = False
    # http(s) image URLs in API requests: fetched from public addresses only (never loopback,
    # private, link-local or reserved ones), up to 20 MB within 10 s; off, such a request is a 400.
    api_fetch_image_urls: bool = False
    # TLS for LAN use: both paths, or neither (plain HTTP). Named keys are in api/shared/keys.py.
    tls_cert: str | None = None
    tls_key: str | None = None
    # Other OpenAI-compatible servers whose models the window and the API offer
    # ({"name", "base_url", "key_in": "keyring" | "store" | "", "key"}; see remote.py).
    remote_engines: list[dict[str, Any]] = field(default_factory=list)
    # llama.cpp RPC workers ("host:port") a load splits layers across (rpc.py).
    rpc_workers: list[str] = field(default_factory=list)
    # Names clients send (``claude-sonnet-4-5``, ``fast``) mapped to installed model ids;
    # keys are stored lower-case (see aliases.py).
    model_aliases: dict[str, str] = field(default_factory=dict)
    # Cache
    cache_budget_mb: int = 2048  # disk budget for saved prompt states (MiB); 0 turns the disk tier off
    cache_ram_mb: int = 512  # recently used prompt states kept in memory (MiB)
    # Appearance
    theme: str = "system"  # light | dark | system
    # Hub
    hf_token: str | None = None
    # Desktop
    close_to_tray: bool = True  # closing the window while the API runs keeps it in the tray
    start_at_login: bool = False  # an autostart entry (XDG autostart, the Run key, a LaunchAgent)
    welcome_shown: bool = False  # the first-run welcome was seen
    window_geometry: str = ""  # the window's size and place when it last closed (Qt's saveGeometry, base64)
    # Voice in the window (app/controllers/voice_*.py, Settings → Voice): devices by Qt's id, "" the system's default
    voice_input_device: str = ""
    voice_output_device: str = ""
    voice: str = ""  # the installed voice that reads answers; "": the first installed
    voice_read_streaming: bool = False  # read each answer aloud as it streams, sentence by sentence
    voice_keep_recordings: bool = False  # keep a spoken message's audio with its chat (deleted with the chat)
    # Usage and cost (usage.py, pricing.py)
    usage_retention_days: int = 365  # usage records older than this are removed; 0 keeps all
    usage_prices: list[dict[str, Any]] | None = None  # the price table; None: pricing.DEFAULT_PRICES
    machine_watts: float = 150.0  # power drawn while generating
    electricity_price_per_kwh: float = 0.30  # USD
    hardware_price: float = 0.0  # USD, spread over hardware_months; 0 leaves it out
    hardware_months: int = 36
    # Small models for simple work (routing.py, background.py)
    route_small_model: str | None = None  # the "auto" alias's small model; None: the smallest chat model
    route_large_model: str | None = None  # and its large one; None: the default model
    route_short_prompt_chars: int = 2000  # prompts up to this long (and without tools) go to the small one
    background_model: str | None = None  # titles and other background work; None: the smallest chat model
    background_titles: bool = True  # give new conversations a title written by the background model
    background_summaries: bool = True  # summarise long conversations for the sidebar's tooltips
    background_search: bool = True  # embed messages in the background, so search finds chats by meaning
    encoder_offer_dismissed: bool = False  # "Not now" on the window's offer of an embedding model for search

    @property
    def kv_context(self) -> int:
        """KV cells a loaded model allocates: the context for each answer it runs at once.
        Fit estimates use it, so the Models page's badge and an actual load agree."""
        return (self.context_size or NOMINAL_AUTO_CONTEXT) * max(1, self.parallel_sequences)

    def context_for(self, model_id: str) -> int:
        """The context setting that applies to ``model_id`` (AUTO_CONTEXT: decide at load)."""
        return int(self.model_context.get(model_id, self.context_size))

    @classmethod
    def load(cls, store: Store) -> "Settings":
        saved = store.all_settings()
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in saved.items() if k in known})

    def save(self, store: Store, **changes: Any) -> "Settings":
        """Apply ``changes`` (or save everything when none are given)."""
        updated = dataclasses.replace(self, **changes) if changes else self
        names = changes.keys() if changes else [f.name for f in dataclasses.fields(self)]
        for name in names:
            store.set_setting(name, getattr(updated, name))
        return updated

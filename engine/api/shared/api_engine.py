"""What the HTTP API needs of the engine, as a ``Protocol``: the API is written against this,
not against ``core.Engine``'s parts, so the scheduler, registry and pool behind it can change
without touching a handler (and a handler cannot start leaning on them unnoticed:
``tests/unit/test_api_engine.py`` fails on any attribute of the engine outside this list).

``core.Engine`` satisfies it structurally; mypy checks that wherever an ``Engine`` is handed to
``ApiServer`` (the CLI's ``serve``, the window's server control).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ...base import Job, JobHandle, ModelRecord
    from ...core import EngineHealth
    from ...models import AdapterRegistry
    from ...scheduling import ChatModels
    from ...speech import Speech
    from ...store import Settings, Store
    from ...tools import McpManager
    from ...usage import UsageRecorder, UsageSummary


class ApiEngine(Protocol):
    """The engine as the API sees it. Keep it small: add a member only for a need no other
    member meets, and say why beside it."""

    # -- values and the stores the API keeps its own tables in ------------------------------
    @property
    def settings(self) -> Settings:
        """Aliases, per-model context, the API's own settings (a value; read, never written)."""

    @property
    def store(self) -> Store:
        """The one database: API keys, stored responses and remote engines keep tables in it."""

    @property
    def adapters(self) -> AdapterRegistry:
        """LoRA adapters a request may name (``/lora-adapters``, a request's ``lora``)."""

    @property
    def usage(self) -> UsageRecorder:
        """Where a streamed answer's reasoning tokens are counted as they are read."""

    @property
    def chat_models(self) -> ChatModels:
        """Which models can chat: the routing alias ``auto`` picks its small model from them."""

    @property
    def tools(self) -> McpManager:
        """The person's MCP servers: a Responses request may name those allowed for API clients."""

    @property
    def speech(self) -> Speech:
        """Speech models, transcription and voices: ``/v1/audio/*`` and the speech cards of ``/v1/models``."""

    # -- work ---------------------------------------------------------------------------------
    def submit_many(self, jobs: Iterable[Job]) -> list[JobHandle]:
        """Queue a request's jobs together (all or none); ``QueueFull`` when the queue is full."""

    # -- models -------------------------------------------------------------------------------
    def models(self) -> list[ModelRecord]: ...

    def model(self, model_id: str) -> ModelRecord:
        """Exactly this id (an alias's target)."""

    def resolve_model(self, name: str) -> ModelRecord:
        """A request's model name: id, id without the quantization, or (refused earlier) a path."""

    def default_model_id(self) -> str: ...

    def loaded_contexts(self) -> dict[str, int]:
        """Model id -> context of each model loaded for chat (``/v1/models``' ``context_in_use``)."""

    # -- watching -----------------------------------------------------------------------------
    def health(self) -> EngineHealth:
        """``/health``: loaded and loading models, queue depth, the current unit's age."""

    def usage_summary(self, days: int) -> UsageSummary:
        """``/v1/usage``: token counts and prices of the last ``days`` days."""

"""What a chat's helpers may ask of the chat service: a narrow view instead of ``ChatService``.

Images and tool turns need the store, the scheduler, the tool servers and a few of the
service's answers (the default model, a chat's sampling and adapters); typing them against
this protocol keeps them below ``chat.py``, which builds them, instead of in a circle with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..base import LoraSet, ModelRecord, SamplingParams
    from ..remote import RemoteCatalogue
    from ..scheduling import Scheduler
    from ..store import Store
    from ..tools import McpManager


class ChatContext(Protocol):
    """The part of the chat service its images and tool turns read."""

    store: Store
    scheduler: Scheduler
    tools: McpManager
    remotes: RemoteCatalogue
    # Model id -> its record, set by the engine; None where there is no model list (some tests).
    resolve: Callable[[str], ModelRecord] | None
    client: str  # who is chatting, for usage

    def default_model_id(self) -> str: ...

    def sampling_for(self, settings: dict[str, Any]) -> SamplingParams: ...

    def lora_for(self, settings: dict[str, Any]) -> LoraSet: ...

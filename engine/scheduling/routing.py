"""Small models for simple work: which installed model a routed request or a background task runs on.

A request for the routing alias ``auto`` (``aliases.ROUTING_ALIAS``) goes to the small model
when its prompt is short (``route_short_prompt_chars``, counted over the messages' text) and it
offers no tools; anything longer, or with tools, goes to the large one. The choice is the
model the request is answered by, so it is what the response's ``model`` field and the usage
table name. Background work (titles, summaries) runs on the small model too; search by meaning
on the smallest embedding model when one is installed (``search_model_id``).

"Small" is ``route_small_model`` / ``background_model`` when set, else the smallest usable
installed model with a chat template; "large" is ``route_large_model``, else the default model.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base import InglenookError, ModelRecord
from ..models import EMBEDDING_ARCHITECTURES, ROUTING_ALIAS, ModelRegistry, alias_key
from ..runtime import header_of
from ..store import Settings

if TYPE_CHECKING:
    # The API's request models (pydantic) are the server's: the engine's background work
    # imports this module too, and a terminal chat loads neither pydantic nor them.
    from ..base import ChatCompletionRequest, CompletionRequest

log = logging.getLogger(__name__)


class ChatModels:
    """Which installed models can chat (they carry a chat template), read once per file version."""

    def __init__(self, registry: ModelRegistry) -> None:
        self.registry = registry
        self._has_template: dict[str, bool] = {}
        self._lock = threading.Lock()

    def can_chat(self, record: ModelRecord) -> bool:
        key = f"{record.id}@{record.fingerprint}"
        with self._lock:
            known = self._has_template.get(key)
        if known is None:
            try:
                known = bool(header_of(record).chat_template)  # the header a load of it parses too
            except InglenookError:
                known = False
            with self._lock:
                self._has_template[key] = known
        return known

    def smallest(self) -> ModelRecord | None:
        usable = [m for m in self.registry.list() if m.usable and self.can_chat(m)]
        return min(usable, key=lambda m: (m.size_bytes, m.id)) if usable else None


def small_model_id(models: ChatModels, configured: str | None) -> str | None:
    """``configured`` (resolved through the registry) or the smallest chat model; None if none."""
    if configured:
        try:
            return models.registry.resolve(configured).id
        except InglenookError:
            log.warning("the configured small model %r is not installed; using the smallest chat model", configured)
    smallest = models.smallest()
    return smallest.id if smallest is not None else None


#: Embedding needs a context of its own, so a second instance of the model beside the chat one;
#: a chat model larger than this is not loaded twice for search unless the person chose it as
#: the background model (an embedding model, installed, is used whatever its size).
SEARCH_CHAT_MODEL_MAX_BYTES = 1_500_000_000


def search_model_id(settings: Settings, models: ChatModels) -> str | None:
    """The model that embeds messages for search: the smallest installed embedding model,
    else the small chat model when it is small enough to hold twice; None: words only."""
    encoders = [m for m in models.registry.list() if m.usable and m.architecture in EMBEDDING_ARCHITECTURES]
    if encoders:
        return min(encoders, key=lambda m: (m.size_bytes, m.id)).id
    model_id = small_model_id(models, settings.background_model)
    if model_id is None or settings.background_model:
        return model_id
    return model_id if models.registry.resolve(model_id).size_bytes <= SEARCH_CHAT_MODEL_MAX_BYTES else None


def is_encoder(models: ChatModels, model_id: str) -> bool:
    try:
        return models.registry.resolve(model_id).architecture in EMBEDDING_ARCHITECTURES
    except InglenookError:
        return False


def prompt_chars(request: ChatCompletionRequest | CompletionRequest) -> int:
    """How long a prompt is, in characters of text (token ids count one each)."""
    from ..base import CompletionRequest  # noqa: PLC0415 — see the TYPE_CHECKING imports

    if isinstance(request, CompletionRequest):
        prompt = request.prompt
        if isinstance(prompt, str):
            return len(prompt)
        return sum(len(p) if isinstance(p, (str, list)) else 1 for p in prompt)
    total = 0
    for message in request.messages:
        content = message.content
        if isinstance(content, str):
            total += len(content)
        elif content:
            total += sum(len(part.text or "") for part in content)
    return total


@dataclass(frozen=True)
class RouteTargets:
    """Where ``auto`` sends requests now: ``small`` for short prompts without tools."""

    small: str
    large: str
    short_prompt_chars: int

    def card(self, large_card: dict[str, Any]) -> dict[str, Any]:
        """``/v1/models``'s entry for the routing alias: the large model's card (what a long
        prompt runs on, so its context is the one to size for), named ``auto``, with the route."""
        card = {k: v for k, v in large_card.items() if k not in ("aliases", "alias_of", "problem")}
        card["id"] = ROUTING_ALIAS
        card["routes"] = {"small": self.small, "large": self.large, "short_prompt_chars": self.short_prompt_chars}
        return card


class Router:
    """Resolves the routing alias to a model id; any other name passes through unchanged."""

    def __init__(self, settings: Callable[[], Settings], models: ChatModels, default_model: Callable[[], str]) -> None:
        self._settings = settings
        self.models = models
        self._default_model = default_model

    def is_routed(self, name: str | None) -> bool:
        return alias_key(name or "") == ROUTING_ALIAS

    def choose(self, request: ChatCompletionRequest | CompletionRequest) -> str:
        """The model id the request runs on: small for a short prompt without tools, else large."""
        settings = self._settings()
        large = settings.route_large_model or self._default_model()
        tools = bool(getattr(request, "tools", None))
        if tools or prompt_chars(request) > settings.route_short_prompt_chars:
            return large
        return small_model_id(self.models, settings.route_small_model) or large

    def targets(self) -> RouteTargets | None:
        """The two models ``auto`` chooses between, or None when it has no choice to make
        (no chat model, or the small one is the large one): then it is not listed."""
        settings = self._settings()
        try:
            large = self.models.registry.resolve(settings.route_large_model or self._default_model()).id
        except InglenookError:
            return None  # no usable default model: nothing to route to
        small = small_model_id(self.models, settings.route_small_model)
        if small is None or small == large:
            return None
        return RouteTargets(small, large, settings.route_short_prompt_chars)

    def model_for(self, request: ChatCompletionRequest | CompletionRequest) -> str:
        """The name to resolve for ``request``: the routed choice for ``auto``, else its own."""
        if not self.is_routed(request.model):
            return request.model
        chosen = self.choose(request)
        log.debug("routed a request for %r to %s", request.model, chosen)
        return chosen

"""What ``/v1/models`` says about each installed model (and each alias).

OpenAI's model object (``id``, ``object``, ``created``, ``owned_by``) plus what a client
needs to pick and size a local model: its training context, the context setting, what it
can do (``completion``, ``tools`` — the chat template renders tools —, ``embedding``,
``vision``, when a projector is paired with it) and, when loaded, the context it actually runs with. Models llama.cpp refused
(``ModelRecord.problem``) are left out of the list; asked for by id they are shown with
their problem. Aliases are listed as their own entries with ``alias_of``, so a client that
checks the list before it sends a request finds the name it was told to use.
"""

from __future__ import annotations

import threading
from typing import Any

from ...base import GGUFInfo, ModelLoadError, ModelNotFound, ModelRecord, find_projector, read_gguf
from ...models import alias_key, lookup
from ...store import AUTO_CONTEXT
from ...text import TemplateAbilities
from ..shared import ApiEngine, looks_like_path

# Architectures llama.cpp runs as encoders only: they embed, they do not write text.
_EMBEDDING_ONLY = {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "t5encoder", "modern-bert", "neo-bert"}


def capabilities_of(info: GGUFInfo) -> list[str]:
    """What a model can do, read from its GGUF header."""
    found: list[str] = []
    embedding_only = info.architecture in _EMBEDDING_ONLY
    if not embedding_only:
        found.append("completion")
        if TemplateAbilities.of(info.chat_template).tools:
            found.append("tools")
    if embedding_only or info.arch_value("pooling_type") is not None:
        found.append("embedding")
    try:
        if find_projector(info) is not None:  # an mmproj-*.gguf beside it for its embedding size
            found.append("vision")
    except ModelLoadError:
        pass  # a projector of another model beside it: text only (loading an image says why)
    return found


class ModelCatalogue:
    """Builds model objects; capabilities are read from each file once per content version."""

    def __init__(self, engine: ApiEngine) -> None:
        self.engine = engine
        self._capabilities: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def list_cards(self) -> list[dict[str, Any]]:
        records = [r for r in self.engine.models() if r.usable]
        in_use = self._contexts_in_use()
        cards = [self._card(r, in_use) for r in records]
        by_id = {r.id: r for r in records}
        for name, target in sorted(self.engine.settings.model_aliases.items()):
            if target in by_id:
                cards.append(self._card(by_id[target], in_use, alias=name))
        return cards

    def card(self, name: str) -> dict[str, Any]:
        """The model object for an id or an alias (ModelNotFound when neither)."""
        target = lookup(self.engine.settings, name)
        record = self.engine.model(target) if target else self._exact(name)
        card = self._card(record, self._contexts_in_use(), alias=alias_key(name) if target else None)
        if not record.usable:
            card["problem"] = record.problem
        return card

    def _exact(self, model_id: str) -> ModelRecord:
        if looks_like_path(model_id):  # a remote client names models, never files
            raise ModelNotFound(f"the model {model_id!r} does not exist")
        try:
            return self.engine.resolve_model(model_id)
        except ModelNotFound:
            raise ModelNotFound(f"the model {model_id!r} does not exist") from None

    def _contexts_in_use(self) -> dict[str, int]:
        return self.engine.loaded_contexts()  # chat loads only: an embedding load runs one short sequence

    def _card(self, record: ModelRecord, in_use: dict[str, int], alias: str | None = None) -> dict[str, Any]:
        setting = self.engine.settings.context_for(record.id)
        capabilities = self._capabilities_for(record)
        card: dict[str, Any] = {
            "id": alias or record.id,
            "object": "model",
            "created": int(record.added_at),
            "owned_by": "local",
            "context_length": record.context_length,
            "context_setting": "auto" if setting == AUTO_CONTEXT else setting,
            "capabilities": capabilities,
            # What it is, in the field speech models use too ("speech-to-text", "text-to-speech").
            "kind": "embedding" if capabilities == ["embedding"] else "text-generation",
            "loaded": record.id in in_use,
            "context_in_use": in_use.get(record.id),
            "architecture": record.architecture,
            "quantization": record.quantization,
            "size_bytes": record.size_bytes,
        }
        if alias:
            card["alias_of"] = record.id
        else:
            card["aliases"] = sorted(k for k, v in self.engine.settings.model_aliases.items() if v == record.id)
        return card

    def _capabilities_for(self, record: ModelRecord) -> list[str]:
        key = f"{record.id}@{record.fingerprint}"
        with self._lock:
            found = self._capabilities.get(key)
        if found is None:
            found = capabilities_of(read_gguf(record.path))
            with self._lock:
                self._capabilities[key] = found
        return list(found)

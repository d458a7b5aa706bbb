"""llama-server's LoRA surface: the ``lora`` field of completions and ``GET /lora-adapters``.

``lora`` is a list of ``{"id", "scale"}``; ``id`` is an adapter's index in
``GET /lora-adapters`` (llama-server's numbering) or its name. Unknown ids, bad scales and
adapters made for another base model are refused with 400 in the API's error shape before
anything is queued. The listing names each adapter by its name, never its local path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter

from .lora import NO_LORA, LoraSet
from .lora_registry import AdapterRegistry
from .protocol import LoraRequest
from .registry import ModelRecord

if TYPE_CHECKING:
    from .server import ApiService


def requested_lora(requested: list[LoraRequest] | None, adapters: AdapterRegistry, model: ModelRecord) -> LoraSet:
    """The request's adapters for ``model``, checked (``AdapterError``: HTTP 400, param ``lora``)."""
    if not requested:
        return NO_LORA
    return adapters.lora_set([(item.id, item.scale) for item in requested], model)


def adapter_cards(adapters: AdapterRegistry) -> list[dict[str, Any]]:
    """llama-server's listing: ``id`` (the index requests use), ``path`` (here the file's name,
    not where it lies), ``scale`` (0: nothing is applied unless a request asks), and ours."""
    return [
        {"id": index, "path": record.path.name, "name": record.id, "scale": 0.0,
         "architecture": record.architecture, "base_model": record.base_model, "rank": record.rank}
        for index, record in enumerate(adapters.list())
    ]


def lora_router(service: "ApiService") -> APIRouter:
    router = APIRouter()
    adapters = service.engine.adapters

    @router.get("/lora-adapters")
    async def lora_adapters() -> list[dict[str, Any]]:
        return await anyio.to_thread.run_sync(adapter_cards, adapters)

    return router

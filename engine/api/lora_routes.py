"""``GET /lora-adapters``: llama-server's listing of the LoRA adapters a request may name.

Each adapter is listed by its index (the ``id`` a request's ``lora`` field uses, checked in
``api/shared/lora.py``) and its name, never its local path.
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter

from ..models import AdapterRegistry
from .shared import ApiService


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

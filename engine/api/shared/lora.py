"""llama-server's LoRA field of completions: the adapters a request asks for, checked.

``lora`` is a list of ``{"id", "scale"}``; ``id`` is an adapter's index in
``GET /lora-adapters`` (llama-server's numbering) or its name. Unknown ids, bad scales and
adapters made for another base model are refused with 400 in the API's error shape before
anything is queued. ``GET /lora-adapters``, the listing the ids index, is in ``api/lora_routes.py``.
"""

from __future__ import annotations

from ...base import NO_LORA, LoraRequest, LoraSet, ModelRecord
from ...models import AdapterRegistry


def requested_lora(requested: list[LoraRequest] | None, adapters: AdapterRegistry, model: ModelRecord) -> LoraSet:
    """The request's adapters for ``model``, checked (``AdapterError``: HTTP 400, param ``lora``)."""
    if not requested:
        return NO_LORA
    return adapters.lora_set([(item.id, item.scale) for item in requested], model)

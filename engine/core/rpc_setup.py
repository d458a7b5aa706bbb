"""``serve --rpc``: the split a model gets, the child that runs it, and the child's own set-up."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from ..base import read_gguf
from ..remote import (
    CHILD_VARIABLE, RpcError, RpcHost, attach_workers, parse_workers, watch_parent, worker_reachable,
)
from ..runtime import ModelShape, RpcSplit, rpc_split

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger(__name__)


def split_for(engine: "Engine", model_id: str, worker_free: list[int]) -> RpcSplit:
    """How ``model_id``'s layers spread over this machine's free RAM and the workers' memory."""
    import psutil  # noqa: PLC0415

    record = engine.registry.resolve(model_id)
    shape = ModelShape.from_gguf(read_gguf(record.path))
    context = engine.settings.context_for(record.id) or engine.settings.kv_context
    return rpc_split(shape, int(psutil.virtual_memory().available), worker_free, context,
                     engine.settings.kv_cache_type)


def attach_rpc_workers(engine: "Engine", workers_text: str, model_id: str | None) -> RpcSplit:
    """In the child (``serve --rpc-direct``): attach the workers and offload the split's layers."""
    watch_parent()
    devices = attach_workers(parse_workers(workers_text))
    split = split_for(engine, model_id or engine.default_model_id(), [d.free_bytes for d in devices])
    # For this run only: the saved setting stays. The offloaded layers go to the RPC devices,
    # which llama.cpp fills in proportion to their free memory.
    engine.settings = dataclasses.replace(engine.settings, gpu_layers=split.gpu_layers)
    log.info("RPC split: %s", split.label)
    return split


def start_rpc_host(engine: "Engine", workers_text: str, model_id: str | None) -> RpcHost:
    """In the main process (``serve --rpc``): check the workers, then start the child that loads
    the model across them; it answers every request the API forwards."""
    import os  # noqa: PLC0415

    if os.environ.get(CHILD_VARIABLE):
        raise RpcError("an RPC host does not start RPC hosts of its own")
    workers = parse_workers(workers_text)
    missing = [w.endpoint for w in workers if not worker_reachable(w)]
    if missing:
        raise RpcError(f"RPC worker(s) not reachable: {', '.join(missing)}; start `inglenook worker` there first")
    host = RpcHost(workers, model=model_id or engine.default_model_id(), home=None)
    host.endpoint()  # start now, so a failure is reported before the server listens
    return host

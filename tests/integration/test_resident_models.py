"""Several real models resident at once: SmolLM2 and gemma-3-270m side by side, the least
recently used one evicted under a small memory budget, and the server answering while a
model loads (the load is held open by a gate around the real loader, not faked)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.errors import ModelTooLarge
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.jobs import GenerateJob, JobHandle
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.runtime.fit import ModelShape
from inglenook.engine.runtime.speculative import MAX_DRAFT
from inglenook.engine.scheduling.model_context import context_for
from inglenook.engine.scheduling.model_pool import MIB, estimate_resident_bytes
from tests.integration.test_cli import STARTER

GREEDY = SamplingParams(temperature=0.0, max_tokens=32)


@pytest.fixture()
def engine(home: Path, gemma_path: Path) -> Iterator[Engine]:
    with Engine() as engine:
        engine.update_settings(parallel_sequences=2, context_size=512)
        engine.registry.register_file(gemma_path)
        yield engine


def gemma_id(engine: Engine) -> str:
    return next(m.id for m in engine.registry.list() if m.architecture == "gemma3")


def ask(engine: Engine, model_id: str, content: str = "Name three colours.") -> JobHandle:
    job = GenerateJob(model_id, sampling=GREEDY, messages=[{"role": "user", "content": content}], use_cache=False)
    return engine.scheduler.submit(job)


def estimate_mib(engine: Engine, model_id: str) -> int:
    record = engine.registry.resolve(model_id)
    options = engine.load_options()
    options = dataclasses.replace(options, context_size=context_for(record, engine.settings, options))
    return estimate_resident_bytes(record, options) // MIB


def test_two_models_resident_answer_side_by_side(engine: Engine) -> None:
    gemma = gemma_id(engine)
    for model_id in (STARTER, gemma):
        list(engine.scheduler.load(model_id))
    assert sorted(m.record.id for m in engine.scheduler.loaded_models()) == sorted([STARTER, gemma])
    order: list[str] = []
    lock = threading.Lock()
    results: dict[str, Finished] = {}

    def stream(model_id: str) -> None:
        for event in ask(engine, model_id):
            if isinstance(event, Chunk):
                with lock:
                    order.append(model_id)
            elif isinstance(event, Finished):
                results[model_id] = event

    threads = [threading.Thread(target=stream, args=(m,)) for m in (STARTER, gemma)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert set(results) == {STARTER, gemma} and all(r.usage.completion_tokens > 0 for r in results.values())
    # Both stepped in the same loop: each model's chunks arrive while the other still streams.
    last = {m: len(order) - 1 - order[::-1].index(m) for m in (STARTER, gemma)}
    assert order.index(gemma) < last[STARTER] and order.index(STARTER) < last[gemma], order
    assert len(engine.scheduler.loaded_models()) == 2


def test_the_least_recently_used_model_leaves_under_a_small_budget(engine: Engine) -> None:
    gemma = gemma_id(engine)
    smol_mib, gemma_mib = estimate_mib(engine, STARTER), estimate_mib(engine, gemma)
    # Room for either alone, not for both.
    engine.update_settings(memory_budget_mb=max(smol_mib, gemma_mib) + min(smol_mib, gemma_mib) // 2)
    states: list[tuple[str, str]] = []
    engine.scheduler.add_listener(lambda model_id, state, _detail: states.append((model_id, state)))
    assert ask(engine, STARTER).result()[1].usage.completion_tokens > 0
    assert ask(engine, gemma).result()[1].usage.completion_tokens > 0
    assert [m.record.id for m in engine.scheduler.loaded_models()] == [gemma]
    assert (STARTER, "unloaded") in states
    # A budget smaller than the model alone: a clear error, and nothing else is lost.
    engine.update_settings(memory_budget_mb=smol_mib // 2)
    with pytest.raises(ModelTooLarge, match="more than the memory budget"):
        ask(engine, STARTER).result()
    assert [m.record.id for m in engine.scheduler.loaded_models()] == [gemma]


def gated(load: Callable[..., Any], started: threading.Event, gate: threading.Event) -> Callable[..., Any]:
    """The real loader, held at its start until ``gate`` opens."""

    def held(record: Any, options: Any, progress: Any = None) -> Any:
        started.set()
        assert gate.wait(300), "the test never opened the gate"
        return load(record, options, progress=progress)

    return held


def test_the_server_answers_while_a_model_loads(engine: Engine) -> None:
    gemma = gemma_id(engine)
    list(engine.scheduler.load(STARTER))
    started, gate = threading.Event(), threading.Event()
    engine.scheduler.loader = gated(engine.scheduler.loader, started, gate)
    server = ApiServer(engine, port=0)
    server.start()
    try:
        loading = engine.scheduler.load(gemma)
        assert started.wait(60)
        with httpx.Client(base_url=server.url.removesuffix("/v1"), timeout=120) as client:
            health = client.get("/health")
            assert health.status_code == 200 and health.json()["loading_models"] == [gemma]
            models = client.get("/v1/models")
            assert models.status_code == 200 and {STARTER, gemma} <= {m["id"] for m in models.json()["data"]}
            # The resident model keeps answering while the other one loads.
            reply = client.post("/v1/chat/completions", json={
                "model": STARTER, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4,
            })
            assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"]
        assert engine.scheduler.loading_models() == [gemma], "the load was still in progress throughout"
        gate.set()
        list(loading)
        assert sorted(m.record.id for m in engine.scheduler.loaded_models()) == sorted([STARTER, gemma])
    finally:
        gate.set()
        server.stop()


def test_a_draft_model_counts_in_the_memory_estimate(engine: Engine) -> None:
    gemma = engine.registry.resolve(gemma_id(engine))
    starter = engine.registry.resolve(STARTER)
    plain = dataclasses.replace(engine.load_options(), context_size=8192, parallel=2)
    other = dataclasses.replace(plain, speculative="draft", draft_model=gemma)
    # The model itself, verifying drafts: its compute buffer holds each sequence's draft
    # rows' logits too (model_loading.output_rows), 2 × 16 more than without.
    alone = estimate_resident_bytes(starter, dataclasses.replace(plain, speculative="lookup"))
    shape = ModelShape.from_gguf(read_gguf(starter.path))
    assert alone - estimate_resident_bytes(starter, plain) == 2 * MAX_DRAFT * shape.n_vocab * 4
    itself = dataclasses.replace(plain, speculative="draft", draft_model=starter)
    # A draft model loads with full-size window layers (LoadedModel._load_draft): gemma-3's
    # sliding-window layers count at 8,192 cells a sequence, and it keeps no checkpoints
    # (window-sized, with its 8 checkpoints, it would take 5,120 cells' worth).
    gemma_alone = estimate_resident_bytes(gemma, dataclasses.replace(plain, swa_full=True))
    assert gemma_alone > estimate_resident_bytes(gemma, plain)
    # Drafting with a model is drafting by lookup (no model) and the draft model beside it.
    assert estimate_resident_bytes(starter, other) == alone + gemma_alone
    # The same file drafting for itself: its pages are shared, its own KV and scratch are not.
    assert alone < estimate_resident_bytes(starter, itself) < 2 * alone

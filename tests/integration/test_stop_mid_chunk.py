"""Stop acts inside a prompt chunk: the one sequence a ``llama_decode`` serves is cancelled
while the call runs, llama.cpp ends the call between graph nodes (``decode_abort``), and the
slot's tokens and its KV cache still agree, so the next answer on that slot is exact."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inglenook.engine.base.cancel_event import CancelEvent
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.batch import NONE, BatchRow
from inglenook.engine.runtime.decode_abort import ABORTED
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions

from .conftest import GPU_LAYERS, record_for

PROMPT = " ".join(f"Line {n}: the river rose above the old stone bridge." for n in range(150))


@pytest.fixture(scope="module")
def model(smollm2_path: Path) -> Iterator[LoadedModel]:
    # A whole long prompt in one chunk: the call Stop has to interrupt.
    loaded = LoadedModel(record_for(smollm2_path, "smollm2-135m-instruct:q4_1"),
                         LoadOptions(context_size=4096, batch_size=4096, parallel=2, gpu_layers=GPU_LAYERS))
    yield loaded
    loaded.close()


class HookedCancel(CancelEvent):
    """A cancel event that says when a decode has armed it (registered its hook)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = threading.Event()

    def on_set(self, hook: Callable[[], None]) -> Callable[[], None]:
        remove = super().on_set(hook)
        self.armed.set()
        return remove


def kv_end(model: LoadedModel, seq_id: int) -> int:
    """One past the last position llama.cpp holds for ``seq_id`` (0 when it holds none)."""
    context = model.context
    return int(context.lib.llama_memory_seq_pos_max(context.memory, seq_id)) + 1


def greedy(model: LoadedModel, prompt: list[int], slot_index: int) -> list[int]:
    sequence = model.open_sequence(prompt, SamplingParams(temperature=0.0, max_tokens=8), threading.Event(),
                                   time.perf_counter(), reuse_kv=False, slot=model.slots[slot_index])
    tokens: list[int] = []
    try:
        while not sequence.done:
            model.step([sequence], 4096)
            tokens += [t for e in sequence.drain() if isinstance(e, Chunk) for t in e.token_ids]
    finally:
        model.release(sequence)
    return tokens


def test_a_set_cancel_event_ends_the_decode_and_leaves_no_kv(model: LoadedModel) -> None:
    tokens = model.tokenize(PROMPT)
    model.kv.clear(model.slots[0])
    model.decoder.fill([BatchRow(model.slots[0].seq_id, 0, tokens, NONE)])
    cancel = CancelEvent()
    cancel.set()
    assert model.context.decode(cancel=cancel) == ABORTED
    assert kv_end(model, model.slots[0].seq_id) == 0
    # Unarmed, the same batch decodes whole.
    assert model.context.decode() == 0
    assert kv_end(model, model.slots[0].seq_id) == len(tokens)
    model.kv.clear(model.slots[0])


def test_stop_during_a_long_chunk_ends_it_and_the_slot_stays_exact(model: LoadedModel) -> None:
    prompt = model.tokenize(PROMPT)
    assert len(prompt) > 1500
    question = model.tokenize("Where did the river rise?")
    expected = greedy(model, question, slot_index=1)  # a clean slot's answer

    cancel = HookedCancel()
    sequence = model.open_sequence(prompt, SamplingParams(temperature=0.0, max_tokens=8), cancel,
                                   time.perf_counter(), reuse_kv=False, slot=model.slots[0])

    def stop_once_armed() -> None:
        if cancel.armed.wait(60):
            cancel.set()

    stopper = threading.Thread(target=stop_once_armed)
    stopper.start()
    try:
        model.step([sequence], 4096)  # the whole prompt in one call, stopped inside it
    finally:
        stopper.join()
    events = sequence.drain()
    model.release(sequence)
    assert sequence.done
    assert [e.finish_reason for e in events if isinstance(e, Finished)] == ["cancelled"]
    if GPU_LAYERS == 0:  # a GPU reads the chunk in milliseconds, before Stop can land in it
        assert not any(isinstance(e, Chunk) for e in events)
    slot = model.slots[0]
    assert kv_end(model, slot.seq_id) == len(slot.kv_tokens)  # what the slot lists is what llama.cpp holds
    assert greedy(model, question, slot_index=0) == expected

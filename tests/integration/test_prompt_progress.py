"""The prompt's reading is told as it goes: a ``PromptProgress`` after every chunk the real
model reads, counting up to the whole prompt just before the first token."""

from __future__ import annotations

import threading
import time

from inglenook.engine.base.generation_events import Chunk, PromptProgress
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model import LoadedModel


def test_each_prompt_chunk_read_is_reported_before_the_first_token(smollm2: LoadedModel) -> None:
    prompt = smollm2.tokenize("alpha beta gamma delta " * 80)  # ~320 tokens: five chunks of 64
    sequence = smollm2.open_sequence(prompt, SamplingParams(temperature=0.0, max_tokens=2), threading.Event(),
                                     time.perf_counter(), reuse_kv=False, slot=smollm2.slots[0])
    events = []
    try:
        while not sequence.done:
            smollm2.step([sequence], 64)
            events += sequence.drain()
    finally:
        smollm2.release(sequence)
    first_chunk = next(i for i, event in enumerate(events) if isinstance(event, Chunk))
    progress = events[:first_chunk]
    assert all(isinstance(event, PromptProgress) for event in progress)
    assert [p.chunks for p in progress] == list(range(1, len(progress) + 1))
    assert len(progress) >= 5
    reads = [p.read for p in progress]
    assert reads == sorted(set(reads)) and reads[-1] == len(prompt) and reads[0] <= 64 + 1
    assert all(p.total == len(prompt) and p.cached == 0 for p in progress)
    elapsed = [p.elapsed_s for p in progress]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0
    assert not any(isinstance(event, PromptProgress) for event in events[first_chunk:])

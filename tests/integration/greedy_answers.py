"""Greedy answers of one loaded model, for the tests that compare a reused KV cache with a full
prefill of the same prompt (sliding windows, chunked windows)."""

from __future__ import annotations

from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model import LoadedModel

GREEDY = SamplingParams(temperature=0.0, max_tokens=12, seed=3)


def answer(model: LoadedModel, prompt: list[int], reuse: bool = True,
           sampling: SamplingParams = GREEDY) -> tuple[list[int], Finished]:
    """The answer's tokens and its ``Finished`` event, reusing the slot's KV when ``reuse``."""
    ids: list[int] = []
    finished = None
    for event in model.generate(prompt, sampling, reuse_kv=reuse):
        if isinstance(event, Chunk):
            ids += event.token_ids
        elif isinstance(event, Finished):
            finished = event
    assert finished is not None
    return ids, finished


def fresh(model: LoadedModel, prompt: list[int], sampling: SamplingParams = GREEDY) -> list[int]:
    """The answer after a full prefill of ``prompt`` (nothing reused)."""
    return answer(model, prompt, reuse=False, sampling=sampling)[0]

"""Embeddings run between the steps of running answers, one input per pass of the loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import EmbedJob, Embeddings, GenerateJob
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.runtime.model import LoadedModel

STARTER = "smollm2-135m-instruct:q4_1"


def test_an_answer_keeps_streaming_while_a_long_embedding_job_runs(home: Path, smollm2_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    step, embed = LoadedModel.step, LoadedModel.embed

    def recording_step(self: LoadedModel, sequences: list, budget: int) -> int:
        order.append("step")
        return step(self, sequences, budget)

    def recording_embed(self: LoadedModel, text: str) -> list[float]:
        order.append("embed")
        return embed(self, text)

    monkeypatch.setattr(LoadedModel, "step", recording_step)
    monkeypatch.setattr(LoadedModel, "embed", recording_embed)
    with Engine() as engine:
        engine.update_settings(context_size=1024, parallel_sequences=2)
        list(engine.scheduler.submit(EmbedJob(STARTER, ["warm up"])))  # both contexts resident
        answer = engine.scheduler.submit(GenerateJob(
            model_id=STARTER, sampling=SamplingParams(temperature=0.0, max_tokens=120, logit_bias={0: -100, 1: -100, 2: -100}),
            messages=[{"role": "user", "content": "Write a long story about a river."}]))
        events = iter(answer)
        first = next(e for e in events if isinstance(e, Chunk))
        assert first.text
        order.clear()
        inputs = [f"sentence number {i} about rivers and boats" for i in range(12)]
        result = engine.scheduler.submit(EmbedJob(STARTER, inputs)).embeddings()
        rest = [e for e in events if isinstance(e, Finished)]
    assert isinstance(result, Embeddings) and len(result.vectors) == len(inputs)
    assert rest and rest[0].finish_reason == "length"
    embeds = [i for i, what in enumerate(order) if what == "embed"]
    assert len(embeds) == len(inputs)
    # The answer was stepped between the embedding job's inputs, not held for all of them.
    between = order[embeds[0]:embeds[-1]]
    assert between.count("step") >= len(inputs) - 1


def test_a_cancelled_embedding_job_ends_between_inputs(home: Path, smollm2_path: Path) -> None:
    with Engine() as engine:
        engine.update_settings(context_size=1024)
        handle = engine.scheduler.submit(EmbedJob(STARTER, ["one"] * 40))
        handle.cancel()
        events = list(handle)
    assert not any(isinstance(e, Embeddings) for e in events)
    assert any(isinstance(e, Finished) and e.finish_reason == "cancelled" for e in events)

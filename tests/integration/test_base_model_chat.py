"""A chat with a model that has no chat template (gemma-3-270m base, read through the ChatML
fallback) ends where the fallback's turn ends: the markers are plain text in gemma's
vocabulary, so without them as stop strings a base model writes "<|im_end|><|im_start|>…"
until the token cap. A raw-text completion of the same model is not cut at them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import GenerateJob, JobHandle
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.text.chat_template import FALLBACK_STOPS
from tests.integration.test_resident_models import gemma_id

# Seeds whose answers, read with the fallback template, write its end marker early (seen in
# the length benchmark: seed 0 starts the answer with "<|im_end|>").
SEEDS = (0, 1, 2, 3)


@pytest.fixture()
def engine(home: Path, gemma_path: Path) -> Iterator[Engine]:
    with Engine() as engine:
        engine.update_settings(parallel_sequences=1, context_size=1024)
        engine.registry.register_file(gemma_path)
        yield engine


def answer(handle: JobHandle) -> tuple[str, Finished]:
    text: list[str] = []
    for event in handle:
        if isinstance(event, Chunk):
            text.append(event.text)
        elif isinstance(event, Finished):
            return "".join(text), event
    raise AssertionError("the job ended without a Finished event")


def test_a_fallback_chat_ends_at_the_fallback_turn_marker(engine: Engine) -> None:
    model_id = gemma_id(engine)
    stopped_at_marker = 0
    for seed in SEEDS:
        job = GenerateJob(model_id, sampling=SamplingParams(seed=seed, max_tokens=400),
                          messages=[{"role": "user", "content": "Say this is a test"}], use_cache=False)
        text, finished = answer(engine.scheduler.submit(job))
        assert not any(marker in text for marker in FALLBACK_STOPS), text
        stopped_at_marker += finished.finish_reason == "stop" and finished.usage.completion_tokens < 400
    assert stopped_at_marker >= 1  # at least one of these seeds reaches a marker within the cap


def test_a_raw_completion_is_not_cut_at_the_fallback_markers(engine: Engine) -> None:
    job = GenerateJob(gemma_id(engine), sampling=SamplingParams(temperature=0.0, max_tokens=24),
                      text="<|im_start|>user\nHello<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>",
                      use_cache=False)
    text, finished = answer(engine.scheduler.submit(job))
    assert finished.finish_reason == "length"  # no template stops in a raw-text prompt

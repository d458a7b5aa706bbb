"""The default KV configuration keeps the prefix cache exact.

The prefix cache restores a saved prompt and reads only the new tokens; that reproduces a
full prefill bit for bit only if every reused row's KV, and the rows read again, were
computed as a full prefill computes them. The default ("auto": f16 K/V with flash
attention) gets there by reading prompts in chunks of at least ``canonical_rows``: 64 with
upstream llama.cpp, whose CPU flash-attention kernel takes another path for fewer rows, and
32 with the recipe's patch, which sends every chunk of 32 rows or more down the tiled path;
each row's result depends only on the path (``model_loading.canonical_rows``). These tests check the
logits themselves, through the engine's own step, on both test models.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions

from ..prefix_rule import least_read_again, served
from .conftest import GPU_LAYERS, record_for

pytestmark = pytest.mark.integration

TEXT = ("The lighthouse keeper climbed the stairs each evening, counting the steps aloud, and lit the lamp "
        "before the fishing boats came home across the grey water of the bay. ") * 12
# Greedy, one token, the top 20 log-probabilities: a log-softmax over every logit, so any
# difference in any logit shows.
FIRST_TOKEN = SamplingParams(temperature=0.0, max_tokens=1, logprobs=20)


def first_token(model: LoadedModel, prompt: list[int], reuse: bool) -> tuple[list[float], int]:
    """The first answer token's top log-probabilities, and how many prompt tokens were reused."""
    events = list(model.generate(prompt, FIRST_TOKEN, reuse_kv=reuse))
    chunk = next(e for e in events if isinstance(e, Chunk))
    done = events[-1]
    assert isinstance(done, Finished) and chunk.logprobs
    return [lp for _, _, lp in chunk.logprobs[0].top], done.usage.cached_tokens


def load(path: Path, model_id: str, batch: int = 512) -> LoadedModel:
    return LoadedModel(record_for(path, model_id), LoadOptions(context_size=1024, gpu_layers=GPU_LAYERS,
                                                              batch_size=batch))


@pytest.fixture(params=["smollm2", "gemma"])
def model(request: pytest.FixtureRequest, smollm2_path: Path, gemma_path: Path):
    path = smollm2_path if request.param == "smollm2" else gemma_path
    loaded = load(path, request.param)
    yield loaded
    loaded.close()


def test_the_cpu_default_is_f16_with_flash_attention_read_in_tiles(model: LoadedModel) -> None:
    if GPU_LAYERS == 0:
        # 32 with the recipe's flash-attention patch (tiles from 32 rows), 64 without it or
        # for gemma-3's window-sized cache.
        assert (model.kv_cache_type, model.flash_attention, model.canonical_rows) == (
            "f16", True, least_read_again(window_cache=model.context.window_cache))


@pytest.mark.parametrize("cached", [30, 100, 250, 330, 390])
def test_a_reused_prefix_gives_the_logits_of_a_full_prefill_bit_for_bit(model: LoadedModel, cached: int) -> None:
    prompt = model.tokenize(TEXT)[:400]
    whole, reused = first_token(model, prompt, reuse=False)
    assert reused == 0
    first_token(model, prompt[:cached], reuse=False)  # the earlier turn, now in the slot
    again, reused = first_token(model, prompt, reuse=True)
    # The slot serves what it read in tiles, and the last rows are always read again.
    assert reused == served(cached, len(prompt), least=model.canonical_rows, align=model.prefill_align)
    assert again == whole  # bit for bit: the prefix cache's exactness is not a tolerance


def test_an_answer_in_the_prefix_is_read_again_and_the_logits_still_match(model: LoadedModel) -> None:
    """Decode steps write KV one row at a time, which a full prefill would not: the next
    turn reuses the prompt before the answer and reads the answer again."""
    question = model.tokenize(TEXT)[:200]
    events = list(model.generate(question, SamplingParams(temperature=0.0, max_tokens=24), reuse_kv=False))
    answer = [t for e in events if isinstance(e, Chunk) for t in e.token_ids]
    follow_up = question + answer + model.tokenize(" And then?", add_special=False)
    again, reused = first_token(model, follow_up, reuse=True)
    assert reused == served(len(question), len(follow_up), least=model.canonical_rows, align=model.prefill_align)
    whole, _ = first_token(model, follow_up, reuse=False)
    assert again == whole


@pytest.mark.parametrize("batch", [256, 300])
def test_prompt_chunks_never_leave_a_short_tail(model: LoadedModel, batch: int) -> None:
    """A micro-batch smaller than the prompt cuts it into chunks; they end on aligned
    positions and none falls under the tile size, so the logits are those of one batch."""
    prompt = model.tokenize(TEXT)[:400]  # cut at 256 or 288, on aligned positions
    whole, _ = first_token(model, prompt, reuse=False)
    small = load(model.record.path, model.record.id, batch=batch)
    try:
        cut, _ = first_token(small, prompt, reuse=False)
    finally:
        small.close()
    assert cut == whole

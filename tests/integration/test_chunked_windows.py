"""Chunked attention windows (Llama 4, MobileLLM-R1): three of every four layers attend only
within chunks of 8,192 positions, and llama.cpp keeps a window-sized cache for them (8,192
cells and a micro-batch), dropping a chunk's cells once the ring needs them for the next.

The model is a tiny Llama 4 written by the test (``tests/llama4_writer.py``: random weights,
SmolLM2's tokenizer), so prompts can cross a chunk on a 2-core CPU. Every reuse is compared
with a full prefill of the same prompt at temperature 0. The engine once read the window
from the header (where Llama 4 has none), saw no window layers, and resumed such a cut from
cells llama.cpp had already dropped: the edit below answered other tokens than a full prefill.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.fit import ModelShape, kv_cache_bytes, window_checkpoint_bytes
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.swa_checkpoints import window_cells
from inglenook.engine.store.cache import MIB, PrefixCache

from ..llama4_writer import CHUNK, write_llama4
from ..prefix_rule import least_read_again
from .conftest import GPU_LAYERS, record_for
from .greedy_answers import answer, fresh

GREEDY = SamplingParams(temperature=0.0, max_tokens=16, seed=3)
CONTEXT = 12288  # a chunk and a half: room for prompts that cross the first chunk's end
MODEL_ID = "tiny-llama4:f32"


@pytest.fixture(scope="module")
def llama4_path(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llama4(tmp_path_factory.mktemp("llama4") / "tiny-llama4.gguf", smollm2_path)


def load(path: Path) -> LoadedModel:
    return LoadedModel(record_for(path, MODEL_ID), LoadOptions(context_size=CONTEXT, gpu_layers=GPU_LAYERS))


@pytest.fixture(scope="module")
def llama4(llama4_path: Path):
    model = load(llama4_path)
    yield model
    model.close()


def words(model: LoadedModel, count: int, tag: str = "") -> list[int]:
    """``count`` tokens of a ship's log (what they say does not matter to a random model)."""
    text = "".join(f"Ship {i}{tag} passed the lighthouse with {i * 7 % 50} crates.\n" for i in range(count // 8))
    tokens = model.tokenize(text, add_special=False)
    assert len(tokens) >= count
    return tokens[:count]


def test_llama4_window_layers_load_in_chunks_at_window_size(llama4_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="inglenook.llama"):
        model = load(llama4_path)
    try:
        # llama.cpp's chunk, not the header's (it has no window key): a window-sized cache.
        assert (model.n_swa, model.context.window_chunked, model.window_cache) == (CHUNK, True, True)
    finally:
        model.close()
    sizes = [r.getMessage() for r in caplog.records if "KV cache, size =" in r.getMessage()]
    assert any("SWA KV cache, size = 8704 cells" in line and "non-SWA" not in line for line in sizes), sizes
    # The estimate counts the same: 3 chunked layers at 8,704 cells, 1 full one at the context.
    shape = ModelShape.from_gguf(read_gguf(llama4_path))
    assert (shape.n_swa, shape.swa_layers, shape.n_layers) == (CHUNK, 3, 4)
    cell = 2 * 16 * 2 * 2  # K and V, 2 KV heads of 16 dimensions, f16
    assert kv_cache_bytes(shape, CONTEXT) == (1 * CONTEXT + 3 * 8704) * cell
    assert window_checkpoint_bytes(shape, CONTEXT) == 2 * 3 * CHUNK * cell


def test_an_edit_back_into_an_earlier_chunk_answers_as_a_full_prefill(llama4: LoadedModel) -> None:
    prompt = words(llama4, 10_000)
    answer(llama4, prompt, reuse=False, sampling=GREEDY)
    # The ring of 8,704 cells now holds positions 1,296 on: the first chunk's start is gone,
    # and position 8,000 attends back to it.
    edited = prompt[:8000] + words(llama4, 40, tag="b")
    got, finished = answer(llama4, edited, sampling=GREEDY)
    assert finished.usage.cached_tokens <= 8000
    assert got == fresh(llama4, edited, GREEDY)


def test_an_edit_inside_the_last_chunk_keeps_the_cache(llama4: LoadedModel) -> None:
    prompt = words(llama4, 10_000)
    answer(llama4, prompt, reuse=False, sampling=GREEDY)
    # Position 9,500 attends back to 8,192 only, still in the ring: nothing is read again
    # before the cut (less the canonical tail every resume reads).
    edited = prompt[:9500] + words(llama4, 40, tag="c")
    got, finished = answer(llama4, edited, sampling=GREEDY)
    assert finished.usage.cached_tokens >= 9500 - 2 * least_read_again(window_cache=True)
    assert got == fresh(llama4, edited, GREEDY)


def test_a_restart_resumes_across_a_chunk_end_from_its_checkpoint(llama4_path: Path, tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, lambda: 256 * MIB, lambda: 1024 * MIB)
    model = load(llama4_path)
    try:
        # The prompt ends 16 tokens into the second chunk; a regenerate resumes before it
        # (reading the prompt's last rows again, ``least_read_again``).
        prompt = words(model, CHUNK + 16)
        ids, _ = answer(model, prompt, reuse=False, sampling=GREEDY)
        ends = [c.position for c in model.slots[0].checkpoints]
        assert any(position < CHUNK for position in ends), ends
        # A checkpoint before the chunk's end holds the first chunk up to it.
        first = max((c for c in model.slots[0].checkpoints if c.position < CHUNK), key=lambda c: c.position)
        assert window_cells(first.payload) == first.position
        cache.save(model.slot_view(model.slots[0]), len(prompt), conversation_id=1)
        cache.flush()
    finally:
        model.close()
        cache.close()
    cache = PrefixCache(tmp_path, lambda: 256 * MIB, lambda: 1024 * MIB)
    model = load(llama4_path)  # a restart
    try:
        # The saved state's window layers hold the second chunk's 16 cells only: the
        # regenerate resumes from the checkpoint the state carries, not from the start.
        restored = cache.restore(model.slot_view(model.slots[0]), prompt, conversation_id=1)
        assert len(prompt) - 128 < restored < CHUNK
        again, finished = answer(model, prompt, sampling=GREEDY)
        assert finished.usage.cached_tokens == restored
        assert again == ids == fresh(model, prompt, GREEDY)
    finally:
        model.close()
        cache.close()

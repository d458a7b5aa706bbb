"""How many prompt tokens the prefix cache serves, for tests that check the count.

The rule lives in the engine (``Sequence.take_prefill``, ``KvStates.reusable_prefix``,
``runtime.slots``): a slot or state serves the tokens it read in canonical chunks, up to an
aligned position, and leaves at least ``canonical_rows`` tokens of the new prompt to read
again. Tests state their expectation through this one function rather than each repeating
the arithmetic.
"""

from __future__ import annotations

import functools
import os

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.model_loading import LoadOptions, canonical_rows, prefill_alignment
from inglenook.engine.runtime.native import build_patches
from inglenook.engine.runtime.slots import PREFILL_ALIGN


@functools.cache
def least_read_again(window_cache: bool = False) -> int:
    """The default configuration's ``canonical_rows`` with the llama.cpp this checkout built:
    32 rows on the CPU with the recipe's flash-attention patch, 64 (one tile) for a model
    with a window-sized cache, with layers on a GPU or without the patch."""
    offloads = int(os.environ.get("INGLENOOK_TEST_GPU_LAYERS", "0")) != 0
    return canonical_rows(LoadOptions(), "f16", True, offloads=offloads, patches=build_patches(),
                          window_cache=window_cache)


@functools.cache
def alignment(window_cache: bool = False) -> int:
    """Where reused prompt chunks end (``model_loading.prefill_alignment``) for the suite's
    models: the chat model, SmolLM2 (Q4_1 weights), anywhere on an x86 CPU; the model with
    a window-sized cache, gemma-3-270m (Q4_K weights, repacked kernels), on multiples of
    ``PREFILL_ALIGN``."""
    starter = find_starter_model()
    if window_cache or starter is None:
        return PREFILL_ALIGN
    offloads = int(os.environ.get("INGLENOOK_TEST_GPU_LAYERS", "0")) != 0
    return prefill_alignment(read_gguf(starter), offloads=offloads)


def served(read_before: int, prompt: int, common: int | None = None, least: int | None = None,
           window_cache: bool = False, align: int | None = None) -> int:
    """Tokens reused for a ``prompt``-token prompt from a slot that read ``read_before``
    prompt tokens (in one prompt read, the default configuration's ``least``), sharing
    ``common`` leading tokens with it (all of ``read_before`` when None)."""
    least = least_read_again(window_cache) if least is None else least
    align = alignment(window_cache) if align is None else align
    if read_before < least:  # a prompt shorter than a tile is read whole and not kept
        return 0
    kept = read_before - read_before % align
    limit = min(kept, prompt - least, read_before if common is None else common)
    return max(0, limit - limit % align)


# A system prompt of ~150 tokens: long enough that a prompt starting with it is partly
# served from the cache (it outlasts the 64 tokens every prompt reads again without the
# flash-attention patch).
LONG_INSTRUCTIONS = ("You are a friendly assistant in a small bakery's shop window. Keep every answer short, "
                     "kind and to the point. ") * 6

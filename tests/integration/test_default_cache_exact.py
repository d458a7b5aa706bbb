"""The default KV configuration keeps the prefix cache exact.

The prefix cache restores a saved prompt and reads only the new tokens; that reproduces a
full prefill bit for bit only if the logits do not depend on how the prompt was split into
batches. The CPU default ("auto": q8_0 K/V with flash attention) has that property for
SmolLM2 (Q4_1) on every CPU variant: one token at a time, ragged and aligned chunks give
the same logits. The old default (f16 without flash attention) did not: a prompt read one
token at a time differed from one read in a batch by up to 0.74 in a logit.

gemma-3-270m (Q4_K_M) is split-dependent in every configuration on the CPU (its K-quant
matrix kernels take another path for small batches: up to ~1.2 apart with the old default,
~1.4 with the new one), so for it the guarantee is the greedy one, tested in test_runtime.py
and test_prefix_cache.py: a restored conversation continues with the same tokens.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions

from .conftest import GPU_LAYERS, record_for

pytestmark = pytest.mark.integration

TEXT = ("The lighthouse keeper climbed the stairs each evening, counting the steps aloud, and lit the lamp "
        "before the fishing boats came home across the grey water of the bay.")


def logits_split_by(path: Path, model_id: str, batch: int) -> tuple[np.ndarray, LoadedModel]:
    model = LoadedModel(record_for(path, model_id), LoadOptions(context_size=256, gpu_layers=GPU_LAYERS, batch_size=batch))
    try:
        return model.logits_for(model.tokenize(TEXT)), model
    finally:
        model.close()


def test_default_configuration_gives_the_same_logits_however_the_prompt_is_split(smollm2_path: Path) -> None:
    whole, model = logits_split_by(smollm2_path, "smollm2:q4_1", 64)
    if GPU_LAYERS == 0:
        # The CPU default: flash attention on, over a q8_0 cache.
        assert (model.kv_cache_type, model.flash_attention) == ("q8_0", True)
    for batch in (1, 5, 16):  # one token at a time, ragged chunks, aligned chunks
        split, _ = logits_split_by(smollm2_path, "smollm2:q4_1", batch)
        # Bit for bit: the prefix cache's exactness is not a tolerance.
        assert np.array_equal(split, whole), f"batches of {batch}: max difference {np.abs(split - whole).max()}"

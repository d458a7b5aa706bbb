"""What a llama.cpp sequence id holds (``KvSlot``), and the states a sequence goes through.

``KvSlot`` is the tokens whose KV entries a sequence id has, and how many of those were
prefilled (only those are reused and saved; see ``prefilled``). The model's context (which
makes one per sequence id), its ``KvStates``, the draft model and the scheduler all name
slots; a ``Sequence`` (``sequence.py``) is one job's progress through one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PREFILL = "prefill"
DECODE = "decode"
DONE = "done"

# Query rows per tile of llama.cpp's CPU flash-attention kernel (GGML_FA_TILE_Q in
# ggml-cpu/common.h of the vendored source): a sequence with at least this many rows in a
# micro-batch takes the tiled path (model_loading.canonical_rows).
FA_TILE_ROWS = 64
# Prompt chunks that are reused end on positions that are multiples of this. Matrix kernels
# for repacked K-quant weights (gemma-3-270m's Q4_K, on x86) take a micro-batch's rows in
# groups of 4 and the leftover rows one at a time, with results that differ in the last
# bits: a 150-row chunk after a restored prefix gave other logits than the same rows inside
# one 400-row batch. With chunk boundaries on fixed positions, the same rows fall in the
# same groups whatever was restored; 32 covers the 4-, 8- and 16-row groupings of the CPU
# backends' kernels. A model none of whose KV-writing matrices such a kernel takes uses 1
# instead (``model_loading.prefill_alignment``; a context's ``prefill_align``).
PREFILL_ALIGN = 32


# How many window checkpoints a slot keeps (``swa_checkpoints.thinned`` drops the rest):
# as many as its context pays for (``fit.checkpoints_per_sequence``, which the fit estimate
# counts too), within these bounds. The fewest are the two a prompt's end takes (a
# regenerate, an edit of the last question).
MIN_CHECKPOINTS = 2
MAX_CHECKPOINTS = 8


@dataclass(frozen=True)
class Checkpoint:
    """The sliding-window layers' part of a sequence's state when it held ``position``
    tokens (``swa_checkpoints``): with a window-sized cache, a sequence cut back to an
    earlier position needs these to continue exactly there."""

    position: int
    payload: Any  # np.ndarray of uint8: what llama_state_seq_get_data_ext copied out


@dataclass
class KvSlot:
    seq_id: int
    kv_tokens: list[int] = field(default_factory=list)
    # How many leading kv_tokens were computed by prompt prefill in chunks of at least the
    # model's ``canonical_rows``. Only those are reused and saved: llama.cpp's CPU kernels
    # compute smaller batches (every decode step, with flash attention any chunk under 64
    # rows) slightly differently, so KV written that way would make a continuation drift
    # from what a full prefill of the same prompt produces.
    prefilled: int = 0
    busy: bool = False
    last_used: float = 0.0
    # The key of the LoRA set its KV entries were computed with ("" for none): they serve
    # only a sequence that runs with the same set (``KvStates.reusable_prefix``).
    lora: str = ""
    # Window checkpoints at positions within kv_tokens, oldest first (empty for models
    # without a window-sized cache): where a cut may resume (``swa_checkpoints``).
    checkpoints: list[Checkpoint] = field(default_factory=list)

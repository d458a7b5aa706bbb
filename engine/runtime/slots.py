"""What a llama.cpp sequence id holds (``KvSlot``), and the states a sequence goes through.

``KvSlot`` is the tokens whose KV entries a sequence id has, and how many of those were
prefilled (only those are reused and saved; see ``prefilled``). The model, its loading and
state halves, the draft model and the scheduler all name slots; a ``Sequence``
(``sequence.py``) is one job's progress through one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PREFILL = "prefill"
DECODE = "decode"
DONE = "done"


@dataclass
class KvSlot:
    seq_id: int
    kv_tokens: list[int] = field(default_factory=list)
    # How many leading kv_tokens were computed by prompt prefill in batches of two or more
    # tokens. Only those are reused: llama.cpp's CPU kernels compute a one-token batch
    # (every decode step) slightly differently, so KV written by decode steps would make
    # a continuation drift from what a full prefill of the same prompt produces.
    prefilled: int = 0
    busy: bool = False
    last_used: float = 0.0
    # The key of the LoRA set its KV entries were computed with ("" for none): they serve
    # only a sequence that runs with the same set (``LoadedModel.reusable_prefix``).
    lora: str = ""

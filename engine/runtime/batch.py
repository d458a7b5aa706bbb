"""A row of a llama.cpp batch: what the target model and its draft model both decode.

Its own module so that the draft model (``draft_model.py``), which ``LoadedModel`` holds,
builds rows without importing the model that holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Which tokens of a batch row want logits.
NONE, LAST, ALL = "none", "last", "all"


@dataclass(frozen=True)
class BatchRow:
    """Consecutive tokens of one sequence, starting at position ``first_pos``."""

    seq_id: int
    first_pos: int
    tokens: list[int]
    logits: str  # NONE | LAST | ALL

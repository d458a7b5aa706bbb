"""What a sequence and a draft model read of the loaded model they run on.

``model.LoadedModel`` opens sequences and loads its draft model, so it imports both; they
are typed against this view instead of against it, which keeps the import graph one way
(model -> sequence, draft_model -> model_view) with nothing running back up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..base import ModelRecord
    from .decoder import Decoder
    from .kv_states import KvStates
    from .model_loading import LlamaContext, LoadOptions
    from .slots import KvSlot
    from .speculative import RowCost


class ModelView(Protocol):
    """A loaded model as its sequences and its draft model see it."""

    context: LlamaContext
    decoder: Decoder  # the batch in, logits and log-probabilities out
    kv: KvStates
    row_cost: RowCost  # what a draft row costs here, measured from decode steps

    @property
    def record(self) -> ModelRecord: ...

    @property
    def options(self) -> LoadOptions: ...

    @property
    def slots(self) -> list[KvSlot]: ...

    @property
    def n_ctx(self) -> int: ...

    @property
    def n_vocab(self) -> int: ...

    @property
    def canonical_rows(self) -> int: ...

    @property
    def prefill_align(self) -> int: ...

    @property
    def window_cache(self) -> bool: ...

    @property
    def speculative_mode(self) -> str: ...

    def token_bytes(self, token: int) -> bytes: ...

    def is_end_of_generation(self, token: int) -> bool: ...

    def cut_at_end(self, draft: list[int]) -> list[int]: ...

    def close(self) -> None: ...

"""A draft model for speculative decoding: a small model with the target's vocabulary.

It is resident beside the target (loaded and closed with it) in its own context with one
sequence per target sequence. Each step it catches up with what every decoding target
sequence has emitted (its own KV trimmed back to the common prefix, the rest fed in a
chunk that fits its batch, so a new prompt enters over several steps instead of stalling
the others), then drafts greedily, all sequences in one decode per draft token. The
target verifies the drafts (``Sequence.verify``); a greedy draft is deterministic, so
that verification keeps the target's own output distribution.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from ..base import ModelLoadError
from .batch import LAST, BatchRow

if TYPE_CHECKING:
    # Type names only: the target model imports this module and hands over both models.
    from .model_view import ModelView
    from .sequence import Sequence
    from .slots import KvSlot

log = logging.getLogger(__name__)

# llama.cpp's speculative examples allow vocabularies this far apart in size (padding).
VOCAB_SIZE_SLACK = 128
# A draft stops at a token the draft model itself gives less than this probability: the
# target would likely reject it, and every rejected token costs a batch row.
MIN_DRAFT_PROBABILITY = 0.4


def vocabulary_mismatch(target: "ModelView", draft: "ModelView") -> str | None:
    """Why ``draft`` cannot draft for ``target`` (token ids that mean different text), or None."""
    lib = target.context.lib
    if abs(target.n_vocab - draft.n_vocab) > VOCAB_SIZE_SLACK:
        return f"{target.n_vocab} tokens against {draft.n_vocab}"
    ours, theirs = target.context.vocab, draft.context.vocab
    if lib.llama_vocab_type(ours) != lib.llama_vocab_type(theirs):
        return "different tokenizer types"
    for token in range(min(target.n_vocab, draft.n_vocab)):
        if lib.llama_vocab_get_text(ours, token) != lib.llama_vocab_get_text(theirs, token):
            return f"token {token} differs"
    return None


class DraftVocabularyMismatch(ModelLoadError):
    """The draft model's token ids mean other text than the target's."""


class DraftModel:
    """Drafts for the sequences of one target model."""

    def __init__(self, target: "ModelView", model: "ModelView") -> None:
        """Draft for ``target`` with ``model`` (loaded by the target, which this module does
        not import); closes ``model`` and raises if their vocabularies differ."""
        self.target = target
        self.model = model
        record = model.record
        problem = vocabulary_mismatch(target, model)
        if problem is not None:
            model.close()
            raise DraftVocabularyMismatch(
                f"{record.id} cannot be the draft model of {target.record.id}: their vocabularies "
                f"differ ({problem}); pick a draft model of the same family")
        log.info("draft model %s loaded beside %s", record.id, target.record.id)

    def close(self) -> None:
        self.model.close()

    def propose(self, sequences: list["Sequence"]) -> list[list[int]]:
        """One draft per sequence (empty for those paused, out of budget or still catching up)."""
        # Draft positions must also fit the draft's own context (it may be trained for less).
        cost = self.target.row_cost
        wanted = [min(s.control.wanted(s.draft_room(), cost.per_row, cost.base), self.model.n_ctx - len(s.tokens) - 1)
                  if s.control is not None else 0 for s in sequences]
        drafts: list[list[int]] = [[] for _ in sequences]
        ready = self._catch_up([s for s, n in zip(sequences, wanted) if n > 0])
        active = [(i, s, n) for i, (s, n) in enumerate(zip(sequences, wanted)) if s.seq_id in ready]
        while active:
            still = []
            for i, sequence, n in active:
                token = self._confident_argmax(ready[sequence.seq_id])
                if token is None:
                    continue
                drafts[i].append(token)
                if len(drafts[i]) < n and not self.target.is_end_of_generation(token):
                    still.append((i, sequence, n))
            if not still:
                break
            rows = [(self.model.slots[s.seq_id], [drafts[i][-1]]) for i, s, _ in still]
            ready = dict(zip((s.seq_id for _, s, _ in still), self._decode(rows)))
            active = still
        return drafts

    def _confident_argmax(self, index: int) -> int | None:
        logits = self.model.decoder.logits_at(index)
        best = int(np.argmax(logits))
        peak = float(logits[best])
        probability = 1.0 / float(np.exp(logits - peak).sum())
        if best >= self.target.n_vocab or probability < MIN_DRAFT_PROBABILITY:
            return None
        return best

    def _catch_up(self, sequences: list["Sequence"]) -> dict[int, int]:
        """Feed each draft sequence what its target sequence emitted since the last step;
        the batch index of the logits after its last token, for those fully caught up."""
        model = self.model
        room = model.context.batch_capacity
        rows: list[tuple[KvSlot, list[int]]] = []
        complete: list[int] = []
        for sequence in sequences:
            slot = model.slots[sequence.seq_id]
            history = sequence.tokens
            common = 0
            limit = min(len(slot.kv_tokens), len(history) - 1)  # the last token is fed for its logits
            while common < limit and slot.kv_tokens[common] == history[common]:
                common += 1
            if common < len(slot.kv_tokens):
                model.context.lib.llama_memory_seq_rm(model.context.memory, slot.seq_id, common, -1)
                del slot.kv_tokens[common:]
            behind = history[common:]
            take = behind[:room]
            if not take:
                continue  # the batch is full: this one catches up next step
            room -= len(take)
            rows.append((slot, take))
            complete.append(len(take) == len(behind))
        indices = self._decode(rows) if rows else []
        return {slot.seq_id: index for (slot, _), index, done in zip(rows, indices, complete) if done}

    def _decode(self, rows: list[tuple["KvSlot", list[int]]]) -> list[int]:
        """Decode ``rows`` (each: a slot and its next tokens, logits for the last one)."""
        model = self.model
        indices, status = model.decoder.decode([BatchRow(slot.seq_id, len(slot.kv_tokens), tokens, LAST)
                                                for slot, tokens in rows])
        if status != 0:
            for slot, _ in rows:
                model.kv.clear(slot)
            raise ModelLoadError(f"llama.cpp failed to decode with the draft model {model.record.id} (status {status})")
        for slot, tokens in rows:
            slot.kv_tokens.extend(tokens)
        return indices

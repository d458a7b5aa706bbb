"""A context's sequences as KV state: what of a prompt a slot can reuse, trimming, and
copying a sequence's state out of llama.cpp and back (the prefix cache's payload).

``KvStates`` works on a ``LlamaContext``'s KV memory and its ``KvSlot``s and knows nothing
of the model that holds it: ``LoadedModel`` (model.py) keeps one as ``kv`` for its step
loop, and the prefix cache (``cache.py``, through ``SlotView``) is its one other user.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable

import numpy as np

from .model_loading import LlamaContext
from .slots import Checkpoint, KvSlot
from .swa_checkpoints import WindowCheckpoints, pack, packed_size, thinned, unpack, window_needed_from

log = logging.getLogger("inglenook.engine.runtime.model")


class KvStates:
    """The KV entries of a context's slots: reuse, trimming, clearing, saving and restoring.
    It reads the context's handles on every call, so it sees them freed by ``close``."""

    def __init__(self, context: LlamaContext) -> None:
        self.context = context
        self.checkpoints = WindowCheckpoints(context)

    def reusable_prefix(self, prompt: list[int], slot: KvSlot | None = None, shared: int = 0) -> int:
        """How many leading tokens of ``prompt`` a slot's resident KV cache can serve."""
        slot = slot or self.context.slots[0]
        if slot.lora != self.context.adapters.key:
            return 0  # that KV was computed with other adapters (or none)
        common = 0
        limit = min(slot.prefilled, len(slot.kv_tokens), len(prompt))
        while common < limit and slot.kv_tokens[common] == prompt[common]:
            common += 1
        return self.reusable_length(len(prompt), common, shared)

    def shared_boundary(self, shared: int) -> int:
        """Where reading a prompt whose first ``shared`` tokens every chat shares (a
        documents block) breaks: the last aligned position within them, so that the block's
        KV ends there in every chat and reading the rest starts there, cold or restored
        alike. 0 (no break) when no canonical chunk fits before it."""
        boundary = shared - shared % self.context.prefill_align
        return boundary if boundary >= self.context.canonical_rows else 0

    def reusable_length(self, prompt_tokens: int, common: int, shared: int = 0) -> int:
        """How many of ``common`` leading tokens, shared with KV read in canonical chunks, a
        prompt of ``prompt_tokens`` may reuse: at least ``canonical_rows`` of it are always
        read again, in one chunk whose KV and logits are those of a full prefill (its last
        row yields the first new token), and reading resumes on an aligned position, where
        a full prefill's chunks end too (``KvSlot.prefilled``, ``runtime/slots.py``).

        A prompt with ``shared`` leading tokens is read in two parts, up to and from its
        ``shared_boundary`` (``Sequence.take_prefill``), a full prefill as much as a restored
        one; so all of the first part is reusable however short the rest is (a question
        after a document is often shorter than ``canonical_rows``), and a restored prefix
        within the first part leaves a canonical chunk before the boundary."""
        limit = max(0, min(common, prompt_tokens - self.context.canonical_rows))
        limit -= limit % self.context.prefill_align
        boundary = self.shared_boundary(shared)
        if boundary and boundary < prompt_tokens:
            if common >= boundary:
                return max(limit, boundary)
            limit = min(limit, boundary - self.context.canonical_rows)
            limit -= limit % self.context.prefill_align
        return max(0, limit)

    def reuse_prefix(self, slot: KvSlot, prompt: list[int], shared: int = 0) -> int:
        """Keep the KV entries shared with ``prompt``; returns how many tokens were kept."""
        common = self.reusable_prefix(prompt, slot, shared)
        if common == 0:
            return self.clear(slot)
        return self._truncate(slot, common)

    def _truncate(self, slot: KvSlot, keep: int) -> int:
        """Drop KV entries from position ``keep`` on; returns the tokens kept: ``keep``, or
        with a window-sized cache whose window that cut lost, the position of the window
        checkpoint it resumed from (0 if it had to clear)."""
        if keep < len(slot.kv_tokens):
            context = self.context
            if not context.lib.llama_memory_seq_rm(context.memory, slot.seq_id, keep, -1):
                # Some caches (recurrent ones) cannot drop a tail: start over.
                return self.clear(slot)
            del slot.kv_tokens[keep:]
            if not self._window_intact(slot, keep):
                keep = self.checkpoints.restore(slot, keep)
                if keep == 0 or not self._window_intact(slot, keep):
                    return self.clear(slot)
        slot.prefilled = min(slot.prefilled, keep)
        # What follows the cut will be other tokens: checkpoints past it no longer hold.
        slot.checkpoints = [c for c in slot.checkpoints if c.position <= keep]
        return keep

    def _window_intact(self, slot: KvSlot, next_pos: int) -> bool:
        """Whether the sliding-window layers still hold every position ``next_pos`` attends to.

        A restored state carries only the last ``n_swa`` positions of those layers (with
        chunks, those of the last chunk), so after trimming it the window of the next token
        can reach positions that are gone; decoding on would silently attend to nothing
        there. (llama.cpp's server checks the same.)
        """
        context = self.context
        if context.n_swa <= 0 or next_pos == 0:
            return True
        oldest = context.lib.llama_memory_seq_pos_min(context.memory, slot.seq_id)
        return oldest <= window_needed_from(next_pos, context.n_swa, context.window_chunked)

    # -- sequence state (the prefix cache's payload) --------------------------------

    def state_key(self) -> str:
        """What a saved sequence state must match to be restored into this model."""
        from llama_cpp import __version__ as binding_version  # noqa: PLC0415 — already loaded

        # A saved sequence's bytes depend on the KV element type and on flash attention
        # (whether V is stored transposed); context and batch sizes do not change them, so a
        # state fits any context with room for its tokens.
        context = self.context
        layout = f"kv={context.kv_cache_type};fa={'on' if context.flash_attention else 'off'}"
        if context.window_cache:
            # Window-sized layers: another state layout, saved with its checkpoints (an
            # envelope, swa_checkpoints.pack); states of full-size window caches never match.
            layout += ";swa=window"
        # A state computed with adapters is only ever restored with the same ones and scales.
        lora = f"|lora {context.adapters.key}" if context.adapters.key else ""
        return f"{context.record.fingerprint}|{layout}|llama-cpp-python {binding_version}{lora}"

    def export_sequence(
        self, limit: int | None = None, destination: Callable[[int], np.ndarray | None] | None = None,
        seq_id: int = 0,
    ) -> tuple[list[int], np.ndarray] | None:
        """Copy a sequence's KV state out of llama.cpp: (the tokens it covers, its bytes).

        Keeps (and saves) at most ``limit`` tokens. Uses the per-sequence state API, which
        holds only the KV cells (no logits buffer); None when there is nothing to save or
        llama.cpp could not copy it. ``destination(size)`` may supply memory to copy into
        (the prompt cache hands over a buffer it has already paged in).
        """
        context = self.context
        slot = context.slots[seq_id]
        if context.closed or not slot.kv_tokens or slot.lora != context.adapters.key:
            return None
        # Only the prefilled part is ever reused, so only it is saved; for sliding-window
        # models this also makes the saved window end where the next turn continues.
        keep = slot.prefilled if limit is None else min(slot.prefilled, limit)
        if keep <= 0 or self._truncate(slot, keep) == 0:
            return None
        lib = context.lib
        size = lib.llama_state_seq_get_size(context.ctx, seq_id)
        if size <= 0:
            return None
        checkpoints = slot.checkpoints if context.window_cache else []
        total = packed_size(size, checkpoints) if context.window_cache else size
        payload = destination(total) if destination is not None else None
        if payload is None:
            # np.empty, not bytearray: zero-filling tens of MB first took longer than the copy.
            payload = np.empty(total, dtype=np.uint8)
        written = lib.llama_state_seq_get_data(
            context.ctx, payload.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), size, seq_id
        )
        if written != size:
            log.warning("llama.cpp copied %d of %d bytes of the sequence state; not saving it", written, size)
            return None
        if context.window_cache:
            pack(payload, size, checkpoints)
        return list(slot.kv_tokens), payload

    def import_sequence(self, tokens: list[int], payload: bytearray | bytes | np.ndarray, keep: int,
                        seq_id: int = 0) -> int:
        """Replace a sequence with a saved state covering ``tokens`` and keep its first ``keep``.

        Returns how many tokens the KV cache now holds: ``keep`` on success, 0 when
        llama.cpp refused the state or it cannot be trimmed to ``keep`` (the caller then
        prefills from the start, which is always correct).
        """
        context = self.context
        slot = context.slots[seq_id]
        self.clear(slot)
        if not tokens or keep <= 0 or len(tokens) > context.n_ctx:
            return 0
        checkpoints: list[Checkpoint] = []
        if context.window_cache:
            unpacked = unpack(np.frombuffer(payload, dtype=np.uint8) if not isinstance(payload, np.ndarray) else payload)
            if unpacked is None:
                log.warning("a saved state of %s lacks its window checkpoints; prefilling instead", context.record.id)
                return 0
            payload, checkpoints = unpacked
        lib = context.lib
        size = len(payload)
        # A writable buffer: bytes are copied; numpy's stubs lack the buffer protocol, its .data has it.
        buffer: bytearray | memoryview = (
            bytearray(payload) if isinstance(payload, bytes)
            else payload.data if isinstance(payload, np.ndarray) and payload.flags.writeable
            else bytearray(payload.tobytes()) if isinstance(payload, np.ndarray)
            else payload
        )
        view = (ctypes.c_uint8 * size).from_buffer(buffer)
        try:
            loaded = lib.llama_state_seq_set_data(context.ctx, view, size, seq_id)
        finally:
            del view
        if loaded == 0 or lib.llama_memory_seq_pos_max(context.memory, seq_id) != len(tokens) - 1:
            log.warning("llama.cpp did not accept a saved sequence state for %s; prefilling instead", context.record.id)
            return self.clear(slot)
        slot.kv_tokens = list(tokens)
        slot.prefilled = len(tokens)  # saved states hold prefilled tokens only
        # Copies: the payload may be a buffer the prefix cache hands out again. A state saved
        # from a longer context may carry more than this one keeps.
        kept = thinned([c for c in checkpoints if 0 < c.position <= len(tokens)], self.checkpoints.limit)
        slot.checkpoints = [Checkpoint(c.position, c.payload.copy()) for c in kept]
        keep = self._truncate(slot, min(keep, len(tokens)))
        if keep == 0:
            return 0
        if not self._window_intact(slot, keep):
            log.info("a restored state of %s lacks the sliding-window history for position %d", context.record.id, keep)
            return self.clear(slot)
        return keep

    def clear(self, slot: KvSlot | None = None) -> int:
        """Forget one slot's KV entries (default: every slot's)."""
        context = self.context
        for target in [slot] if slot is not None else context.slots:
            context.lib.llama_memory_seq_rm(context.memory, target.seq_id, -1, -1)
            target.kv_tokens = []
            target.prefilled = 0
            target.checkpoints = []
            target.lora = context.adapters.key  # what it computes from now on is under this set
        return 0

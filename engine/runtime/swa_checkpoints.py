"""Checkpoints of a sequence's sliding-window layers, for models whose window layers keep
only a window-sized cache (``LoadOptions.swa_full`` off, the default).

Such a cache holds a little more than the last ``n_swa`` positions of those layers: a
sequence can grow, but once cut back more than a few tokens the positions its next token
attends to are gone. llama.cpp can copy the window layers' part of a sequence's state on
its own (``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``; the full-attention layers keep every
position and are cut like any tail), so the engine keeps such copies at positions where a
later prompt may resume (``WindowCheckpoints.after_chunk``) and a cut that loses the window
goes back to the nearest one at or before it and reads the rest again (``restore``).
Llama 4's window layers attend within chunks of ``n_swa`` positions instead: the cells a
cut needs, and those a checkpoint holds, start at its chunk's start (``window_start``).

Checkpoints are taken only where the sequence's KV is canonical (an aligned position at or
before ``KvSlot.prefilled``), so resuming from one reads the same chunks a full prefill
reads. Upstream llama.cpp copies a sequence's state as it is, so a checkpoint can only be
taken where a chunk ends, and the prompt's end was read as two chunks to make one where its
last turn starts (``Sequence._resume_cut``). With the recipe's ``state-seq-window-at``
(``LlamaContext.state_end_at``) a copy can end at an earlier position: the last chunk is
read whole, and the checkpoints where it may be resumed are taken after it
(``after_chunk``), byte for byte what a copy taken at that position holds.

A saved state carries its slot's checkpoints in an envelope (``pack``/``unpack``): the
prefix cache stores it as one opaque payload, counted in its budget like the rest.
"""

from __future__ import annotations

import ctypes
import logging
import struct
from typing import TYPE_CHECKING

import numpy as np

from .fit import checkpoints_per_sequence
from .slots import MIN_CHECKPOINTS, Checkpoint, KvSlot

if TYPE_CHECKING:
    from .model_loading import LlamaContext

log = logging.getLogger("inglenook.engine.runtime.model")

PARTIAL_ONLY = 1  # LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY (llama.h): the window layers' part alone
# Tokens between the checkpoints taken while a long prompt is read (a slot keeps as many
# as its context pays for, ``WindowCheckpoints.limit``: gemma-3-270m's window part is
# 7.5 MiB, so its eight at 8,192 tokens cost what 4,096 positions of a full-size window
# cache would). A cut between two of them reads up to SPACING tokens again.
SPACING = 2048
# Besides where a prompt's last few tokens start (a regenerate resumes there), a checkpoint
# this many tokens before its end, on an aligned position: an edit of the last question or
# a branch from it cuts back that far, and a window model cannot cut back at all without a
# checkpoint at or before the cut (upstream's flash attention re-read 64 tokens anyway,
# which put the one resume checkpoint there).
LAST_TURN_REACH = 64

# The envelope of a saved state with checkpoints: the full state, each checkpoint's bytes,
# then per checkpoint (position, size), their count, the full state's size and a magic.
_ENTRY = struct.Struct("<IQ")
_TAIL = struct.Struct("<IQ8s")
_MAGIC = b"INGSWA01"


def _pointer(buffer: np.ndarray) -> "ctypes._Pointer[ctypes.c_uint8]":
    return buffer.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))


class WindowCheckpoints:
    """Taking, keeping and restoring a context's window checkpoints (one list per slot)."""

    def __init__(self, context: "LlamaContext") -> None:
        self.context = context

    @property
    def limit(self) -> int:
        """How many checkpoints a slot keeps: as many as the cells the window-sized cache
        saves pay for (``fit.checkpoints_per_sequence``; the fit estimate counts the same)."""
        context = self.context
        return checkpoints_per_sequence(context.n_swa, context.n_ctx, context.options.batch_size)

    @property
    def enabled(self) -> bool:
        return self.context.window_cache

    @property
    def inside_chunks(self) -> bool:
        """Whether a checkpoint can be taken at a position inside the chunk just read; else
        only where a chunk ends, and a prompt's last chunk is cut (``Sequence._resume_cut``)."""
        return self.enabled and self.context.state_end_at is not None

    @property
    def near_end(self) -> int:
        """A chunk that ends fewer than this many tokens before its prompt's end ends where
        a later prompt may resume: at one of the prompt's resume cuts without
        ``inside_chunks`` (``Sequence._resume_cut``), or, with it, where prompt reading
        squeezed between streaming answers happened to stop."""
        return max(self.context.canonical_rows, LAST_TURN_REACH) + self.context.prefill_align

    def after_chunk(self, slot: KvSlot, rows: int, remaining: int, boundary: int) -> None:
        """A prompt chunk of ``rows`` tokens was read into ``slot`` with ``remaining`` prompt
        tokens still to read: keep a checkpoint where a later prompt is likely to resume.
        That is where this prompt's last turn starts (``resume_points``: a regenerate, an
        edit of the last question, a branch, a continued answer or a follow-up after a long
        answer resumes there), a shared documents block's end, and every ``SPACING`` tokens
        of a long prompt (edits and branches further back)."""
        position = len(slot.kv_tokens)
        if remaining == 0 and self.inside_chunks:
            start = position - rows
            for point in resume_points(position, self.context.canonical_rows, self.context.prefill_align):
                # Inside this chunk only: its cells before the chunk's start may be gone.
                if start < point <= slot.prefilled and not has_checkpoint(slot, point):
                    self.take(slot, point)
            return
        if not self.enabled or remaining == 0 or slot.prefilled != position or position == 0:
            return
        last = slot.checkpoints[-1].position if slot.checkpoints else 0
        final = remaining < self.near_end
        if final or position == boundary or position - last >= SPACING:
            self.take(slot)

    def at_resume(self, slot: KvSlot, prompt_tokens: int) -> None:
        """A prompt of ``prompt_tokens`` resumes on what ``slot`` holds (restored or kept):
        when that is where its last chunk starts, no chunk of it will end there, so keep a
        checkpoint of it now (the same prompt again, a regenerate, resumes exactly there)."""
        position = len(slot.kv_tokens)
        if (not self.enabled or position == 0 or slot.prefilled != position
                or prompt_tokens - position >= self.near_end
                or has_checkpoint(slot, position)):
            return
        self.take(slot)

    def take(self, slot: KvSlot, position: int | None = None) -> bool:
        """Copy the window layers' state of ``slot`` as it is now, or as it was when the
        sequence ended at ``position`` (``inside_chunks`` only); False when llama.cpp could not."""
        context = self.context
        at = len(slot.kv_tokens) if position is None else position
        payload = self._copy(slot.seq_id, position)
        if payload is None:
            log.warning("llama.cpp could not copy a window checkpoint of %s", context.record.id)
            return False
        if position is not None and window_cells(payload) != position - window_start(
                position - 1, context.n_swa, context.window_chunked):
            # Not the cells a copy taken at ``position`` holds (the window the position before
            # it sees: some were written over by the chunk): resumes go further back.
            log.debug("no window checkpoint of %s at %d inside its last chunk", context.record.id, position)
            return False
        kept = [c for c in slot.checkpoints if c.position < at]
        slot.checkpoints = thinned([*kept, Checkpoint(at, payload)], self.limit)
        return True

    def _copy(self, seq_id: int, end: int | None) -> np.ndarray | None:
        """The window layers' state of ``seq_id``; with ``end``, as if the sequence ended
        there (the copy's end is set on this thread for the copy only)."""
        lib, ctx = self.context.lib, self.context.ctx
        end_at = self.context.state_end_at if end is not None else None
        if end is not None:
            assert end_at is not None, "checkpoints inside a chunk need state-seq-window-at"
            end_at(end)
        try:
            size = lib.llama_state_seq_get_size_ext(ctx, seq_id, PARTIAL_ONLY)
            if size <= 0:
                return None
            payload = np.empty(size, dtype=np.uint8)
            if lib.llama_state_seq_get_data_ext(ctx, _pointer(payload), size, seq_id, PARTIAL_ONLY) != size:
                return None
            return payload
        finally:
            if end_at is not None:
                end_at(-1)

    def restore(self, slot: KvSlot, keep: int) -> int:
        """``slot`` was cut to ``keep`` tokens and its window lost: resume it from the latest
        checkpoint at or before ``keep``. Returns the tokens it holds then, or 0 when no
        checkpoint serves (the caller clears it and the prompt is read from the start)."""
        context = self.context
        lib = context.lib
        for checkpoint in reversed(slot.checkpoints):
            position = checkpoint.position
            if position > keep or position > slot.prefilled or position == 0:
                continue
            payload: np.ndarray = checkpoint.payload
            if not lib.llama_memory_seq_rm(context.memory, slot.seq_id, position, -1):
                return 0
            del slot.kv_tokens[position:]
            slot.prefilled = min(slot.prefilled, position)
            loaded = lib.llama_state_seq_set_data_ext(context.ctx, _pointer(payload), len(payload), slot.seq_id,
                                                      PARTIAL_ONLY)
            if loaded != len(payload):
                log.warning("llama.cpp refused a window checkpoint of %s at %d", context.record.id, position)
                return 0
            slot.checkpoints = [c for c in slot.checkpoints if c.position <= position]
            log.debug("resumed %s from its window checkpoint at %d (cut at %d)", context.record.id, position, keep)
            return position
        return 0


def has_checkpoint(slot: KvSlot, position: int) -> bool:
    return any(c.position == position for c in slot.checkpoints)


def resume_points(end: int, least: int, align: int) -> list[int]:
    """Where a later prompt is likely to resume one that ends at ``end``, earliest first: the
    last aligned position ``LAST_TURN_REACH`` tokens back (an edit of the last question, a
    branch) and the last that leaves a canonical tail of ``least`` tokens (a regenerate:
    ``KvStates.reusable_length``)."""
    points = {end - back - (end - back) % align for back in (LAST_TURN_REACH, least)}
    return sorted(point for point in points if point > 0)


def window_start(position: int, n_swa: int, chunked: bool) -> int:
    """The first position a token at ``position`` attends to in the window layers: the last
    ``n_swa`` positions with a sliding window, those since the last multiple of ``n_swa``
    with chunks (Llama 4). A checkpoint taken when a sequence ends at ``p`` holds the cells
    from ``window_start(p - 1)`` to ``p``, what llama.cpp keeps unmasked for its last token."""
    if chunked:
        return position - position % n_swa
    return max(0, position - n_swa + 1)


def window_needed_from(next_pos: int, n_swa: int, chunked: bool) -> int:
    """The oldest position the window layers must still hold for the sequence to go on at
    ``next_pos``. With a sliding window one further back than the token there attends to,
    as llama.cpp's server asks: the window of a checkpoint at ``next_pos`` then passes. With
    chunks, the chunk's start (``next_pos`` itself when a new chunk begins there: its first
    token attends to nothing before it)."""
    if chunked:
        return window_start(next_pos, n_swa, chunked)
    return max(0, next_pos - n_swa)


_STATE_SEQ_MAGIC = 0xAF143CD8  # what llama.cpp's sequence-state copies begin with, then the sequence id


def window_cells(payload: np.ndarray) -> int:
    """The cells a window checkpoint of one sequence holds. After the magic and the sequence
    id, llama.cpp writes the stream count, then per stream its cell count and, when that is
    not 0, the cells; a sequence's cells are in one stream, so the first count that is not 0
    is theirs. -1 for a payload of another shape."""
    words = payload[:len(payload) - len(payload) % 4].view("<u4")
    if len(words) < 3 or int(words[0]) != _STATE_SEQ_MAGIC:
        return -1
    streams = int(words[2])
    for count in words[3:3 + streams]:
        if count:
            return int(count)
    return 0


def thinned(checkpoints: list[Checkpoint], limit: int) -> list[Checkpoint]:
    """At most ``limit`` (``MIN_CHECKPOINTS`` or more), the newest two always kept (where
    the last prompt ends: a regenerate and an edit of its last question resume there); of
    the others, drop the one whose neighbours lie closest together, so that the survivors
    stay spread over the whole sequence."""
    while len(checkpoints) > max(limit, MIN_CHECKPOINTS):
        gaps = [checkpoints[i + 1].position - (checkpoints[i - 1].position if i else 0)
                for i in range(len(checkpoints) - MIN_CHECKPOINTS)]
        del checkpoints[gaps.index(min(gaps))]
    return checkpoints


def packed_size(state_size: int, checkpoints: list[Checkpoint]) -> int:
    """The bytes of an envelope of a ``state_size``-byte state and ``checkpoints``."""
    return state_size + sum(len(c.payload) + _ENTRY.size for c in checkpoints) + _TAIL.size


def pack(buffer: np.ndarray, state_size: int, checkpoints: list[Checkpoint]) -> None:
    """Complete an envelope whose first ``state_size`` bytes (the full state) are written."""
    offset = state_size
    for checkpoint in checkpoints:
        buffer[offset:offset + len(checkpoint.payload)] = checkpoint.payload
        offset += len(checkpoint.payload)
    for checkpoint in checkpoints:
        buffer[offset:offset + _ENTRY.size] = np.frombuffer(
            _ENTRY.pack(checkpoint.position, len(checkpoint.payload)), dtype=np.uint8)
        offset += _ENTRY.size
    buffer[offset:offset + _TAIL.size] = np.frombuffer(_TAIL.pack(len(checkpoints), state_size, _MAGIC), dtype=np.uint8)


def unpack(payload: np.ndarray) -> tuple[np.ndarray, list[Checkpoint]] | None:
    """The full state and the checkpoints of an envelope; None when it is not one (a state
    saved without checkpoints, or damaged): the caller then reads the prompt again."""
    if len(payload) < _TAIL.size:
        return None
    count, state_size, magic = _TAIL.unpack(payload[len(payload) - _TAIL.size:].tobytes())
    table = len(payload) - _TAIL.size - count * _ENTRY.size
    if magic != _MAGIC or table < state_size:
        return None
    checkpoints: list[Checkpoint] = []
    offset = state_size
    for i in range(count):
        entry = table + i * _ENTRY.size
        position, size = _ENTRY.unpack(payload[entry:entry + _ENTRY.size].tobytes())
        if offset + size > table:
            return None
        checkpoints.append(Checkpoint(position, payload[offset:offset + size]))
        offset += size
    if offset != table:
        return None
    return payload[:state_size], checkpoints

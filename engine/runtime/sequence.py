"""One request's generation inside a shared llama.cpp context.

``Sequence`` is one job's progress through a slot: the prompt tokens still to prefill, its
own sampler chain and grammar, stop strings, UTF-8 stream, budget, timings and cancel
event. The context (``LoadedModel.step``) advances every active sequence with one
``llama_decode``; each sequence turns the logits of its rows into events.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..base import Chunk, Finished, GenerationEvent, PromptProgress, SamplingParams, Timings, TokenLogprob, Usage
from ..text import TextStream
from .native_sampler import NativeSampler
from .slots import DECODE, DONE, FA_TILE_ROWS, PREFILL, KvSlot
from .speculative import DraftControl, PromptLookup
from .swa_checkpoints import resume_points

if TYPE_CHECKING:
    # The types only: the model opens sequences (it imports this module), and each one
    # reads its model's context and vocabulary through ``ModelView``.
    from .kv_states import KvStates
    from .model_view import ModelView


class Sequence:
    """A job's generation state; created by ``LoadedModel.open_sequence``."""

    def __init__(self, model: "ModelView", slot: KvSlot, prompt: list[int], sampling: SamplingParams,
                 budget: int, cancel: threading.Event, started: float, cached_tokens: int,
                 boundary: int = 0, template_stops: tuple[str, ...] = ()) -> None:

        self.model = model
        self.slot = slot
        self.sampling = sampling
        self.budget = budget
        self.cancel = cancel
        self.started = started
        self.admitted = time.perf_counter()
        self.usage: Usage = Usage(prompt_tokens=len(prompt), cached_tokens=cached_tokens)
        self.timings: Timings = Timings()
        self.pending = prompt[cached_tokens:]  # prompt tokens not yet in the KV cache
        self.images_prefetched = False  # its images' encoding was started (ModelVision.prefetch_images)
        # Where a shared documents block's reading ends (``shared_boundary``): no chunk crosses it.
        self.boundary = boundary
        self.state = PREFILL
        self.feed: int | None = None  # the token to decode next step
        self.events: list[GenerationEvent] = []
        self.sampler = NativeSampler(model.context.lib, model.context.vocab, model.n_vocab, sampling)
        self._stream = TextStream(tuple(dict.fromkeys(sampling.stop + template_stops)))
        self._want_logprobs = sampling.logprobs is not None
        self._pending_ids: list[int] = []
        self._pending_lp: list[TokenLogprob] = []
        self._first_token_at = 0.0
        self._chunks_read = 0  # prompt chunks prefilled, for PromptProgress
        # Prompt then every emitted token: what lookup drafts copy from and a draft model
        # follows. ``control`` is None when this sequence never drafts.
        self.tokens = list(prompt)
        self.control: DraftControl | None = DraftControl() if model.speculative_mode != "off" else None
        self._lookup: PromptLookup | None = None
        self._shadow_guess: list[int] = []  # lookup's guess on a step that did not draft
        # Another sequence prefilling the same prompt: this one waits and copies its KV.
        self.leader: Sequence | None = None

    @property
    def seq_id(self) -> int:
        return self.slot.seq_id

    @property
    def done(self) -> bool:
        return self.state == DONE

    def drain(self) -> list["GenerationEvent"]:
        events, self.events = self.events, []
        return events

    # -- called by the context around each decode -------------------------------------

    def take_prefill(self, budget: int) -> list[int]:
        """The next prompt chunk, about ``budget`` tokens, cut so that its KV is exact.

        A chunk of at least the model's ``canonical_rows`` (and no more than a micro-batch)
        that ends on a multiple of the model's ``prefill_align`` (or at the prompt's end) writes the KV
        a full prefill writes, so the prefix cache may reuse it (``prefilled``); the cut
        never leaves a tail shorter than that, taking a little more or less than
        ``budget`` instead. A prompt shorter than that, or than a flash-attention tile
        (``FA_TILE_ROWS``), is read whole. Only a budget below
        it or below the alignment (prompt reading squeezed between streaming answers)
        gives smaller chunks, which are read but not reused.
        """
        least = self.model.canonical_rows
        align = self.model.prefill_align
        most = self.model.options.batch_size
        left = len(self.pending)
        start = len(self.slot.kv_tokens)
        if start < self.boundary:  # the shared block is read as if the prompt ended with it
            left = min(left, self.boundary - start)
        # A rest of at most a flash-attention tile is read whole even when the budget is
        # smaller: one short step, and squeezed into pieces it would take another kernel
        # path than it does alone, so an answer beside others would not be its lone self.
        if left <= max(least, FA_TILE_ROWS) or (left <= most and left <= budget):
            take = left
        elif budget < max(least, align):
            # Too little to reach the next aligned position (or to make a canonical chunk).
            take = max(1, min(budget, left - least) if left - budget < least else budget)
        else:
            take = min(budget, most)
            take -= (start + take) % align
            if left - take < least or take < least:
                # Leave a full canonical tail: take less, or everything when that fits.
                take = left if left <= most else left - least - (start + left - least) % align
        if take == left and self.model.window_cache and self.model.context.state_end_at is None:
            take = self._resume_cut(start, take, least)
        chunk, self.pending = self.pending[:take], self.pending[take:]
        return chunk

    def _resume_cut(self, start: int, take: int, least: int) -> int:
        """The rest of the prompt, ``take`` tokens, fits one chunk: with a window-sized cache
        and a llama.cpp that copies a sequence's state only as it is (without the recipe's
        ``state-seq-window-at``), end the chunk where a later prompt sharing this one resumes
        (``swa_checkpoints.resume_points``), the first of them at least ``least`` tokens on,
        so that a window checkpoint is taken there (``WindowCheckpoints.after_chunk``)."""
        for resume in resume_points(start + take, least, self.model.prefill_align):
            if resume - start >= least:
                return resume - start
        return take

    def prefilled(self, chunk: list[int]) -> None:
        """``chunk`` is in the KV cache now: say how far the prompt's reading has come."""
        slot = self.slot
        contiguous = len(slot.kv_tokens) == slot.prefilled
        slot.kv_tokens.extend(chunk)
        if contiguous and len(chunk) >= self.model.canonical_rows:
            # Up to the last aligned position: rows after it were a chunk's leftover group,
            # which a longer prompt would compute within a group (``prefill_align``).
            slot.prefilled = len(slot.kv_tokens) - len(slot.kv_tokens) % self.model.prefill_align
        self._chunks_read += 1
        total = self.usage.prompt_tokens
        self.events.append(PromptProgress(total - len(self.pending), total, self.usage.cached_tokens,
                                          time.perf_counter() - self.admitted, self._chunks_read))

    def check_cancel(self) -> bool:
        if self.cancel.is_set() and not self.done:
            self._finish("cancelled")
            return True
        return False

    def on_logits(self, index: int) -> None:
        """Sample from the logits of batch row ``index`` and stream what it makes."""
        token = self._sample(index)
        self._take(token)
        if self.control is not None and not self.done:
            if self._shadow_guess:
                self.control.shadow(self._shadow_guess[0] == token)
                self._shadow_guess = []
            else:
                self.control.tick(1)

    def draft_room(self) -> int:
        """How many draft tokens the budget allows this step: feed + draft + the token
        sampled after the last draft must not pass it (nor, so, the context)."""
        return self.budget - self.usage.completion_tokens - 1

    def lookup_draft(self) -> list[int]:
        """A prompt-lookup draft for this step (empty when paused or nothing matches)."""
        if self.control is None or self.state != DECODE:
            return []
        if self._lookup is None:
            self._lookup = PromptLookup(self.tokens)
        cost, lookup = self.model.row_cost, self._lookup
        lookup.catch_up()
        wanted = self.control.wanted(self.draft_room(), cost.per_row, cost.base, copying=lookup.copying)
        draft = lookup.draft(max(wanted, 1))
        if wanted <= 0 or (lookup.guessing and not lookup.copying):
            # Not drafting this step (no length pays, or the draft is only the cursor's guess
            # after an edit in an answer that is not plainly copying): note what lookup
            # would have drafted, and learn from the token the step samples
            # (DraftControl.shadow), at no cost.
            self._shadow_guess = draft[:1]
            return []
        return self.model.cut_at_end(draft)

    def verify(self, first_index: int, draft: list[int]) -> int:
        """Rows ``first_index..+len(draft)`` hold the logits after the fed token and after
        each draft token. Sample each row in turn with this sequence's own sampler, as plain
        decoding would, while the draws equal the draft; the first draw that differs (or the
        one after a whole accepted draft) is the next token to feed. Returns how many draft
        tokens stay in the KV cache (the caller removes the rest)."""
        accepted = kept = 0
        for i in range(len(draft) + 1):
            token = self._sample(first_index + i)
            self._take(token)
            hit = i < len(draft) and token == draft[i]
            accepted += hit
            if self.done or not hit:
                break
            kept += 1
        if self.control is not None:
            self.control.record(len(draft), accepted)
            self.timings.draft_n, self.timings.draft_n_accepted = self.control.drafted, self.control.accepted
        return kept

    def _sample(self, index: int) -> int:
        if self.state == PREFILL:
            self.timings.prompt_s = time.perf_counter() - self.admitted
            self.state = DECODE
        token = self.sampler.sample(self.model.context.ctx, index)
        if self._want_logprobs:
            self._pending_lp.append(
                self.model.decoder.logprob_at(index, token, self.sampling.logprobs or 0))
        return token

    def _take(self, token: int) -> None:
        """One sampled token: the end of generation, or text through the stream, the stop
        strings and the budget; otherwise it is the next token to feed."""
        model = self.model
        if self.usage.completion_tokens == 0:
            self._first_token_at = time.perf_counter()
            self.timings.ttft_s = self._first_token_at - self.started
        if model.is_end_of_generation(token):
            if self._want_logprobs:
                self._pending_lp.pop()  # no text, no entry (as before)
            self._finish("stop")
            return
        self.usage.completion_tokens += 1
        self._pending_ids.append(token)
        self.tokens.append(token)
        result = self._stream.feed(model.token_bytes(token))
        if result.text:
            self._emit_chunk(result.text)
        if result.stopped:
            self._finish("stop", stopped_by_string=True)
        elif self.usage.completion_tokens >= self.budget:
            self._finish("length")
        else:
            self.feed = token

    def decoded_feed(self) -> None:
        """The fed token's KV entry now exists."""
        assert self.feed is not None
        self.slot.kv_tokens.append(self.feed)
        self.feed = None

    # -- finishing --------------------------------------------------------------------

    def _emit_chunk(self, text: str) -> None:

        self.events.append(Chunk(text, self._pending_ids, self._pending_lp if self._want_logprobs else None))
        self._pending_ids, self._pending_lp = [], []

    def _finish(self, reason: str, stopped_by_string: bool = False) -> None:

        if self.state == PREFILL:
            self.timings.prompt_s = time.perf_counter() - self.admitted
        # Text held back as a possible stop-string start is real output unless a stop string hit.
        tail = "" if stopped_by_string else self._stream.flush()
        if tail or self._pending_ids:
            self.events.append(Chunk(tail, self._pending_ids, self._pending_lp if self._want_logprobs else None))
        if self._first_token_at:
            self.timings.decode_s = time.perf_counter() - self._first_token_at
        self.events.append(Finished(reason, self.usage, self.timings, self.model.record.id))
        self.state = DONE
        self.feed = None
        self.sampler.free()


class SlotView:
    """One sequence id of a loaded model, as the prefix cache sees a model: its resident
    tokens, its state key, and export/import of its KV state (through the model's ``KvStates``)."""

    def __init__(self, kv: "KvStates", slot: KvSlot) -> None:
        self.kv = kv
        self.slot = slot
        self.record = kv.context.record
        self.n_ctx = kv.context.n_ctx
        self.n_swa = kv.context.n_swa

    @property
    def kv_tokens(self) -> list[int]:
        return self.slot.kv_tokens

    def reusable_prefix(self, prompt: list[int], shared: int = 0) -> int:
        return self.kv.reusable_prefix(prompt, self.slot, shared)

    def reusable_length(self, prompt_tokens: int, common: int, shared: int = 0) -> int:
        return self.kv.reusable_length(prompt_tokens, common, shared)

    def state_key(self) -> str:
        return self.kv.state_key()

    def export_sequence(self, limit=None, destination=None):  # noqa: ANN001, ANN201 — KvStates's signature
        return self.kv.export_sequence(limit, destination, seq_id=self.slot.seq_id)

    def import_sequence(self, tokens: list[int], payload, keep: int) -> int:  # noqa: ANN001
        return self.kv.import_sequence(tokens, payload, keep, seq_id=self.slot.seq_id)


"""One loaded llama.cpp model and its context: sequences, the step loop, logits, embeddings.

``LoadedModel`` is built from parts with one job each, none of which knows the model:
``model_loading.load_context`` opens the weights and the context into a ``LlamaContext`` (the
llama.cpp handles and what the load resolved), and on that context stand ``kv_states.KvStates``
(reusable prefixes, trimming, a sequence's KV state out and back in), ``model_vision.ModelVision``
(prompts with images) and ``vocabulary.Vocabulary`` (text <-> tokens). Here: opening sequences
and ``step()``, which decides what each step decodes.

The decode loop talks to llama.cpp's C API directly (through llama-cpp-python's ctypes
bindings) rather than through ``Llama.create_completion``: one reusable batch, the native
sampler chain, cached token pieces and no per-token copy of the logits unless logprobs
are asked for. ``benchmarks/decode.py`` measures the difference.

What goes into the batch and what comes out of a decode (logits, log-probabilities,
embeddings) is ``decoder.Decoder``'s, which the sequences and the draft model use too.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..base import (
    ContextLengthExceeded, GGUFInfo, GenerationEvent, InvalidRequest, LoraSet, ModelLoadError,
    ModelRecord, SamplingParams,
)
from ..text import ChatTemplate
from .batch import ALL, LAST, NONE, BatchRow
from .decode_abort import ABORTED
from .decoder import Decoder
from .draft_model import DraftModel, DraftVocabularyMismatch
from .kv_states import KvStates
from .model_loading import LoadOptions, ProgressCallback, load_context
from .model_vision import ModelVision, image_runs, message_images
from .sequence import Sequence, SlotView
from .slots import DECODE, DONE, PREFILL, KvSlot
from .speculative import DRAFT, LOOKUP, OFF, RowCost


log = logging.getLogger(__name__)

# A step's row for one sequence: (sequence, tokens to feed, which of them want logits).
Row = tuple[Sequence, list[int], str]


class LoadedModel:
    """A model and its context with ``options.parallel`` sequences. Not thread-safe: only the
    scheduler's thread steps it (or one caller at a time through ``generate``)."""

    def __init__(self, record: ModelRecord, options: LoadOptions, progress: ProgressCallback | None = None) -> None:
        self.context = load_context(record, options, progress)
        self.kv = KvStates(self.context)  # the slots' KV entries: reuse, trimming, saved states
        self.decoder = Decoder(self.context)  # the batch in, logits and embeddings out
        self.vision = ModelVision(self.context)  # prompts with images (the projector loads on the first)
        self._draft: DraftModel | None = None  # the draft model of speculative "draft"
        self._prefilling: list[Sequence] = []  # opened sequences that may lead a shared prefill
        self.prompt_tokens_decoded = 0  # prompt tokens fed to llama_decode by steps (tests count them)
        self.row_cost = RowCost()  # what a draft row costs here, measured from decode steps
        self.draft_note = ""  # why this model does not draft with the chosen draft model, or ""
        drafting = time.perf_counter()
        if self.context.speculative_mode == DRAFT:
            self._load_draft()
        # The draft model is part of this load: its time counts in the load's.
        self.load_seconds = self.context.load_seconds + time.perf_counter() - drafting
        log.info(
            "loaded %s: n_ctx=%d threads=%d gpu_layers=%d flash_attn=%s in %.2fs",
            record.id, self.n_ctx, self.context.threads, self.context.gpu_layers, self.flash_attention,
            self.load_seconds,
        )

    def close(self) -> None:
        if self._draft is not None:
            self._draft.close()
            self._draft = None
        self.vision.close()  # libmtmd's context refers to the model: freed first
        self.context.close()

    def _load_draft(self) -> None:
        """Load the draft model of speculative "draft" beside this one: a ``LoadedModel`` of
        its own, with one sequence per sequence here."""
        draft = self.options.draft_model
        try:
            if draft is None:
                raise ModelLoadError(f"speculative decoding with a draft model needs one; pick a draft model for {self.record.id} in Settings")
            options = self.options
            model = LoadedModel(draft, LoadOptions(
                context_size=self.n_ctx, threads=options.threads, gpu_layers=options.gpu_layers,
                kv_cache_type=options.kv_cache_type, batch_size=options.batch_size, parallel=len(self.slots),
                swa_full=True,
            ))
            self._draft = DraftModel(self, model)
        except DraftVocabularyMismatch as exc:
            # The draft model is one setting for every model: a model of another family
            # still loads, and drafts from its own prompt instead of failing to open.
            self.context.speculative_mode = LOOKUP
            self.draft_note = f"{exc}. {self.record.id} drafts by prompt lookup instead."
            log.warning("%s", self.draft_note)
        except ModelLoadError:
            self.close()
            raise

    # -- what the load resolved (the context's), read by the scheduler, the cache and tests --

    @property
    def record(self) -> ModelRecord:
        return self.context.record

    @property
    def options(self) -> LoadOptions:
        return self.context.options

    @property
    def info(self) -> GGUFInfo:
        return self.context.info

    @property
    def slots(self) -> list[KvSlot]:
        """One per llama.cpp sequence id: the tokens whose KV entries it holds."""
        return self.context.slots

    @property
    def n_ctx(self) -> int:
        """Each sequence's context."""
        return self.context.n_ctx

    @property
    def n_vocab(self) -> int:
        return self.context.n_vocab

    @property
    def n_swa(self) -> int:
        return self.context.n_swa

    @property
    def canonical_rows(self) -> int:
        return self.context.canonical_rows

    @property
    def prefill_align(self) -> int:
        return self.context.prefill_align

    @property
    def window_cache(self) -> bool:
        return self.context.window_cache

    @property
    def kv_cache_type(self) -> str:
        return self.context.kv_cache_type

    @property
    def flash_attention(self) -> bool:
        return self.context.flash_attention

    @property
    def speculative_mode(self) -> str:
        return self.context.speculative_mode

    @property
    def chat_template(self) -> ChatTemplate:
        return self.context.chat_template

    @property
    def add_bos(self) -> bool:
        return self.context.add_bos

    # -- text <-> tokens (engine/runtime/vocabulary.py) ------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return self.context.vocabulary.tokenize(text, add_special, parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self.context.vocabulary.token_bytes(token)

    def detokenize(self, tokens: list[int]) -> str:
        return self.context.vocabulary.detokenize(tokens)

    @property
    def chat_stops(self) -> tuple[str, ...]:
        """Stop strings a rendered chat ends at besides the end-of-generation tokens: the
        fallback template's turn markers, which a model without a template writes as text."""
        return self.chat_template.stop_strings

    def is_end_of_generation(self, token: int) -> bool:
        return self.context.vocabulary.is_end_of_generation(token)

    def cut_at_end(self, draft: list[int]) -> list[int]:
        return self.context.vocabulary.cut_at_end(draft)

    def chat_tokens(self, messages: list[dict], tools: list[dict] | None = None,
                    cancel: threading.Event | None = None, options: dict[str, Any] | None = None) -> list[int]:
        """Render messages with the model's template and tokenize the result.

        A prompt that cannot fit this model's context fails as soon as that is known, and
        ``cancel`` stops the work between pieces (see ``prompt_tokens``). Messages with
        images go through the model's projector (``ModelVision.chat_tokens``)."""
        images = message_images(messages)
        if images:
            prompt = self.vision.chat_tokens(messages, images, tools, cancel, options)
            if len(prompt) > self.n_ctx:
                raise self._prompt_too_long(len(prompt))
            return prompt
        text = self.chat_template.render(messages, add_generation_prompt=True, tools=tools, cancel=cancel,
                                         **(options or {}))
        bos = self.chat_template.bos_token
        # Templates that write the BOS token themselves must not get a second one.
        add_special = self.add_bos and not (bos and text.startswith(bos))
        return self.context.vocabulary.bounded_tokens(text, add_special, True, self.n_ctx, cancel,
                                                      self._prompt_too_long)

    def prompt_tokens(self, text: str, cancel: threading.Event | None = None) -> list[int]:
        """A raw-text prompt as tokens, with the context and cancel checks of ``chat_tokens``."""
        return self.context.vocabulary.bounded_tokens(text, True, False, self.n_ctx, cancel, self._prompt_too_long)

    def _prompt_too_long(self, counted: int) -> ContextLengthExceeded:
        return ContextLengthExceeded(
            f"the prompt (at least {counted} tokens) does not fit in the model's context of "
            f"{self.n_ctx} tokens; shorten the conversation or start a new one",
            prompt_tokens=counted, context_size=self.n_ctx,
        )

    # -- generation -----------------------------------------------------------------

    def check_fits(self, prompt_tokens: int, max_tokens: int | None) -> int:
        """The number of tokens that may be generated; ContextLengthExceeded if none fit."""
        room = self.n_ctx - prompt_tokens
        if room < 1 or (max_tokens is not None and max_tokens > room):
            wanted = f" plus {max_tokens} requested tokens" if max_tokens else ""
            raise ContextLengthExceeded(
                f"the prompt ({prompt_tokens} tokens){wanted} does not fit in the model's context of "
                f"{self.n_ctx} tokens; shorten the conversation or start a new one",
                prompt_tokens=prompt_tokens,
                context_size=self.n_ctx,
            )
        return max_tokens if max_tokens is not None else room

    def generate(
        self,
        prompt: list[int],
        sampling: SamplingParams,
        cancel: threading.Event | None = None,
        reuse_kv: bool = True,
    ) -> Iterator[GenerationEvent]:
        """Stream chunks for ``prompt`` on sequence 0, alone; the last event is a ``Finished``.

        The scheduler runs several sequences at once through ``open_sequence`` and ``step``;
        this is the same machinery with one sequence (the lab, benchmarks and tests use it).
        """
        sequence = self.open_sequence(prompt, sampling, cancel or threading.Event(), time.perf_counter(),
                                      reuse_kv=reuse_kv, slot=self.slots[0])
        try:
            while not sequence.done:
                self.step([sequence], self.options.batch_size)
                yield from sequence.drain()
            yield from sequence.drain()
        finally:
            if not sequence.done:  # the caller stopped reading: end it like a cancel
                sequence.cancel.set()
                sequence.check_cancel()
            self.release(sequence)

    def open_sequence(self, prompt: list[int], sampling: SamplingParams, cancel: threading.Event,
                      started: float, reuse_kv: bool = True, slot: KvSlot | None = None,
                      shared: int = 0, template_stops: tuple[str, ...] = ()) -> Sequence:
        """Validate ``prompt`` and start it on ``slot`` (default: the free slot that already
        holds the longest prefix of it). ``started`` is when the caller asked: the time to
        first token counts from there, queue wait included. ``shared``: the prompt's leading
        tokens every chat with its documents shares (read apart, ``shared_boundary``).
        ``template_stops`` end the answer like the client's stop strings (a rendered chat's
        ``chat_stops``)."""
        if self.context.closed:
            raise ModelLoadError(f"{self.record.id} has been unloaded")
        if not prompt:
            raise InvalidRequest("the prompt is empty", param="prompt")
        if any((t < 0 or t >= self.n_vocab) and not self.vision.valid_prompt_token(t) for t in prompt):
            raise InvalidRequest(f"prompt token ids must be between 0 and {self.n_vocab - 1}", param="prompt")
        sampling = sampling.validated(self.n_vocab)
        budget = self.check_fits(len(prompt), sampling.max_tokens)
        slot = slot or self.pick_slot(prompt)
        if slot is None:
            raise InvalidRequest("every sequence of this model is busy")
        leader = self._prefill_leader(prompt, slot)
        if leader is not None:
            cached = self.kv.clear(slot)  # it gets the leader's KV instead
        else:
            cached = self.kv.reuse_prefix(slot, prompt, shared) if reuse_kv else self.kv.clear(slot)
            self.kv.checkpoints.at_resume(slot, len(prompt))
        slot.busy = True
        slot.last_used = time.monotonic()
        sequence = Sequence(self, slot, prompt, sampling, budget, cancel, started, cached,
                            self.kv.shared_boundary(shared), template_stops)
        sequence.leader = leader
        self._prefilling = [s for s in self._prefilling if s.state == PREFILL] + [sequence]
        return sequence

    def _prefill_leader(self, prompt: list[int], slot: KvSlot) -> Sequence | None:
        """A sequence still prefilling this very prompt (another of a request's ``n``
        choices, or the same prompt from another client): the new one waits for its
        prefill and copies the KV instead of computing it again."""
        for other in self._prefilling:
            if other.state == PREFILL and other.leader is None and other.slot is not slot and other.tokens == prompt:
                return other
        return None

    def pick_slot(self, prompt: list[int]) -> KvSlot | None:
        """The free slot sharing the longest prefix with ``prompt``; else the least recently used."""
        free = [s for s in self.slots if not s.busy]
        if not free:
            return None
        return max(free, key=lambda s: (self.kv.reusable_prefix(prompt, s), -s.last_used))

    @property
    def lora_key(self) -> str:
        """The key of the LoRA set the context applies now ("" for none)."""
        return self.context.adapters.key

    def use_lora(self, lora: LoraSet) -> None:
        """Apply ``lora`` to the whole context, without a reload; only while no sequence
        runs (the scheduler's rule), since every row of a step shares the set."""
        self.context.adapters.apply(lora)

    def release(self, sequence: Sequence) -> None:
        """The job is over: its slot is free; its prefilled KV stays for the next turn to reuse."""
        sequence.slot.busy = False
        sequence.slot.last_used = time.monotonic()
        if not sequence.done:
            sequence.sampler.free()
            # Ended from outside (a failed step): it never finishes now, so a sequence that
            # would wait to copy its prefill must not pick it, nor wait for it if it did.
            sequence.state = DONE
        if sequence in self._prefilling:
            self._prefilling.remove(sequence)

    def free_slot(self, slot: KvSlot) -> None:
        """Drop a slot's KV entries (to make room in the shared pool)."""
        self.kv.clear(slot)

    def step(self, sequences: list[Sequence], prefill_budget: int) -> int:
        """Advance every running sequence: the next token of each decoding sequence, then
        prompt chunks of prefilling ones within ``prefill_budget``.

        Events land in each sequence (``drain``); finished ones are marked done. The one
        place that fills ``llama_batch``. Returns how many prompt tokens this step fed.
        """
        for sequence in sequences:
            sequence.check_cancel()
        live = [s for s in sequences if not s.done]
        if not live:
            return 0
        decode_rows: list[Row] = []
        decoding = [s for s in live if s.state == DECODE and s.feed is not None]
        for sequence, draft in zip(decoding, self._drafts(decoding)):
            # The fed token plus a draft: logits at every position, to verify each draft token.
            assert sequence.feed is not None
            decode_rows.append((sequence, [sequence.feed, *draft], ALL if draft else LAST))
        room = max(0, min(prefill_budget, self.context.batch_capacity - sum(len(tokens) for _, tokens, _ in decode_rows)))
        prefill_rows: list[Row] = []
        deferred: list[tuple[Sequence, list[int]]] = []
        vision = self.vision
        if vision.active:  # encoded on their own thread while steps go on
            vision.prefetch_images([s for s in live if s.state == PREFILL and s.leader is None])
        for sequence in live:
            if sequence.leader is not None and sequence.leader.done:
                sequence.leader = None  # its leader was cancelled mid-prefill: prefill alone
            if sequence.state != PREFILL or room < 2 or sequence.leader is not None:
                continue
            chunk = sequence.take_prefill(room)
            if vision.active:
                chunk = vision.whole_images(sequence, chunk)
                if not vision.images_ready(chunk):
                    # Its image is still being encoded: the others' rows go now, this chunk
                    # in a later step.
                    sequence.pending = chunk + sequence.pending
                    deferred.append((sequence, chunk))
                    continue
            prefill_rows.append((sequence, chunk, NONE if sequence.pending else LAST))
            room -= len(chunk)
        if deferred and not prefill_rows and not decode_rows:
            # Nothing else to feed: this step waits for the encoding (no stream stalls on it).
            sequence, chunk = deferred[0]
            sequence.pending = sequence.pending[len(chunk):]
            prefill_rows.append((sequence, chunk, NONE if sequence.pending else LAST))
        # Decode rows and prompt chunks go to llama.cpp in separate calls. With a KV stream
        # per sequence it cuts a batch into micro-batches that take the same number of
        # tokens from each sequence: the answers' rows and a prompt chunk in one call became
        # a micro-batch of the answers plus one prompt token (a multi-row step, twice a
        # one-row one on a 2-core CPU) and then the rest of the chunk. Apart, a step of one
        # answer beside an 8-token chunk at position 3,500 took 50 ms instead of 70.
        if decode_rows:
            self._decode(decode_rows, live)
        # Each prompt chunk in a call of its own, too: llama.cpp would cut two sequences'
        # chunks into micro-batches of equal rows per sequence (a 256-row chunk beside a
        # 30-row one became 30 + 30, then 226), and a chunk cut below ``canonical_rows``
        # writes KV that a full prefill would not (model_loading.canonical_rows).
        for row in prefill_rows:
            if vision.has_image_rows(row[1]):
                self._decode_prefill_with_images(row, live)
            else:
                self._decode([row], live)
        prefill_tokens = sum(len(tokens) for _, tokens, _ in prefill_rows)
        self.prompt_tokens_decoded += prefill_tokens
        return prefill_tokens

    def _decode(self, rows: list[Row], live: list[Sequence]) -> None:
        """One ``llama_decode`` of ``rows``, then each row's sequence takes its result."""
        # With a KV stream per sequence, llama.cpp puts rows in one micro-batch only while
        # their sequence ids run consecutively in batch order (split_equal, "sequential"):
        # rows in admission order (slots 3, 0, 5, …) became up to one micro-batch per row,
        # and a step of 8 answers took 55 ms instead of 32 (seen once slots were reused).
        rows.sort(key=lambda row: row[0].seq_id)
        logit_rows = self.decoder.fill([BatchRow(s.seq_id, len(s.slot.kv_tokens), tokens, logits)
                                         for s, tokens, logits in rows])
        started = time.perf_counter()
        context = self.context
        # A prompt chunk is the one long call: Stop ends it mid-call (decode_abort).
        alone = rows[0][0] if len(rows) == 1 and rows[0][0].state == PREFILL else None
        status = context.decode(cancel=alone.cancel if alone is not None else None)
        if status == ABORTED and alone is not None and alone.cancel.is_set():
            self._forget_aborted_chunk(alone)
            return
        if status != 0:
            self._decode_failed(rows, status)
        if self.speculative_mode != OFF and rows[0][0].state == DECODE:
            self.row_cost.observe(time.perf_counter() - started, sum(len(t) - 1 for _, t, _ in rows))
        for (sequence, tokens, _), index in zip(rows, logit_rows):
            if sequence.state == PREFILL:
                sequence.prefilled(tokens)
                self.kv.checkpoints.after_chunk(sequence.slot, len(tokens), len(sequence.pending), sequence.boundary)
            elif len(tokens) > 1:
                self._verify(sequence, tokens, index)
                continue
            else:
                sequence.decoded_feed()
            if index >= 0:
                if sequence.state == PREFILL:
                    self._share_prefill(sequence, [s for s in live if s.leader is sequence], index)
                sequence.on_logits(index)

    def _decode_prefill_with_images(self, row: Row, live: list[Sequence]) -> None:
        """A prompt chunk with image positions: its text and image runs in decodes of their
        own, in order; then the sequence takes the result as from any prefill chunk."""
        sequence, tokens, logits = row
        position = len(sequence.slot.kv_tokens)
        index = -1
        runs = image_runs(tokens)
        for k, (image, run) in enumerate(runs):
            want = logits if k == len(runs) - 1 else NONE
            try:
                if image:
                    index = self.vision.decode_image_rows(sequence.seq_id, position, run, want)
                else:
                    indices, status = self.decoder.decode([BatchRow(sequence.seq_id, position, run, want)])
                    index = indices[0]
                    if status != 0:
                        self._decode_failed([row], status)
            except (InvalidRequest, ModelLoadError):
                self.kv.clear(sequence.slot)
                raise
            position += len(run)
        sequence.prefilled(tokens)
        self.kv.checkpoints.after_chunk(sequence.slot, len(tokens), len(sequence.pending), sequence.boundary)
        if index >= 0:
            self._share_prefill(sequence, [s for s in live if s.leader is sequence], index)
            sequence.on_logits(index)

    def _share_prefill(self, leader: Sequence, followers: list[Sequence], index: int) -> None:
        """``leader`` has just prefilled its prompt: each follower takes a copy of its KV
        and samples its own first token from the same logits row.

        The copy goes through the sequence-state API rather than ``llama_memory_seq_cp``:
        with a KV stream per sequence, seq_cp between streams only queues a copy of the
        whole stream for the next ``llama_decode``, and a state import into the follower's
        slot before that (it finishing at once, a new job restored there) would be
        overwritten by it. The state copy is immediate, and only the prompt's cells."""
        if not followers:
            return
        lib, ctx = self.context.lib, self.context.ctx
        size = lib.llama_state_seq_get_size(ctx, leader.seq_id)
        state = np.empty(size, dtype=np.uint8)
        pointer = state.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        copied = lib.llama_state_seq_get_data(ctx, pointer, size, leader.seq_id) == size
        for follower in followers:
            follower.leader = None
            slot = follower.slot
            if copied and lib.llama_state_seq_set_data(ctx, pointer, size, follower.seq_id) == size:
                slot.kv_tokens, slot.prefilled = list(leader.slot.kv_tokens), leader.slot.prefilled
                slot.checkpoints = list(leader.slot.checkpoints)  # their bytes are never changed
                follower.pending = []
                follower.on_logits(index)
            else:  # llama.cpp refused the copy: it prefills on its own
                log.warning("could not share a prefill of %s; prefilling again", self.record.id)
                self.kv.clear(slot)

    def _drafts(self, decoding: list[Sequence]) -> list[list[int]]:
        """Each decoding sequence's draft for this step (empty lists with speculation off)."""
        if self.speculative_mode == OFF:
            return [[] for _ in decoding]
        if self.vision.active and any(self.vision.has_image_rows(s.tokens) for s in decoding):
            # A draft model cannot read image positions, and lookup must not copy their
            # placeholder ids: sequences with images decode without drafts.
            return [[] for _ in decoding]
        if self._draft is not None:
            return self._draft.propose(decoding)
        return [sequence.lookup_draft() for sequence in decoding]

    def _verify(self, sequence: Sequence, tokens: list[int], last_index: int) -> None:
        """``tokens`` (fed token + draft) are in the KV cache: keep what the sequence accepts."""
        sequence.decoded_feed()
        kept = sequence.verify(last_index - len(tokens) + 1, tokens[1:])
        slot = sequence.slot
        slot.kv_tokens.extend(tokens[1:1 + kept])
        if kept < len(tokens) - 1:
            # The rejected draft's KV entries: the next step writes the real tokens there.
            self.context.lib.llama_memory_seq_rm(self.context.memory, slot.seq_id, len(slot.kv_tokens), -1)

    def _forget_aborted_chunk(self, sequence: Sequence) -> None:
        """A prompt chunk stopped mid-call: llama.cpp dropped the aborted micro-batch's
        positions but keeps the ones before it, which the slot does not list; drop them too,
        so the slot's tokens and its KV agree, then end the sequence as cancelled."""
        slot = sequence.slot
        self.context.lib.llama_memory_seq_rm(self.context.memory, slot.seq_id, len(slot.kv_tokens), -1)
        sequence.check_cancel()

    def _decode_failed(self, rows: list[Row], status: int) -> None:
        # Each sequence has its own KV stream sized for its budget (check_fits), so a
        # failure here is llama.cpp's own (out of memory, an aborted graph): the sequences
        # in this batch end with the error; their KV is dropped so the slots start clean.
        for sequence, _, _ in rows:
            self.kv.clear(sequence.slot)
        raise ModelLoadError(f"llama.cpp failed to decode with {self.record.id} (status {status})")

    # -- sequence 0, for single-sequence callers (lab, benchmarks, tests) ------------------

    @property
    def kv_tokens(self) -> list[int]:
        return self.slots[0].kv_tokens

    @property
    def _prefilled(self) -> int:
        return self.slots[0].prefilled

    def slot_view(self, slot: KvSlot) -> SlotView:
        return SlotView(self.kv, slot)

    # -- evaluation -----------------------------------------------------------------

    def logits_for(self, tokens: list[int], cancel: threading.Event | None = None) -> np.ndarray:
        """Next-token logits after every position of ``tokens``: shape (len(tokens), n_vocab).

        For perplexity and KL-divergence measurements. Uses a fresh KV cache; ``tokens``
        must fit in the context. Returns an empty array when cancelled.
        """
        if len(tokens) > self.n_ctx:
            raise ContextLengthExceeded(
                f"{len(tokens)} tokens do not fit in the context of {self.n_ctx}",
                prompt_tokens=len(tokens), context_size=self.n_ctx,
            )
        self.kv.clear()
        try:
            return self.decoder.logits_over(tokens, self.options.batch_size, cancel)
        finally:
            self.kv.clear()

    # -- embeddings -----------------------------------------------------------------

    def embed(self, text: str) -> list[float]:
        """A pooled (``LoadOptions.pooling``), L2-normalised embedding (needs ``LoadOptions(embeddings=True)``)."""
        if not self.options.embeddings:
            raise InvalidRequest("this model instance was not loaded for embeddings")
        tokens = self.tokenize(text, add_special=True, parse_special=False)
        if not tokens:
            raise InvalidRequest("cannot embed an empty input", param="input")
        limit = min(self.context.batch_capacity, self.n_ctx)
        if len(tokens) > limit:
            # Pooling needs the whole input in one batch, which holds the model's context.
            raise ContextLengthExceeded(
                f"the input ({len(tokens)} tokens) is longer than the {limit} tokens of this model's context; "
                "an embedding is of one piece: split the text and embed the parts",
                prompt_tokens=len(tokens),
                context_size=limit,
            )
        self.kv.clear()
        try:
            vector = self.decoder.pooled_embedding(tokens)
        finally:
            self.kv.clear()
        norm = float(np.linalg.norm(vector)) or 1.0
        return (vector / norm).tolist()



"""One loaded llama.cpp model: load, tokenize, render chats, and the decode loop.

The decode loop talks to llama.cpp's C API directly (through llama-cpp-python's ctypes
bindings) rather than through ``Llama.create_completion``: one reusable batch, the native
sampler chain, cached token pieces and no per-token copy of the logits unless logprobs
are asked for. ``benchmarks/decode.py`` measures the difference.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .chat_template import ChatTemplate
from .errors import ContextLengthExceeded, InvalidRequest, ModelLoadError
from .fit import ModelShape, detect_machine, estimate_fit
from .gguf import GGUFInfo, read_gguf
from .lora import LoraSet
from .lora_runtime import ContextAdapters
from .native import llama, physical_cores
from .generation_events import Chunk, Finished, GenerationEvent, Timings, TokenLogprob, Usage
from .registry import ModelRecord
from .sampling import SamplingParams
from .sequence import DECODE, DONE, PREFILL, KvSlot, Sequence, SlotView
from .sequence_states import SequenceStates
from .speculative import DRAFT, LOOKUP, MAX_DRAFT, OFF, RowCost, check_mode
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from .draft_model import DraftModel

log = logging.getLogger(__name__)

KV_CACHE_TYPES = {"f16": 1, "q8_0": 8}  # ggml type ids


@dataclass(frozen=True)
class LoadOptions:
    """Load-time settings. Those that change the KV layout also key saved states."""

    context_size: int = 4096
    threads: int = 0  # 0: one per physical core
    gpu_layers: int = -1  # -1: as many as the fit estimate says fit in free VRAM, 0: CPU only
    kv_cache_type: str = "f16"
    batch_size: int = 512  # prefill chunk: long prompts are fed this many tokens at a time
    embeddings: bool = False
    # Sequences one context serves at once (llama.cpp's n_seq_max), each with its own KV
    # stream of ``context_size`` cells; the scheduler batches their steps into one decode.
    parallel: int = 1
    # Speculative decoding: "off", "lookup" (n-gram drafts from the prompt and the answer)
    # or "draft" (a small model with the same vocabulary, ``draft_model``, drafts).
    speculative: str = OFF
    draft_model: ModelRecord | None = field(default=None, hash=False)

    def kv_layout_key(self, flash_attention: bool | None = None) -> str:
        # The KV cache type sets the element layout; flash attention sets whether V is stored
        # transposed. Context and batch sizes do not change a saved sequence's bytes: a state
        # fits any context with room for its tokens.
        if flash_attention is None:
            flash_attention = self.kv_cache_type != "f16"  # the CPU default, see LoadedModel
        return f"kv={self.kv_cache_type};fa={'on' if flash_attention else 'off'}"


# Which tokens of a batch row want logits.
NONE, LAST, ALL = "none", "last", "all"


@dataclass(frozen=True)
class BatchRow:
    """Consecutive tokens of one sequence, starting at position ``first_pos``."""

    seq_id: int
    first_pos: int
    tokens: list[int]
    logits: str  # NONE | LAST | ALL


def fewer_gpu_layers(layers: int) -> int:
    """The next, smaller offload to try after a load that did not fit (halving, then 0)."""
    return layers // 2 if layers > 1 else 0
ProgressCallback = Callable[[float], None]


class LoadedModel(SequenceStates):
    """A model and its context with ``options.parallel`` sequences. Not thread-safe: only the
    scheduler's thread steps it (or one caller at a time through ``generate``)."""

    # Set by _load; declared here for readers and type checkers.
    n_vocab: int
    n_ctx: int  # each sequence's context
    n_ctx_train: int
    n_layer: int
    n_swa: int
    threads: int
    gpu_layers: int
    flash_attention: bool
    offload_note: str
    draft_note: str  # why this model does not draft with the chosen draft model, or ""
    load_seconds: float
    chat_template: ChatTemplate
    add_bos: bool
    speculative_mode: str  # OFF, LOOKUP or DRAFT: what this model runs (see _speculative_mode)
    # llama.cpp handles, typed Any: the bindings are reached through a module object.
    _ctx: Any
    _vocab: Any
    _memory: Any
    _batch: Any  # a llama_batch, None before _load and after close
    _batch_capacity: int
    adapters: ContextAdapters  # the LoRA adapters this context applies (lora_runtime)
    vocabulary: Vocabulary  # text <-> tokens

    def __init__(self, record: ModelRecord, options: LoadOptions, progress: ProgressCallback | None = None) -> None:
        self.record = record
        self.options = options
        self.info: GGUFInfo = read_gguf(record.path)  # validate before llama.cpp opens it
        self._lib = llama()
        self._model = None
        self._ctx = None
        self._batch = None
        self._draft: DraftModel | None = None  # the draft model of speculative "draft"
        self._prefilling: list[Sequence] = []  # opened sequences that may lead a shared prefill
        self.prompt_tokens_decoded = 0  # prompt tokens fed to llama_decode by steps (tests count them)
        self.row_cost = RowCost()  # what a draft row costs here, measured from decode steps
        # One KvSlot per llama.cpp sequence id: the tokens whose KV entries it holds.
        self.slots = [KvSlot(i) for i in range(max(1, options.parallel))]
        self._load(progress)

    # -- loading --------------------------------------------------------------------

    def _load(self, progress: ProgressCallback | None) -> None:
        if self.options.kv_cache_type not in KV_CACHE_TYPES:
            raise ModelLoadError(f"unknown KV cache type {self.options.kv_cache_type!r}; use f16 or q8_0")
        started = time.perf_counter()
        planned = self._planned_gpu_layers()
        layers = planned
        while True:
            failure = self._load_with(layers, progress)
            if failure is None:
                break
            if layers == 0:
                raise ModelLoadError(failure)
            fewer = fewer_gpu_layers(layers)
            # Most often the GPU ran out of memory; the same load with fewer layers may fit.
            log.warning("%s with %d GPU layers; trying again with %d", failure, layers, fewer)
            layers = fewer
        self.gpu_layers = layers
        self.offload_note = ""
        if layers < planned:
            self.offload_note = (
                f"Not enough GPU memory for {planned} layers of {self.record.id}: {layers} of "
                f"{self.n_layer + 1} layers run on the GPU, the rest on the CPU."
            )
            log.warning("%s", self.offload_note)
        self.draft_note = ""
        if self.speculative_mode == DRAFT:
            self._load_draft()
        self.load_seconds = time.perf_counter() - started
        log.info(
            "loaded %s: n_ctx=%d threads=%d gpu_layers=%d flash_attn=%s in %.2fs",
            self.record.id, self.n_ctx, self.threads, layers, self.flash_attention, self.load_seconds,
        )

    def _load_with(self, gpu_layers: int, progress: ProgressCallback | None) -> str | None:
        """One attempt at weights + context with ``gpu_layers`` offloaded; a reason on failure."""
        lib = self._lib
        params = lib.llama_model_default_params()
        params.n_gpu_layers = gpu_layers
        params.use_mmap = True

        def on_progress(fraction: float, _user: ctypes.c_void_p) -> bool:
            if progress is not None:
                try:
                    progress(float(fraction))
                except Exception:  # a broken progress listener must not abort the load
                    log.exception("load progress callback failed")
            return True

        self._progress_cb = lib.llama_progress_callback(on_progress)
        params.progress_callback = self._progress_cb
        self._model = lib.llama_model_load_from_file(str(self.record.path).encode(), params)
        if not self._model:
            return (f"llama.cpp could not load {self.record.id}; the file may be damaged or of an "
                    "unsupported architecture, or too large for the memory available")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self.n_vocab = lib.llama_vocab_n_tokens(self._vocab)
        self.vocabulary = Vocabulary(lib, self._vocab, self.n_vocab)
        self.n_ctx_train = lib.llama_model_n_ctx_train(self._model)
        self.n_layer = lib.llama_model_n_layer(self._model)
        # Sliding-window attention: layers that only see the last n_swa positions.
        self.n_swa = int(self.info.arch_value("attention.sliding_window") or 0)

        ctx_params = lib.llama_context_default_params()
        wanted = self.options.context_size
        per_sequence = min(wanted, self.n_ctx_train) if self.n_ctx_train > 0 else wanted
        ctx_params.n_ctx = per_sequence * len(self.slots)
        # Room for a full prefill chunk plus each sequence's decode token (and draft) in one step.
        self._batch_capacity = self.options.batch_size + len(self.slots) * (1 + self._draft_room())
        ctx_params.n_batch = self._batch_capacity
        ctx_params.n_ubatch = self.options.batch_size
        ctx_params.n_seq_max = len(self.slots)
        # One KV stream per sequence, each of the full context, rather than llama.cpp's
        # unified pool: in unified mode the same prompt gave different logits depending on
        # which cells its sequence landed in (SmolLM2, first-token logprob -0.152 in one
        # slot, -0.169 in another), so a conversation's answer would depend on its slot and
        # on what else ran before. Per-sequence streams answer exactly as a lone sequence.
        ctx_params.kv_unified = False
        threads = self.options.threads or physical_cores()
        ctx_params.n_threads = threads
        ctx_params.n_threads_batch = threads
        kv_type = KV_CACHE_TYPES[self.options.kv_cache_type]
        ctx_params.type_k = kv_type
        ctx_params.type_v = kv_type
        self.flash_attention = self._flash_attention(gpu_layers)
        ctx_params.flash_attn_type = (
            lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if self.flash_attention else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        ctx_params.embeddings = self.options.embeddings
        if self.options.embeddings:
            ctx_params.pooling_type = lib.LLAMA_POOLING_TYPE_MEAN
        ctx_params.no_perf = True
        self._ctx = lib.llama_init_from_model(self._model, ctx_params)
        if not self._ctx:
            self.close()
            return f"llama.cpp could not create a context for {self.record.id} (out of memory?)"
        self.n_ctx = lib.llama_n_ctx(self._ctx) // len(self.slots)  # each sequence's own context
        self.threads = threads
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(self._batch_capacity, 0, 1)
        self.adapters = ContextAdapters(lib, self._model, self._ctx, self.info, self.record.id)
        self.speculative_mode = self._speculative_mode()
        self.chat_template = ChatTemplate(
            self.info.chat_template,
            bos_token=self._special_text("bos"),
            eos_token=self._special_text("eos"),
        )
        self.add_bos = bool(lib.llama_vocab_get_add_bos(self._vocab))
        return None

    def _planned_gpu_layers(self) -> int:
        """The setting, or for "auto" (-1) what the fit estimate says fits in free VRAM now."""
        if self.options.gpu_layers >= 0:
            return self.options.gpu_layers
        machine = detect_machine()
        if not machine.has_gpu:
            return 0
        # Every sequence has a KV stream of the full context (see _load_with).
        estimate = estimate_fit(ModelShape.from_gguf(self.info), machine,
                                context=self.options.context_size * len(self.slots),
                                kv_type=self.options.kv_cache_type, n_ubatch=self.options.batch_size)
        log.info("fit estimate for %s: %s", self.record.id, estimate.label)
        return estimate.gpu_layers

    def _flash_attention(self, gpu_layers: int) -> bool:
        """On for a quantized V cache (it needs it) and whenever layers run on a GPU.

        On the CPU it stays off for f16: llama.cpp's CPU flash-attention kernel for f16 K/V
        gives logits that depend on how the prompt is split into batches (up to ~0.9 apart
        on SmolLM2), so a reused prefix would not reproduce a full prefill. Without it (and
        with q8_0 + flash attention) every split gives bit-identical logits; the prefix cache
        relies on that. GPU backends are faster with it and it saves VRAM.
        """
        if self.options.kv_cache_type != "f16":
            return True
        return gpu_layers > 0 and bool(self._lib.llama_supports_gpu_offload())

    def _load_draft(self) -> None:
        from .draft_model import DraftModel, DraftVocabularyMismatch  # noqa: PLC0415 — it builds LoadedModels itself

        draft = self.options.draft_model
        try:
            if draft is None:
                raise ModelLoadError(f"speculative decoding with a draft model needs one; pick a draft model for {self.record.id} in Settings")
            self._draft = DraftModel(self, draft)
        except DraftVocabularyMismatch as exc:
            # The draft model is one setting for every model: a model of another family
            # still loads, and drafts from its own prompt instead of failing to open.
            self.speculative_mode = LOOKUP
            self.draft_note = f"{exc}. {self.record.id} drafts by prompt lookup instead."
            log.warning("%s", self.draft_note)
        except ModelLoadError:
            self.close()
            raise

    def _draft_room(self) -> int:
        """Draft tokens each sequence may add to a step's batch."""
        return MAX_DRAFT if self.options.speculative != OFF and not self.options.embeddings else 0

    def _speculative_mode(self) -> str:
        """The speculative mode this model runs: the setting, unless the model cannot take it."""
        try:
            mode = check_mode(self.options.speculative)
        except ValueError as exc:
            raise ModelLoadError(str(exc)) from exc
        if mode == OFF or self.options.embeddings:
            return OFF
        lib = self._lib
        # Rejected draft tokens are removed from the KV cache: a recurrent state cannot drop
        # a tail, and a sliding-window cache may already have let go of cells the next
        # token attends to once the draft's positions moved its window on.
        if lib.llama_model_is_recurrent(self._model) or lib.llama_model_is_hybrid(self._model) or self.n_swa > 0:
            log.info("speculative decoding is off for %s: its cache cannot drop rejected drafts", self.record.id)
            return OFF
        return mode

    def _special_text(self, role: str) -> str:
        found = self.info.special_tokens.get(role)
        return found[1] or "" if found else ""

    def close(self) -> None:
        lib = self._lib
        if self._draft is not None:
            self._draft.close()
            self._draft = None
        if self._batch is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            lib.llama_model_free(self._model)
            self._model = None
        for slot in self.slots:
            slot.kv_tokens, slot.prefilled, slot.busy = [], 0, False

    # -- text <-> tokens (engine/vocabulary.py) ------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return self.vocabulary.tokenize(text, add_special, parse_special)

    def token_bytes(self, token: int) -> bytes:
        return self.vocabulary.token_bytes(token)

    def detokenize(self, tokens: list[int]) -> str:
        return self.vocabulary.detokenize(tokens)

    def is_end_of_generation(self, token: int) -> bool:
        return self.vocabulary.is_end_of_generation(token)

    def cut_at_end(self, draft: list[int]) -> list[int]:
        return self.vocabulary.cut_at_end(draft)

    def chat_tokens(self, messages: list[dict], tools: list[dict] | None = None,
                    cancel: threading.Event | None = None, options: dict[str, Any] | None = None) -> list[int]:
        """Render messages with the model's template and tokenize the result.

        A prompt that cannot fit this model's context fails as soon as that is known, and
        ``cancel`` stops the work between pieces (see ``prompt_tokens``)."""
        text = self.chat_template.render(messages, add_generation_prompt=True, tools=tools, cancel=cancel,
                                         **(options or {}))
        bos = self.chat_template.bos_token
        # Templates that write the BOS token themselves must not get a second one.
        add_special = self.add_bos and not (bos and text.startswith(bos))
        return self.vocabulary.bounded_tokens(text, add_special, True, self.n_ctx, cancel, self._prompt_too_long)

    def prompt_tokens(self, text: str, cancel: threading.Event | None = None) -> list[int]:
        """A raw-text prompt as tokens, with the context and cancel checks of ``chat_tokens``."""
        return self.vocabulary.bounded_tokens(text, True, False, self.n_ctx, cancel, self._prompt_too_long)

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
                      started: float, reuse_kv: bool = True, slot: KvSlot | None = None) -> Sequence:
        """Validate ``prompt`` and start it on ``slot`` (default: the free slot that already
        holds the longest prefix of it). ``started`` is when the caller asked: the time to
        first token counts from there, queue wait included."""
        if self.closed:
            raise ModelLoadError(f"{self.record.id} has been unloaded")
        if not prompt:
            raise InvalidRequest("the prompt is empty", param="prompt")
        if any(t < 0 or t >= self.n_vocab for t in prompt):
            raise InvalidRequest(f"prompt token ids must be between 0 and {self.n_vocab - 1}", param="prompt")
        sampling = sampling.validated(self.n_vocab)
        budget = self.check_fits(len(prompt), sampling.max_tokens)
        slot = slot or self.pick_slot(prompt)
        if slot is None:
            raise InvalidRequest("every sequence of this model is busy")
        leader = self._prefill_leader(prompt, slot)
        if leader is not None:
            cached = self._clear_kv(slot)  # it gets the leader's KV instead
        else:
            cached = self._reuse_prefix(slot, prompt) if reuse_kv else self._clear_kv(slot)
        slot.busy = True
        slot.last_used = time.monotonic()
        sequence = Sequence(self, slot, prompt, sampling, budget, cancel, started, cached)
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
        return max(free, key=lambda s: (self.reusable_prefix(prompt, s), -s.last_used))

    @property
    def lora_key(self) -> str:
        """The key of the LoRA set the context applies now ("" for none)."""
        return self.adapters.key

    def use_lora(self, lora: LoraSet) -> None:
        """Apply ``lora`` to the whole context, without a reload; only while no sequence
        runs (the scheduler's rule), since every row of a step shares the set."""
        self.adapters.apply(lora)

    def release(self, sequence: Sequence) -> None:
        """The job is over: its slot is free; its prefilled KV stays for the next turn to reuse."""
        sequence.slot.busy = False
        sequence.slot.last_used = time.monotonic()
        if not sequence.done:
            sequence.sampler.free()

    def free_slot(self, slot: KvSlot) -> None:
        """Drop a slot's KV entries (to make room in the shared pool)."""
        self._clear_kv(slot)

    def step(self, sequences: list[Sequence], prefill_budget: int) -> int:
        """Advance every running sequence with one ``llama_decode``: the next token of each
        decoding sequence, then prompt chunks of prefilling ones within ``prefill_budget``.

        Events land in each sequence (``drain``); finished ones are marked done. The one
        place that fills ``llama_batch``. Returns how many prompt tokens this step fed.
        """
        for sequence in sequences:
            sequence.check_cancel()
        live = [s for s in sequences if not s.done]
        if not live:
            return 0
        rows: list[tuple[Sequence, list[int], str]] = []  # (sequence, tokens, which want logits)
        decoding = [s for s in live if s.state == DECODE and s.feed is not None]
        for sequence, draft in zip(decoding, self._drafts(decoding)):
            # The fed token plus a draft: logits at every position, to verify each draft token.
            assert sequence.feed is not None
            rows.append((sequence, [sequence.feed, *draft], ALL if draft else LAST))
        room = max(0, min(prefill_budget, self._batch_capacity - sum(len(tokens) for _, tokens, _ in rows)))
        for sequence in live:
            if sequence.leader is not None and sequence.leader.done:
                sequence.leader = None  # its leader was cancelled mid-prefill: prefill alone
            if sequence.state != PREFILL or room < 2 or sequence.leader is not None:
                continue
            chunk = sequence.take_prefill(room)
            rows.append((sequence, chunk, NONE if sequence.pending else LAST))
            room -= len(chunk)
        if not rows:
            return 0
        logit_rows = self._fill_batch([BatchRow(s.seq_id, len(s.slot.kv_tokens), tokens, logits)
                                       for s, tokens, logits in rows])
        decode_started = time.perf_counter()
        status = self._lib.llama_decode(self._ctx, self._batch)
        if status != 0:
            self._decode_failed(rows, status)
        prefill_tokens = sum(len(tokens) for sequence, tokens, _ in rows if sequence.state == PREFILL)
        if self.speculative_mode != OFF and prefill_tokens == 0:
            self.row_cost.observe(time.perf_counter() - decode_started, sum(len(t) - 1 for _, t, _ in rows))
        self.prompt_tokens_decoded += prefill_tokens
        for (sequence, tokens, _), index in zip(rows, logit_rows):
            if sequence.state == PREFILL:
                sequence.prefilled(tokens)
            elif len(tokens) > 1:
                self._verify(sequence, tokens, index)
                continue
            else:
                sequence.decoded_feed()
            if index >= 0:
                if sequence.state == PREFILL:
                    self._share_prefill(sequence, [s for s in live if s.leader is sequence], index)
                sequence.on_logits(index)
        return prefill_tokens

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
        lib, ctx = self._lib, self._ctx
        size = lib.llama_state_seq_get_size(ctx, leader.seq_id)
        state = np.empty(size, dtype=np.uint8)
        pointer = state.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
        copied = lib.llama_state_seq_get_data(ctx, pointer, size, leader.seq_id) == size
        for follower in followers:
            follower.leader = None
            slot = follower.slot
            if copied and lib.llama_state_seq_set_data(ctx, pointer, size, follower.seq_id) == size:
                slot.kv_tokens, slot.prefilled = list(leader.slot.kv_tokens), leader.slot.prefilled
                follower.pending = []
                follower.on_logits(index)
            else:  # llama.cpp refused the copy: it prefills on its own
                log.warning("could not share a prefill of %s; prefilling again", self.record.id)
                self._clear_kv(slot)

    def _drafts(self, decoding: list[Sequence]) -> list[list[int]]:
        """Each decoding sequence's draft for this step (empty lists with speculation off)."""
        if self.speculative_mode == OFF:
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
            self._lib.llama_memory_seq_rm(self._memory, slot.seq_id, len(slot.kv_tokens), -1)

    def _fill_batch(self, rows: list[BatchRow]) -> list[int]:
        """Write ``rows`` into the reusable batch; the batch index of each row's last token.
        The one place that fills ``llama_batch`` (steps, evaluation and embeddings use it)."""
        batch = self._batch
        n = 0
        last_rows = []
        for row in rows:
            for i, token in enumerate(row.tokens):
                batch.token[n] = token
                batch.pos[n] = row.first_pos + i
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = row.seq_id
                batch.logits[n] = 1 if row.logits == ALL else 0
                n += 1
            if row.logits == LAST:
                batch.logits[n - 1] = 1
            last_rows.append(n - 1 if row.logits != NONE else -1)
        batch.n_tokens = n
        return last_rows

    def _decode_failed(self, rows: list[tuple[Sequence, list[int], str]], status: int) -> None:
        # Each sequence has its own KV stream sized for its budget (check_fits), so a
        # failure here is llama.cpp's own (out of memory, an aborted graph): the sequences
        # in this batch end with the error; their KV is dropped so the slots start clean.
        for sequence, _, _ in rows:
            self._clear_kv(sequence.slot)
        raise ModelLoadError(f"llama.cpp failed to decode with {self.record.id} (status {status})")

    # -- sequence 0, for single-sequence callers (lab, benchmarks, tests) ------------------

    @property
    def kv_tokens(self) -> list[int]:
        return self.slots[0].kv_tokens

    @property
    def _prefilled(self) -> int:
        return self.slots[0].prefilled

    def slot_view(self, slot: KvSlot) -> SlotView:
        return SlotView(self, slot)

    def _prefill_for_embedding(self, tokens: list[int]) -> None:
        """Decode ``tokens`` as one batch on sequence 0 (pooling needs them together)."""
        self._fill_batch([BatchRow(0, 0, tokens, ALL)])
        status = self._lib.llama_decode(self._ctx, self._batch)
        if status != 0:
            self._clear_kv()
            raise ModelLoadError(f"llama.cpp failed to process the input (status {status})")

    def _logits_at(self, index: int) -> np.ndarray:
        pointer = self._lib.llama_get_logits_ith(self._ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).astype(np.float32, copy=True)

    def _logprob_entry(self, logits: np.ndarray, token: int, top_n: int) -> TokenLogprob:
        peak = float(logits.max())
        log_z = peak + math.log(float(np.exp(logits - peak).sum()))
        top: list[tuple[str, bytes, float]] = []
        if top_n:
            best = np.argpartition(-logits, top_n)[:top_n]
            for candidate in best[np.argsort(-logits[best])]:
                raw = self.token_bytes(int(candidate))
                top.append((raw.decode("utf-8", errors="replace"), raw, float(logits[candidate]) - log_z))
        raw = self.token_bytes(token)
        return TokenLogprob(raw.decode("utf-8", errors="replace"), raw, float(logits[token]) - log_z, top)

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
        lib = self._lib
        out = np.empty((len(tokens), self.n_vocab), dtype=np.float32)
        self._clear_kv()
        step = self.options.batch_size
        try:
            for start in range(0, len(tokens), step):
                if cancel is not None and cancel.is_set():
                    return out[:0]
                chunk = tokens[start : start + step]
                self._fill_batch([BatchRow(0, start, chunk, ALL)])
                if lib.llama_decode(self._ctx, self._batch) != 0:
                    raise ModelLoadError(f"llama.cpp failed to evaluate the text with {self.record.id}")
                pointer = lib.llama_get_logits(self._ctx)
                out[start : start + len(chunk)] = np.ctypeslib.as_array(pointer, shape=(len(chunk), self.n_vocab))
        finally:
            self._clear_kv()
        return out

    # -- embeddings -----------------------------------------------------------------

    def embed(self, text: str) -> list[float]:
        """A mean-pooled, L2-normalised embedding (needs ``LoadOptions(embeddings=True)``)."""
        if not self.options.embeddings:
            raise InvalidRequest("this model instance was not loaded for embeddings")
        tokens = self.tokenize(text, add_special=True, parse_special=False)
        if not tokens:
            raise InvalidRequest("cannot embed an empty input", param="input")
        if len(tokens) > self.options.batch_size:
            # Pooling needs the whole input in one batch.
            raise ContextLengthExceeded(
                f"the input ({len(tokens)} tokens) is longer than the {self.options.batch_size} tokens "
                "that can be embedded at once",
                prompt_tokens=len(tokens),
                context_size=self.options.batch_size,
            )
        self._clear_kv()
        try:
            self._prefill_for_embedding(tokens)
            pointer = self._lib.llama_get_embeddings_seq(self._ctx, 0)
            if not pointer:
                raise ModelLoadError(f"{self.record.id} produced no embedding")
            n_embd = self._lib.llama_model_n_embd(self._model)
            vector = np.ctypeslib.as_array(pointer, shape=(n_embd,)).astype(np.float64)
        finally:
            self._clear_kv()
        norm = float(np.linalg.norm(vector)) or 1.0
        return (vector / norm).tolist()



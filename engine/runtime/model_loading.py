"""Loading a model: the weights, the llama.cpp context and what is read from the model.

``load_context`` opens the weights (offloading the layers the fit estimate allows, fewer on
each failed try), creates the llama.cpp context with a KV stream per sequence, reads what
the rest of the engine needs from the model (vocabulary, context sizes, chat template) and
decides the speculative mode. What it returns, a ``LlamaContext``, owns the llama.cpp
handles and those load facts, and frees the handles in ``close``; ``LoadedModel``
(model.py), its ``KvStates`` (kv_states.py) and its ``ModelVision`` (model_vision.py) are
built on it. ``LoadOptions`` are the settings a load takes.
"""

from __future__ import annotations

import ctypes
import logging
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..base import GGUFInfo, ModelLoadError, ModelRecord, check_vocabulary
from ..text import ChatTemplate
from .fit import (AUTO_KV_CACHE, CHUNKED_WINDOW_ARCHITECTURES, ModelShape, detect_machine, estimate_fit,
                  kv_cache_type_for, sliding_window_size)
from .gguf_headers import checked_header
from .decode_abort import DecodeAbort
from .logit_jitter import LogitJitter
from .lora_runtime import ContextAdapters
from .native import build_patches, llama, physical_cores, state_seq_end_at
from .slots import FA_TILE_ROWS, PREFILL_ALIGN, KvSlot
from .speculative import MAX_DRAFT, OFF, check_mode
from .vocabulary import Vocabulary

log = logging.getLogger("inglenook.engine.runtime.model")

KV_CACHE_TYPES = {"f16": 1, "q8_0": 8}  # ggml type ids


@dataclass(frozen=True)
class LoadOptions:
    """Load-time settings. Those that change the KV layout also key saved states."""

    context_size: int = 4096
    threads: int = 0  # 0: one per physical core
    gpu_layers: int = -1  # -1: as many as the fit estimate says fit in free VRAM, 0: CPU only
    # "auto": f16 (fit.kv_cache_type_for says why); or "f16" / "q8_0" (half the memory,
    # slower prompt reading on the CPU).
    kv_cache_type: str = AUTO_KV_CACHE
    batch_size: int = 512  # prefill chunk: long prompts are fed this many tokens at a time
    embeddings: bool = False
    pooling: str = "mean"  # with embeddings: "mean" over the tokens, or "last" (the last token's state)
    # Sequences one context serves at once (llama.cpp's n_seq_max), each with its own KV
    # stream of ``context_size`` cells; the scheduler batches their steps into one decode.
    parallel: int = 1
    # Speculative decoding: "off", "lookup" (n-gram drafts from the prompt and the answer)
    # or "draft" (a small model with the same vocabulary, ``draft_model``, drafts).
    speculative: str = OFF
    draft_model: ModelRecord | None = field(default=None, hash=False)
    # None: the engine's rule (``flash_attention_for``: on); True/False forces it, for
    # benchmarks and checks that compare both. Either way the prefix cache stays exact
    # (``canonical_rows``).
    flash_attention: bool | None = None
    # True when a person or a setting asked for ``context_size`` (a model's or the app's
    # context setting, ``serve --context``): it is honoured past the context the model was
    # trained for, with a warning (``context_note``). False (the automatic choice, or a
    # caller's default) keeps it within the training context.
    explicit_context: bool = False
    # Sliding-window layers (gemma-3, gpt-oss…) keep a cache of the window only, as
    # llama-server does, with the window's state checkpointed where prompts resume
    # (``swa_checkpoints``); True keeps a cache of the full context for them instead
    # (the draft model does: it is cut back anywhere, every step).
    swa_full: bool = False
    # True: every row of a micro-batch may ask for its logits (the lab's perplexity and KL
    # measures, ``LoadedModel.logits_for``). False, for chat: a step asks for one row a
    # sequence and a draft's (``output_rows``), and llama.cpp sizes its compute buffer for
    # those: gemma-3-270m's, at 32,768 tokens × 4 sequences, fell from 514.5 MiB (the
    # logits of 512 rows over its 262,144-token vocabulary) to 50.8 MiB.
    every_logit: bool = False


def context_per_sequence(wanted: int, trained: int, explicit: bool, model_id: str) -> tuple[int, str]:
    """The context each sequence gets, and a warning when it runs past the training context.

    A context asked for explicitly is what llama-server does with ``-c``: run it, and say
    so. No RoPE/YaRN scaling is added here: llama.cpp already applies the scaling a model's
    metadata declares (``rope.scaling.*``, whose training context then counts the extended
    length), and scaling a model that declares none would change every answer, short ones
    too. An automatic or default context never goes past what the model was trained for."""
    if trained <= 0 or wanted <= trained:
        return wanted, ""
    if not explicit:
        return trained, ""
    return wanted, (f"{model_id} runs with a context of {wanted:,} tokens, as asked, but was trained for "
                    f"{trained:,}: answers past {trained:,} tokens may lose track or turn to nonsense")


def fewer_gpu_layers(layers: int) -> int:
    """The next, smaller offload to try after a load that did not fit (halving, then 0)."""
    return layers // 2 if layers > 1 else 0


ProgressCallback = Callable[[float], None]


@dataclass(eq=False, kw_only=True)
class LlamaContext:
    """A loaded model's llama.cpp handles and what its load resolved (``load_context``).

    Everything here is fixed by the load, except ``speculative_mode`` (a draft model whose
    vocabulary differs turns "draft" into "lookup", ``LoadedModel._load_draft``) and the
    handles, which ``close`` frees and sets to None."""

    record: ModelRecord
    options: LoadOptions
    info: GGUFInfo  # the header, validated before llama.cpp opened the file
    # One KvSlot per llama.cpp sequence id: the tokens whose KV entries it holds.
    slots: list[KvSlot]
    # llama.cpp handles, typed Any: the bindings are reached through a module object.
    lib: Any
    model: Any
    ctx: Any
    vocab: Any
    memory: Any
    batch: Any  # the reusable llama_batch that decoder.Decoder.fill fills
    batch_capacity: int
    progress_cb: Any  # the ctypes callback the load was given, kept alive with the model
    n_vocab: int
    n_ctx: int  # each sequence's context
    n_ctx_train: int
    n_layer: int
    n_swa: int  # sliding-window layers see only the last n_swa positions (0: none)
    window_chunked: bool  # ... or only those since the last multiple of n_swa (Llama 4's chunks)
    # Those layers keep only the window (swa_full off): cuts resume from window checkpoints.
    window_cache: bool
    threads: int
    gpu_layers: int
    kv_cache_type: str  # the K/V element type this context runs ("auto" resolved)
    flash_attention: bool
    canonical_rows: int  # the fewest prompt rows a chunk needs for exact KV (``canonical_rows``)
    output_rows: int | None  # the most logits rows a decode may ask for; None: every row (``output_rows``)
    # Where reused prompt chunks may end without adapters (``prefill_alignment``); see ``prefill_align``.
    row_alignment: int
    offload_note: str = ""  # why fewer layers than planned run on the GPU, or ""
    context_note: str  # why the context runs past the training context, or ""
    load_seconds: float = 0.0  # the weights and the context (a draft model's load is LoadedModel's)
    chat_template: ChatTemplate
    add_bos: bool
    speculative_mode: str  # OFF, LOOKUP or DRAFT: what this model runs (``speculative_mode``)
    vocabulary: Vocabulary  # text <-> tokens
    adapters: ContextAdapters  # the LoRA adapters this context applies (lora_runtime)
    # Test-only noise on every logits row (``logit_jitter``); None unless its variable is set.
    jitter: LogitJitter | None = None
    # Ends a decode whose one sequence is cancelled mid-call (``decode_abort``).
    abort: DecodeAbort | None = None
    # With window-sized caches and the recipe's ``STATE_SEQ_WINDOW_AT``: sets where the next
    # sequence-state copies end (``native.state_seq_end_at``), so that a window checkpoint can
    # be taken at a position inside the chunk just read (``swa_checkpoints``). Else None.
    state_end_at: Callable[[int], None] | None = None

    @property
    def closed(self) -> bool:
        return self.ctx is None

    @property
    def prefill_align(self) -> int:
        """Reused prompt chunks end on multiples of this (``slots.PREFILL_ALIGN``, or 1 for
        weights whose kernels compute each row alone: ``prefill_alignment``). LoRA adapters
        add matrix products of their own, not checked row by row: the safe default then."""
        return PREFILL_ALIGN if self.adapters.key else self.row_alignment

    def decode(self, batch: Any = None, cancel: object = None) -> int:
        """``llama_decode`` of ``batch`` (default: the reusable token batch); its status.
        Every decode whose logits anything reads goes through here, so the test-only jitter
        sees each logits row once, before the sampler, grammar or logprobs read it. With
        ``cancel`` (the cancel event of the one sequence the batch serves), setting it ends
        the call early with status ``decode_abort.ABORTED``."""
        batch = self.batch if batch is None else batch
        if cancel is not None and self.abort is not None:
            with self.abort.armed(cancel):
                status = self.lib.llama_decode(self.ctx, batch)
        else:
            status = self.lib.llama_decode(self.ctx, batch)
        if status == 0 and self.jitter is not None:
            self.jitter.perturb(self.lib, self.ctx, batch)
        return status

    def close(self) -> None:
        """Free the batch, the context and the weights; the slots then hold nothing. Anything
        that refers to the model (a libmtmd context) must be freed first."""
        lib = self.lib
        if self.batch is not None:
            lib.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx:
            lib.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            lib.llama_model_free(self.model)
            self.model = None
        for slot in self.slots:
            slot.kv_tokens, slot.prefilled, slot.busy = [], 0, False


def load_context(record: ModelRecord, options: LoadOptions, progress: ProgressCallback | None = None) -> LlamaContext:
    """Load ``record`` with ``options``: its weights, on as many GPU layers as fit, and a
    context with ``options.parallel`` sequences. ModelLoadError when no offload works."""
    # Validated before llama.cpp opens it: parsed now, or moments ago from this very file.
    info = checked_header(record)
    check_vocabulary(info)  # a token twice makes llama.cpp abort the process, not fail the load
    lib = llama()
    slots = [KvSlot(i) for i in range(max(1, options.parallel))]
    started = time.perf_counter()
    if options.kv_cache_type != AUTO_KV_CACHE and options.kv_cache_type not in KV_CACHE_TYPES:
        raise ModelLoadError(f"unknown KV cache type {options.kv_cache_type!r}; use auto, f16 or q8_0")
    planned = planned_gpu_layers(record, info, options, len(slots))
    layers = planned
    while True:
        opened = _open(lib, record, info, options, slots, layers, progress)
        if isinstance(opened, LlamaContext):
            break
        if layers == 0:
            raise ModelLoadError(opened)
        fewer = fewer_gpu_layers(layers)
        # Most often the GPU ran out of memory; the same load with fewer layers may fit.
        log.warning("%s with %d GPU layers; trying again with %d", opened, layers, fewer)
        layers = fewer
    if layers < planned:
        opened.offload_note = (
            f"Not enough GPU memory for {planned} layers of {record.id}: {layers} of "
            f"{opened.n_layer + 1} layers run on the GPU, the rest on the CPU."
        )
        log.warning("%s", opened.offload_note)
    if opened.context_note:
        log.warning("%s", opened.context_note)
    opened.load_seconds = time.perf_counter() - started
    return opened


def _open(lib: Any, record: ModelRecord, info: GGUFInfo, options: LoadOptions, slots: list[KvSlot],
          gpu_layers: int, progress: ProgressCallback | None) -> LlamaContext | str:
    """One attempt at weights + context with ``gpu_layers`` offloaded; a reason on failure."""
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

    progress_cb = lib.llama_progress_callback(on_progress)
    params.progress_callback = progress_cb
    model = lib.llama_model_load_from_file(str(record.path).encode(), params)
    if not model:
        return (f"llama.cpp could not load {record.id}; the file may be damaged or of an "
                "unsupported architecture, or too large for the memory available")
    handles = _Handles(lib, model)
    try:
        return _context_on(lib, record, info, options, slots, gpu_layers, model, progress_cb, handles)
    except BaseException:
        # Whatever failed after the weights loaded (a context setting, the adapters, the
        # speculative mode, the template) frees what was made: each failed load leaked the
        # weights and a context (288 MB a time for SmolLM2 at 8,192 tokens) before.
        handles.free()
        raise


@dataclass
class _Handles:
    """The native handles one load attempt has made so far, freed together if it fails."""

    lib: Any
    model: Any
    ctx: Any = None
    batch: Any = None

    def free(self) -> None:
        if self.batch is not None:
            self.lib.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx:
            self.lib.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            self.lib.llama_model_free(self.model)
            self.model = None


def _context_on(lib: Any, record: ModelRecord, info: GGUFInfo, options: LoadOptions, slots: list[KvSlot],
                gpu_layers: int, model: Any, progress_cb: Any, handles: _Handles) -> LlamaContext | str:
    """The context and the rest of a load on loaded weights ``model``; each native handle is
    recorded in ``handles`` as it is made."""
    vocab = lib.llama_model_get_vocab(model)
    n_vocab = lib.llama_vocab_n_tokens(vocab)
    vocabulary = Vocabulary(lib, vocab, n_vocab)
    n_ctx_train = lib.llama_model_n_ctx_train(model)
    n_layer = lib.llama_model_n_layer(model)
    # Sliding-window attention: layers that only see the last n_swa positions (or, in
    # chunks, the positions since the last multiple of n_swa). llama.cpp's own figure, not
    # the header's: its loader ignores Phi-3's window and sets Llama 4's chunk itself.
    n_swa = max(0, int(lib.llama_model_n_swa(model)))
    if n_swa != (estimated := sliding_window_size(info)):
        log.debug("%s: llama.cpp runs a window of %d, the estimate read %d", record.id, n_swa, estimated)

    window_cache = n_swa > 0 and not options.swa_full
    plan = _context_plan(lib, record, info, options, len(slots), gpu_layers, n_ctx_train, window_cache)
    ctx_params, batch_capacity = plan.params, plan.batch_capacity
    ctx_params.no_perf = True
    ctx = lib.llama_init_from_model(model, ctx_params)
    if not ctx:
        handles.free()
        return f"llama.cpp could not create a context for {record.id} (out of memory?)"
    handles.ctx = ctx
    n_ctx = lib.llama_n_ctx(ctx) // len(slots)  # each sequence's own context
    memory = lib.llama_get_memory(ctx)
    batch = lib.llama_batch_init(batch_capacity, 0, 1)
    handles.batch = batch
    adapters = ContextAdapters(lib, model, ctx, info, record.id)
    mode = speculative_mode(lib, model, options, record.id)
    chat_template = ChatTemplate(info.chat_template, bos_token=_special_text(info, "bos"),
                                 eos_token=_special_text(info, "eos"))
    return LlamaContext(
        record=record, options=options, info=info, slots=slots,
        lib=lib, model=model, ctx=ctx, vocab=vocab, memory=memory, batch=batch, batch_capacity=batch_capacity,
        progress_cb=progress_cb, n_vocab=n_vocab, n_ctx=n_ctx, n_ctx_train=n_ctx_train, n_layer=n_layer,
        n_swa=n_swa, window_chunked=info.architecture in CHUNKED_WINDOW_ARCHITECTURES, window_cache=window_cache,
        threads=plan.threads, gpu_layers=gpu_layers, kv_cache_type=plan.kv_cache_type,
        flash_attention=plan.flash_attention, canonical_rows=plan.canonical_rows, context_note=plan.context_note,
        output_rows=output_rows(options, len(slots)),
        row_alignment=plan.row_alignment,
        chat_template=chat_template, add_bos=bool(lib.llama_vocab_get_add_bos(vocab)), speculative_mode=mode,
        vocabulary=vocabulary, adapters=adapters,
        # An embeddings context pools instead of writing logits rows: nothing to perturb.
        jitter=None if options.embeddings else LogitJitter.from_environment(n_vocab),
        abort=DecodeAbort(lib, ctx),
        state_end_at=state_seq_end_at() if window_cache and STATE_SEQ_WINDOW_AT in build_patches() else None,
    )


@dataclass
class _ContextPlan:
    """A context's llama.cpp parameters, with what they resolved to."""

    params: Any  # llama_context_params
    batch_capacity: int
    threads: int
    kv_cache_type: str
    flash_attention: bool
    canonical_rows: int
    row_alignment: int  # where reused chunks may end (``prefill_alignment``)
    context_note: str


def _context_plan(lib: Any, record: ModelRecord, info: GGUFInfo, options: LoadOptions, sequences: int, gpu_layers: int,
                  n_ctx_train: int, window_cache: bool) -> _ContextPlan:
    """The parameters of a context of ``sequences`` sequences for ``options``."""
    ctx_params = lib.llama_context_default_params()
    per_sequence, context_note = context_per_sequence(
        options.context_size, n_ctx_train, options.explicit_context, record.id)
    ctx_params.n_ctx = per_sequence * sequences
    # Room for a full prefill chunk plus each sequence's decode token (and draft) in one step.
    batch_capacity = options.batch_size + sequences * (1 + draft_room(options))
    n_ubatch = options.batch_size
    if options.embeddings:
        # Pooling needs the whole input in one micro-batch: an embedding may be as long as the
        # context (it was refused past 512 tokens, the prefill chunk, whatever the model read).
        batch_capacity = n_ubatch = max(options.batch_size, ctx_params.n_ctx)
    ctx_params.n_batch = batch_capacity
    ctx_params.n_ubatch = n_ubatch
    ctx_params.n_seq_max = sequences
    outputs = output_rows(options, sequences)
    if outputs is not None:
        ctx_params.n_outputs_max = outputs  # llama.cpp's default, 0, is every row of a batch
    # One KV stream per sequence, each of the full context, rather than llama.cpp's
    # unified pool: in unified mode the same prompt gave different logits depending on
    # which cells its sequence landed in (SmolLM2, first-token logprob -0.152 in one
    # slot, -0.169 in another), so a conversation's answer would depend on its slot and
    # on what else ran before. Per-sequence streams answer exactly as a lone sequence.
    ctx_params.kv_unified = False
    # Sliding-window layers (gemma-3) keep a cache of the window (plus a micro-batch), as
    # llama-server does: a quarter or less of a full-context cache. Cutting a sequence back
    # past it restores a window checkpoint (swa_checkpoints); swa_full keeps the old way.
    ctx_params.swa_full = options.swa_full
    threads = options.threads or physical_cores()
    ctx_params.n_threads = threads
    ctx_params.n_threads_batch = threads
    offloads = gpu_layers > 0 and bool(lib.llama_supports_gpu_offload())
    kv_cache_type = kv_cache_type_for(options.kv_cache_type, offloads)
    kv_type = KV_CACHE_TYPES[kv_cache_type]
    ctx_params.type_k = kv_type
    ctx_params.type_v = kv_type
    flash_attention = flash_attention_for(options)
    rows = canonical_rows(options, kv_cache_type, flash_attention, offloads=offloads, patches=build_patches(),
                          window_cache=window_cache)
    ctx_params.flash_attn_type = (
        lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attention else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    ctx_params.embeddings = options.embeddings
    if options.embeddings:
        ctx_params.pooling_type = (lib.LLAMA_POOLING_TYPE_LAST if options.pooling == "last"
                                   else lib.LLAMA_POOLING_TYPE_MEAN)
    return _ContextPlan(ctx_params, batch_capacity, threads, kv_cache_type, flash_attention, rows,
                        prefill_alignment(info, offloads=offloads), context_note)


def planned_gpu_layers(record: ModelRecord, info: GGUFInfo, options: LoadOptions, sequences: int) -> int:
    """The setting, or for "auto" (-1) what the fit estimate says fits in free VRAM now."""
    if options.gpu_layers >= 0:
        return options.gpu_layers
    machine = detect_machine()
    if not machine.has_gpu:
        return 0
    # Every sequence has a KV stream of the full context (see _open).
    estimate = estimate_fit(ModelShape.from_gguf(info), machine, context=options.context_size * sequences,
                            kv_type=options.kv_cache_type, n_ubatch=options.batch_size, sequences=sequences,
                            flash_attention=flash_attention_for(options), outputs=output_rows(options, sequences))
    log.info("fit estimate for %s: %s", record.id, estimate.label)
    return estimate.gpu_layers


def flash_attention_for(options: LoadOptions) -> bool:
    """On unless forced either way, as llama-server has it: faster prompt reading on the
    CPU (llama-bench pp512 at depth 4,096, SmolLM2: 105 tok/s against 91 without it), less
    memory on GPUs, and a quantized V cache needs it. The prefix cache stays exact with
    it because prompts are read in chunks of at least ``canonical_rows`` (see there)."""
    if options.flash_attention is not None:
        return options.flash_attention
    return True


# scripts/llama_build.py's patch that sends prompt chunks of ``PATCHED_TILE_ROWS`` rows or
# more through the CPU flash-attention kernel's tiled path (``SOURCE_PATCHES``).
FA_TILES_FROM_32_ROWS = "flash-attention-tiles-from-32-rows"
PATCHED_TILE_ROWS = 32
# The recipe's second patch: the same tiled path reads the cache's K rows as stored. It
# changes only speed (every result bit for bit as before), so no rule here depends on it.
FA_K_ROWS_AS_STORED = "flash-attention-k-rows-as-stored"
# The third: a decode step over 512 or more cells walks the cache once per KV head for all
# the query heads it serves. Decode results change in their last bits, prompt reading not at
# all (it never takes that path), so no rule here depends on it either.
FA_DECODE_GROUPED_HEADS = "flash-attention-decode-grouped-heads"
# The fourth: a sequence's positions sit in cells by position (modulo the cache's size), so a
# restored window checkpoint lands where a full prefill put the same tokens, and the decode
# path above takes its blocks round the threads by index. Restores of window-sized caches
# then give a full prefill's log-probabilities bit for bit, every token of the answer.
KV_CELLS_BY_POSITION = "kv-cells-by-position"
# scripts/llama_build.py's patch that lets a sequence-state copy end at a given position:
# a window checkpoint of where a prompt's last turn starts is then taken after its last
# chunk is read whole, instead of by ending a chunk there (``swa_checkpoints``).
STATE_SEQ_WINDOW_AT = "state-seq-window-at"


def canonical_rows(options: LoadOptions, kv_cache_type: str, flash_attention: bool, *, offloads: bool = False,
                   patches: frozenset[str] = frozenset(), window_cache: bool = False) -> int:
    """The fewest prompt rows one ``llama_decode`` must give a sequence for the KV it
    writes to be what a full prefill of the same prompt writes, bit for bit.

    Upstream llama.cpp's CPU flash-attention kernel over an f16 (or f32) cache takes a tiled
    path for a sequence's rows when a micro-batch holds at least ``FA_TILE_ROWS`` of them,
    and a row-at-a-time path below that; each row's result depends only on which path ran
    (measured: a 300-token prompt read in chunks of 100 gives the logits of one batch of
    300 bit for bit, on SmolLM2 and gemma-3-270m alike; chunks of 64 + a 44-row tail
    differ in those 44 rows by up to 1.4). So the engine reads prompts in chunks of at
    least that many rows, reuses only KV written that way, and always re-reads at least
    that many tokens of a prompt.

    The llama.cpp that scripts/llama_build.py builds takes the tiled path from
    ``PATCHED_TILE_ROWS`` (``FA_TILES_FROM_32_ROWS``); the tiled path's result for a row
    does not depend on how many rows share its tile (its GEMM accumulates each element in
    the same order whatever the tile's height), so on the CPU with that build 32 rows are
    enough: a restored SmolLM2 conversation read on in 32-63-row chunks gives every
    log-probability of a full prefill bit for bit, on the zen4 and haswell variants. A
    window-sized cache needs two more of the recipe's patches for 32, else keeps 64: without
    ``KV_CELLS_BY_POSITION`` a window checkpoint restored at a position that is not a
    multiple of the kernel's 64-cell KV tiles put its cells in other tiles than a full
    prefill does (gemma-3-270m, restored at 864: first log-probability off by 0.06); without
    ``STATE_SEQ_WINDOW_AT`` 32 makes the last-turn checkpoint (``LAST_TURN_REACH``, 64
    tokens back) and the resume cut (32 back) two cuts of each prompt's end, two small
    chunks (gemma-3-270m at depth 16,384: 0.69-0.88x llama-server's prompt reading against
    1.09x with 64). Not with layers on a GPU, whose kernels the patch does not touch.

    Without flash attention, or over a quantized cache, the one-row path (each decode step)
    is the only different one: two rows suffice.
    """
    if not (flash_attention and kv_cache_type in ("f16", "f32") and options.batch_size >= 4 * FA_TILE_ROWS):
        return 2
    window_ready = not window_cache or {KV_CELLS_BY_POSITION, STATE_SEQ_WINDOW_AT} <= patches
    if FA_TILES_FROM_32_ROWS in patches and not offloads and window_ready:
        return PATCHED_TILE_ROWS
    return FA_TILE_ROWS


# Weight types that no CPU kernel of the engine's x86 variants takes in groups of rows: no
# repacked layout (ggml-cpu/repack.cpp: Q4_0, Q8_0, IQ4_NL, MXFP4 and the K-quants Q2/4/5/6_K),
# no llamafile tiles (sgemm.cpp: F32, F16, BF16, Q8_0, Q4_0, Q5_0, IQ4_NL) and no AMX (left
# out, backends.UNSAFE_VARIANTS). They take ggml's one-row dot product, whose result for a
# row is the same whatever else the batch holds.
ROW_BY_ROW_WEIGHT_TYPES = frozenset({3, 7})  # GGML_TYPE_Q4_1, GGML_TYPE_Q5_1
# Tensors that write no KV: the token embeddings are looked up row by row, and the output
# matrix only makes logits (of the rows asked for, the last one when a prompt is read).
NO_KV_TENSORS = frozenset({"token_embd.weight", "output.weight"})


def prefill_alignment(info: GGUFInfo, *, offloads: bool) -> int:
    """Where prompt chunks that are reused must end: 1 (anywhere) when every matrix that
    shapes the KV cache is of a type whose kernel computes each row alone, else
    ``PREFILL_ALIGN``.

    With ``PREFILL_ALIGN`` a restore resumes at the last multiple of 32 that leaves a
    canonical chunk, so a resume re-reads 32-63 tokens; at 1 it re-reads ``canonical_rows``
    or the new tokens, whichever is more (SmolLM2 Q4_1, a ~2,000-token chat's next question
    after a restart: 38 tokens instead of 46). Measured: a SmolLM2 state restored at
    positions 959, 963 and 967 gives every log-probability of a full prefill bit for bit,
    on the zen4 and haswell variants. Only x86 (ARM's int8 matrix kernels take rows in
    pairs) and only on the CPU (GPU kernels tile rows)."""
    if offloads or platform.machine().lower() not in ("x86_64", "amd64"):
        return PREFILL_ALIGN
    for tensor in info.tensors:
        if len(tensor.shape) >= 2 and tensor.name not in NO_KV_TENSORS and tensor.ggml_type not in ROW_BY_ROW_WEIGHT_TYPES:
            return PREFILL_ALIGN
    return 1


def output_rows(options: LoadOptions, sequences: int) -> int | None:
    """The most logits rows one decode of this context asks for: a row a sequence, and a
    draft's rows when drafts are verified (``LoadedModel.step``; a prompt chunk asks for
    its last row only). None for every row of a micro-batch: ``every_logit`` contexts,
    and embeddings, which pool every row."""
    if options.embeddings or options.every_logit:
        return None
    return sequences * (1 + draft_room(options))


def draft_room(options: LoadOptions) -> int:
    """Draft tokens each sequence may add to a step's batch."""
    return MAX_DRAFT if options.speculative != OFF and not options.embeddings else 0


def speculative_mode(lib: Any, model: Any, options: LoadOptions, model_id: str) -> str:
    """The speculative mode this model runs: the setting, unless the model cannot take it."""
    try:
        mode = check_mode(options.speculative)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from exc
    if mode == OFF or options.embeddings:
        return OFF
    # Rejected draft tokens are removed from the KV cache: a recurrent state cannot drop
    # a tail. A sliding-window model's can: its window cache holds a micro-batch more than
    # the window, and a rejected draft is cut within the step that wrote it, so the window
    # of the next position is still there (tested past the window: the cache after
    # hundreds of drafted tokens, some rejected, predicts as a full prefill does).
    if lib.llama_model_is_recurrent(model) or lib.llama_model_is_hybrid(model):
        log.info("speculative decoding is off for %s: its cache cannot drop rejected drafts", model_id)
        return OFF
    return mode


def _special_text(info: GGUFInfo, role: str) -> str:
    found = info.special_tokens.get(role)
    return found[1] or "" if found else ""

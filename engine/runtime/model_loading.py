"""Loading a model and creating its context: the load-time half of ``LoadedModel``.

``ModelLoading`` opens the weights (offloading the layers the fit estimate allows, fewer on
each failed try), creates the llama.cpp context with a KV stream per sequence, reads what
the rest of the engine needs from the model (vocabulary, context sizes, chat template) and
decides the speculative mode. ``LoadedModel`` (model.py) inherits it; ``LoadOptions`` are
the settings a load takes.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..base import GGUFInfo, ModelLoadError, ModelRecord
from ..text import ChatTemplate
from .fit import AUTO_KV_CACHE, ModelShape, detect_machine, estimate_fit, kv_cache_type_for
from .lora_runtime import ContextAdapters
from .native import physical_cores
from .slots import FA_TILE_ROWS, KvSlot
from .speculative import DRAFT, MAX_DRAFT, OFF, check_mode
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
    # None: the engine's rule (``ModelLoading._flash_attention``: on); True/False forces it,
    # for benchmarks and checks that compare both. Either way the prefix cache stays exact
    # (``ModelLoading._canonical_rows``).
    flash_attention: bool | None = None
    # True when a person or a setting asked for ``context_size`` (a model's or the app's
    # context setting, ``serve --context``): it is honoured past the context the model was
    # trained for, with a warning (``context_note``). False (the automatic choice, or a
    # caller's default) keeps it within the training context.
    explicit_context: bool = False


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


class ModelLoading:
    """The loading half of ``LoadedModel``: ``_load`` sets every attribute declared here."""

    record: ModelRecord
    options: LoadOptions
    info: GGUFInfo
    slots: list[KvSlot]
    close: Callable[[], None]
    _lib: Any
    _model: Any
    _progress_cb: Any
    n_vocab: int
    n_ctx: int  # each sequence's context
    n_ctx_train: int
    n_layer: int
    n_swa: int
    threads: int
    gpu_layers: int
    kv_cache_type: str  # the K/V element type this context runs ("auto" resolved)
    flash_attention: bool
    canonical_rows: int  # the fewest prompt rows a chunk needs for exact KV (_canonical_rows)
    offload_note: str
    context_note: str  # why the context runs past the training context, or ""
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


    # -- loading --------------------------------------------------------------------

    def _load(self, progress: ProgressCallback | None) -> None:
        if self.options.kv_cache_type != AUTO_KV_CACHE and self.options.kv_cache_type not in KV_CACHE_TYPES:
            raise ModelLoadError(f"unknown KV cache type {self.options.kv_cache_type!r}; use auto, f16 or q8_0")
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
        if self.context_note:
            log.warning("%s", self.context_note)
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
        per_sequence, self.context_note = context_per_sequence(
            wanted, self.n_ctx_train, self.options.explicit_context, self.record.id)
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
        # Sliding-window layers (gemma-3) keep a cache of the full context, not just the
        # window (llama.cpp's default, made explicit): rejected drafts and a trimmed prefix
        # can then be removed like any other tail, with every cell the next token attends to
        # still there.
        ctx_params.swa_full = True
        threads = self.options.threads or physical_cores()
        ctx_params.n_threads = threads
        ctx_params.n_threads_batch = threads
        offloads = gpu_layers > 0 and bool(lib.llama_supports_gpu_offload())
        self.kv_cache_type = kv_cache_type_for(self.options.kv_cache_type, offloads)
        kv_type = KV_CACHE_TYPES[self.kv_cache_type]
        ctx_params.type_k = kv_type
        ctx_params.type_v = kv_type
        self.flash_attention = self._flash_attention(offloads)
        self.canonical_rows = self._canonical_rows()
        ctx_params.flash_attn_type = (
            lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if self.flash_attention else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        ctx_params.embeddings = self.options.embeddings
        if self.options.embeddings:
            ctx_params.pooling_type = (lib.LLAMA_POOLING_TYPE_LAST if self.options.pooling == "last"
                                       else lib.LLAMA_POOLING_TYPE_MEAN)
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

    def _flash_attention(self, offloads: bool) -> bool:
        """On unless forced either way, as llama-server has it: faster prompt reading on the
        CPU (llama-bench pp512 at depth 4,096, SmolLM2: 105 tok/s against 91 without it), less
        memory on GPUs, and a quantized V cache needs it. The prefix cache stays exact with
        it because prompts are read in chunks of at least ``canonical_rows`` (see there)."""
        if self.options.flash_attention is not None:
            return self.options.flash_attention
        return True

    def _canonical_rows(self) -> int:
        """The fewest prompt rows one ``llama_decode`` must give a sequence for the KV it
        writes to be what a full prefill of the same prompt writes, bit for bit.

        llama.cpp's CPU flash-attention kernel over an f16 (or f32) cache takes a tiled path
        for a sequence's rows when a micro-batch holds at least ``FA_TILE_ROWS`` of them, and
        a row-at-a-time path below that; each row's result depends only on which path ran
        (measured: a 300-token prompt read in chunks of 100 gives the logits of one batch of
        300 bit for bit, on SmolLM2 and gemma-3-270m alike; chunks of 64 + a 44-row tail
        differ in those 44 rows by up to 1.4). So the engine reads prompts in chunks of at
        least that many rows, reuses only KV written that way, and always re-reads at least
        that many tokens of a prompt. Without flash attention, or over a quantized cache,
        the one-row path (each decode step) is the only different one: two rows suffice.
        """
        if self.flash_attention and self.kv_cache_type in ("f16", "f32") and self.options.batch_size >= 4 * FA_TILE_ROWS:
            return FA_TILE_ROWS
        return 2

    def _load_draft(self) -> None:
        """Load the draft model of speculative "draft": ``LoadedModel`` does, since a draft
        model is a ``LoadedModel`` too (this half of it does not import that class)."""
        raise NotImplementedError

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
        # a tail. A sliding-window model's can, with its full-size window cache (swa_full
        # above): tested past the window, the cache after hundreds of drafted tokens, some
        # rejected, predicts as a full prefill does, to rounding.
        if lib.llama_model_is_recurrent(self._model) or lib.llama_model_is_hybrid(self._model):
            log.info("speculative decoding is off for %s: its cache cannot drop rejected drafts", self.record.id)
            return OFF
        return mode

    def _special_text(self, role: str) -> str:
        found = self.info.special_tokens.get(role)
        return found[1] or "" if found else ""

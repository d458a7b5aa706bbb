"""Will this model fit on this machine? A memory estimate for a GGUF file before loading it.

The estimate adds up what llama.cpp allocates when it loads a model:

``weights``
    The GGUF file's size (tensor data is almost all of a GGUF file). The input token
    embedding always stays in system RAM; the output layer goes to the GPU only when
    every layer is offloaded.

``KV cache``
    ``n_layers × n_ctx × n_head_kv × (head_dim_k + head_dim_v) × bytes_per_element``,
    with 2 bytes per element for f16, 34/32 for q8_0 and 18/32 for q4_0. Example:
    Llama-3-8B (32 layers, 8 KV heads of 128 dims) at 8192 tokens in f16 is
    32 × 8192 × 8 × 256 × 2 bytes = 1 GiB. Sliding-window layers (Gemma 3: five of every
    six) are counted at what llama.cpp allocates for them with ``swa_full`` off, the
    engine's default: per sequence the window plus a micro-batch, padded to 256 cells
    (gemma-3-270m: 1,024 cells however long the context; ``swa_checkpoints``). Llama 4's
    chunked layers (three of every four, chunks of 8,192) are counted the same way.

``window checkpoints``
    Copies of the sliding-window layers' last ``n_swa`` positions that each sequence keeps
    so an edit, a regenerate or a saved chat resumes without reading its whole prompt
    again. They are in system RAM wherever the cache is: ``sequences × k × window layers ×
    n_swa × n_head_kv × (head_dim_k + head_dim_v) × bytes_per_element`` at most, where
    ``k`` (``checkpoints_per_sequence``) is as many as the window layers' cells saved by
    window-sized caches pay for, 2 to 8. gemma-3-270m: 7.5 MiB each, 8 a sequence at 8,192
    tokens (60 MiB), 2 at 2,048; Gemma 3 12B: 320 MiB each, 6 a sequence at 8,192 tokens
    (1.9 GiB), 8 from 9,728 on (2.5 GiB).

``compute``
    llama.cpp's scratch buffer for one micro-batch (``n_ubatch`` = 512 tokens). Its peak
    is the larger of the output logits (``n_vocab × rows × 4`` bytes) and the attention
    scores (``n_head × n_ctx × n_ubatch × 4`` bytes), plus 64 MiB for the rest of the
    graph. ``rows`` is what a decode may ask logits for: every row of the micro-batch for
    the lab's measures, one a sequence (and a draft's) for chat
    (``model_loading.output_rows``). For Llama-3-8B at 8192 tokens without flash
    attention that is 576 MiB (the scores); llama.cpp reports about 560 MiB.

Headroom: 256 MiB of free VRAM is left for the driver and 512 MiB of available RAM for
the rest of the system.

The verdict, for the free memory measured now:

* **fits on GPU** — weights (less the input embedding) + KV + compute ≤ usable VRAM;
* **partial offload (N of M layers)** — ``N = (usable VRAM − compute) ÷ (one layer's
  weights + its KV)`` layers on the GPU, the rest plus the embeddings in RAM, which must
  hold them. ``M`` counts the output layer as llama.cpp does ("offloaded 33/33 layers"),
  so ``N`` is directly usable as ``n_gpu_layers``;
* **CPU only** — no usable GPU (none found, or this llama.cpp build cannot offload) and
  weights + KV + compute + window checkpoints ≤ usable RAM;
* **too large** — none of the above.

VRAM comes from llama.cpp's own backends (the devices a load would use), or, where
llama.cpp must not be loaded, from NVML (``pynvml``, optional) or ``nvidia-smi``; with
none of them, the machine simply has no GPU as far as this module knows. On Apple Silicon
the GPU shares system RAM, so RAM is the budget for both.

Why one file of ~440 lines: the whole memory estimate, each term documented above, and the
machine probe it is compared with.
"""

from __future__ import annotations

import logging
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..base import GGUFInfo
from .slots import MAX_CHECKPOINTS, MIN_CHECKPOINTS

log = logging.getLogger(__name__)

MIB = 1024 * 1024
GIB = 1024 * MIB
VRAM_HEADROOM = 256 * MIB
RAM_HEADROOM = 512 * MIB
GRAPH_EXTRA = 64 * MIB
DEFAULT_UBATCH = 512

KV_BYTES_PER_ELEMENT: dict[str, float] = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}

FITS_GPU = "gpu"
PARTIAL = "partial"
CPU_ONLY = "cpu"
TOO_LARGE = "too_large"


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a model that decide its memory use (all from the GGUF header)."""

    weights_bytes: int
    n_layers: int
    n_embd: int
    n_head: int
    n_head_kv: float  # average over layers (some models vary it per layer)
    head_dim_k: int
    head_dim_v: int
    n_vocab: int
    n_params: int = 0
    input_embd_bytes: int | None = None  # token_embd.weight, when the tensor list is known
    output_bytes: int | None = None  # output.weight + norm (0 when tied to the input); None: unknown
    n_swa: int = 0  # the sliding window's positions (0: none)
    swa_layers: int = 0  # how many layers attend through it (``sliding_window_layers``)

    @classmethod
    def from_gguf(cls, info: GGUFInfo) -> "ModelShape":
        """Read a shape from a parsed header (a local file or a header fetched with Range)."""
        n_layers = _as_int(info.arch_value("block_count")) or 1
        n_embd = _as_int(info.arch_value("embedding_length")) or 0
        n_head = _as_int(info.arch_value("attention.head_count")) or 1
        n_head_kv = _per_layer_mean(info.arch_value("attention.head_count_kv"), default=n_head)
        head_k = _as_int(info.arch_value("attention.key_length")) or (n_embd // n_head if n_head else 0)
        head_v = _as_int(info.arch_value("attention.value_length")) or head_k
        n_vocab = info.vocab_size or _as_int(info.arch_value("vocab_size")) or 0
        sizes = {t.name: t.n_bytes or 0 for t in info.tensors}
        input_embd = sizes.get("token_embd.weight")
        # No output.weight in a known tensor list: the output reuses the input embedding.
        output = sizes.get("output.weight", 0) + sizes.get("output_norm.weight", 0) if sizes else None
        data_bytes = info.file_size - info.data_offset
        n_swa = sliding_window_size(info)
        return cls(
            weights_bytes=data_bytes if data_bytes > 0 else info.file_size,
            n_layers=n_layers, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv,
            head_dim_k=head_k, head_dim_v=head_v, n_vocab=n_vocab,
            n_params=info.parameter_count, input_embd_bytes=input_embd, output_bytes=output,
            n_swa=n_swa, swa_layers=sliding_window_layers(info, n_layers) if n_swa else 0,
        )

    def with_weights(self, weights_bytes: int) -> "ModelShape":
        """The same architecture at another quantization (another file of the same repo)."""
        scale = weights_bytes / self.weights_bytes if self.weights_bytes else 1.0
        return ModelShape(
            weights_bytes=weights_bytes, n_layers=self.n_layers, n_embd=self.n_embd, n_head=self.n_head,
            n_head_kv=self.n_head_kv, head_dim_k=self.head_dim_k, head_dim_v=self.head_dim_v,
            n_vocab=self.n_vocab, n_params=self.n_params,
            input_embd_bytes=None if self.input_embd_bytes is None else int(self.input_embd_bytes * scale),
            output_bytes=None if self.output_bytes is None else int(self.output_bytes * scale),
            n_swa=self.n_swa, swa_layers=self.swa_layers,
        )

    def _embedding_estimate(self) -> int:
        # Without the tensor list: an embedding matrix at the file's average bits per weight.
        if not self.n_params:
            return 0
        return int(self.n_vocab * self.n_embd * self.weights_bytes / self.n_params)

    @property
    def input_bytes(self) -> int:
        return self.input_embd_bytes if self.input_embd_bytes is not None else self._embedding_estimate()

    @property
    def output_layer_bytes(self) -> int:
        return self.output_bytes if self.output_bytes is not None else self._embedding_estimate()

    @property
    def layer_bytes(self) -> float:
        repeating = max(0, self.weights_bytes - self.input_bytes - self.output_layer_bytes)
        return repeating / max(1, self.n_layers)


# The KV cache type setting's default: the fastest configuration that keeps the prefix
# cache exact where the layers run (``kv_cache_type_for``).
AUTO_KV_CACHE = "auto"


def kv_cache_type_for(setting: str, offloads: bool) -> str:
    """The K/V element type a setting means for a load that does (or does not) run layers
    on a GPU: "auto" is f16; any other value is itself.

    f16 with flash attention is llama-server's default and the fastest configuration
    measured on the CPU (benchmarks/speed.py, SmolLM2, depth 4,096: llama-bench pp512 105
    tok/s with f16 against 29 with q8_0, both with flash attention; llama.cpp's CPU kernel
    tiles only f16/f32 caches). q8_0 halves the cache's memory for a small cost in quality
    (benchmarks/kv_quality.py: KL divergence 0.003-0.006 against f16 on the test models)
    and is there to choose where memory is short. ``offloads`` is kept for a rule that
    depends on the device; today's does not.
    """
    del offloads
    if setting != AUTO_KV_CACHE:
        return setting
    return "f16"


def _bytes_per_layer_cell(shape: ModelShape, kv_type: str) -> float:
    """One cell of one layer's K and V, of the cache type ``kv_type`` resolves to."""
    per_element = KV_BYTES_PER_ELEMENT.get(kv_cache_type_for(kv_type, offloads=False).lower(), 2.0)
    return shape.n_head_kv * (shape.head_dim_k + shape.head_dim_v) * per_element


def kv_cache_bytes(shape: ModelShape, n_ctx: int, kv_type: str = "f16", sequences: int = 1,
                   n_ubatch: int = DEFAULT_UBATCH) -> int:
    """The KV cache of ``n_ctx`` cells in all, over ``sequences`` sequences (one stream each)."""
    sequences = max(1, sequences)
    window = window_cells_per_sequence(shape.n_swa, n_ctx // sequences, n_ubatch) * sequences
    cells = (shape.n_layers - shape.swa_layers) * n_ctx + shape.swa_layers * window
    return int(cells * _bytes_per_layer_cell(shape, kv_type))


def window_cells_per_sequence(n_swa: int, n_ctx_per_sequence: int, n_ubatch: int = DEFAULT_UBATCH) -> int:
    """The cells llama.cpp gives a sliding-window layer per stream with ``swa_full`` off:
    the window and a micro-batch, padded to 256 cells, at most the context."""
    return min(n_ctx_per_sequence, -(-(n_swa + n_ubatch) // 256) * 256)


def checkpoints_per_sequence(n_swa: int, n_ctx_per_sequence: int, n_ubatch: int = DEFAULT_UBATCH) -> int:
    """How many window checkpoints a sequence keeps: as many as the window layers' cells
    that window-sized caches save (the context less ``window_cells_per_sequence``) pay
    for, each checkpoint holding ``n_swa`` of them, so that the window cache and its
    checkpoints never weigh more than a full-size window cache would. At least
    ``MIN_CHECKPOINTS`` (the two a prompt's end takes), at most ``MAX_CHECKPOINTS``."""
    saved = n_ctx_per_sequence - window_cells_per_sequence(n_swa, n_ctx_per_sequence, n_ubatch)
    return max(MIN_CHECKPOINTS, min(MAX_CHECKPOINTS, saved // max(1, n_swa)))


def window_checkpoint_bytes(shape: ModelShape, n_ctx: int, kv_type: str = "f16", sequences: int = 1,
                            n_ubatch: int = DEFAULT_UBATCH) -> int:
    """The system RAM ``sequences`` sequences' window checkpoints take at most (``n_ctx``
    cells in all): each keeps ``checkpoints_per_sequence`` copies of its window layers'
    last ``n_swa`` positions, of the cache's type. 0 for a model without window layers."""
    if not shape.swa_layers or not shape.n_swa:
        return 0
    sequences = max(1, sequences)
    per_sequence = n_ctx // sequences
    cells = min(shape.n_swa, per_sequence)
    kept = checkpoints_per_sequence(shape.n_swa, per_sequence, n_ubatch)
    return int(sequences * kept * shape.swa_layers * cells * _bytes_per_layer_cell(shape, kv_type))


# Architectures whose GGUF files leave the sliding-window layers to llama.cpp's default
# pattern (every n-th layer attends in full): llama.cpp's models/*.cpp ``load_swa_pattern``.
_SWA_PATTERNS = {"gemma3": 6, "gemma-embedding": 6, "gemma2": 2, "cohere2": 4, "gpt-oss": 2, "llama4": 4}
# Architectures whose window layers attend within fixed chunks (position p sees from
# p - p % n_swa on, llama.cpp's LLAMA_SWA_TYPE_CHUNKED) rather than over the last n_swa
# positions: Llama 4 and MobileLLM-R1, at a chunk of 8,192 that llama.cpp's loader sets
# whatever the file says (models/llama4.cpp).
CHUNKED_WINDOW_ARCHITECTURES = frozenset({"llama4"})
LLAMA4_CHUNK = 8192


def sliding_window_size(info: GGUFInfo) -> int:
    """The window (or chunk) llama.cpp gives a model's window layers, as its loader reads the
    header: the ``sliding_window`` key, except where the loader decides otherwise. Phi-3's
    files carry a window llama.cpp ignores (all its layers attend in full), and Llama 4's
    files usually carry none while it attends in chunks of 8,192 (0 in the key turns them
    off). The loaded model's own figure is ``llama_model_n_swa``, which the runtime uses."""
    value = _as_int(info.arch_value("attention.sliding_window"))
    if info.architecture == "phi3":
        return 0
    if info.architecture in CHUNKED_WINDOW_ARCHITECTURES:
        return 0 if value == 0 else LLAMA4_CHUNK
    return value or 0


def sliding_window_layers(info: GGUFInfo, n_layers: int) -> int:
    """How many of a sliding-window model's layers attend through the window: the header's
    ``sliding_window_pattern`` (a flag per layer, or every n-th layer in full), else the
    architecture's default; 0 (all counted in full) for an architecture not known here."""
    pattern = info.arch_value("attention.sliding_window_pattern")
    if isinstance(pattern, list):
        return sum(1 for flag in pattern[:n_layers] if flag)
    every = _as_int(pattern) or _SWA_PATTERNS.get(info.architecture, 0)
    return n_layers - n_layers // every if every > 1 else 0


def compute_bytes(shape: ModelShape, n_ctx: int, n_ubatch: int = DEFAULT_UBATCH, flash_attention: bool = True,
                  outputs: int | None = None) -> int:
    """llama.cpp's compute buffer for a micro-batch of ``n_ubatch`` rows of one sequence
    attending over ``n_ctx`` cells (one sequence's stream): the output logits, or without
    flash attention the attention scores if larger (flash attention never holds them whole).
    ``outputs``: the most logits rows a decode asks for (a chat context's
    ``model_loading.output_rows``); None for every row of the micro-batch. gemma-3-270m at
    32,768 tokens × 4 sequences, as llama.cpp reports it: 514.5 MiB with every row's
    logits, 50.8 MiB with a row a sequence."""
    logits = shape.n_vocab * (n_ubatch if outputs is None else min(n_ubatch, outputs)) * 4
    scores = 0 if flash_attention else shape.n_head * n_ctx * n_ubatch * 4
    return max(logits, scores) + GRAPH_EXTRA


@dataclass(frozen=True)
class GpuMemory:
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class MachineMemory:
    ram_total_bytes: int
    ram_available_bytes: int
    gpus: tuple[GpuMemory, ...] = ()
    offload_supported: bool = True  # can this llama.cpp build use the GPU at all?
    unified: bool = False  # Apple Silicon: the GPU uses system RAM

    @property
    def vram_free_bytes(self) -> int:
        # llama.cpp splits layers across GPUs by default, so the free memory adds up.
        return sum(g.free_bytes for g in self.gpus)

    @property
    def has_gpu(self) -> bool:
        return self.offload_supported and (self.unified or bool(self.gpus))


@dataclass(frozen=True)
class FitEstimate:
    verdict: str  # FITS_GPU | PARTIAL | CPU_ONLY | TOO_LARGE
    gpu_layers: int  # a value for n_gpu_layers
    total_layers: int  # repeating layers + the output layer, as llama.cpp counts them
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    vram_needed_bytes: int
    ram_needed_bytes: int
    context: int
    checkpoint_bytes: int = 0  # window checkpoints at most, always in RAM (``window_checkpoint_bytes``)

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes + self.checkpoint_bytes

    @property
    def label(self) -> str:
        if self.verdict == FITS_GPU:
            return "fits on GPU"
        if self.verdict == PARTIAL:
            return f"partial offload ({self.gpu_layers} of {self.total_layers} layers)"
        if self.verdict == CPU_ONLY:
            return "CPU only"
        return "too large"


def estimate_fit(
    shape: ModelShape, machine: MachineMemory, context: int = 4096, kv_type: str = "f16",
    n_ubatch: int = DEFAULT_UBATCH, sequences: int = 1, flash_attention: bool = True, outputs: int | None = None,
) -> FitEstimate:
    """The verdict for ``shape`` at ``context`` tokens (over ``sequences`` sequences) on
    ``machine`` (see the module docstring); ``outputs`` as ``compute_bytes`` has it."""
    cache_type = kv_cache_type_for(kv_type, offloads=machine.has_gpu)
    kv = kv_cache_bytes(shape, context, cache_type, sequences, n_ubatch)
    checkpoints = window_checkpoint_bytes(shape, context, cache_type, sequences, n_ubatch)
    compute = compute_bytes(shape, context // max(1, sequences), n_ubatch, flash_attention, outputs)
    weights = shape.weights_bytes
    total_layers = shape.n_layers + 1
    usable_ram = max(0, machine.ram_available_bytes - RAM_HEADROOM)
    all_on_cpu = weights + kv + compute + checkpoints

    def result(verdict: str, layers: int, vram: int, ram: int) -> FitEstimate:
        return FitEstimate(verdict, layers, total_layers, weights, kv, compute, vram, ram, context, checkpoints)

    if machine.has_gpu:
        if machine.unified:
            # One pool: everything on the GPU, counted against RAM.
            if all_on_cpu <= usable_ram:
                return result(FITS_GPU, total_layers, all_on_cpu, all_on_cpu)
            return result(TOO_LARGE, 0, all_on_cpu, all_on_cpu)
        usable_vram = max(0, machine.vram_free_bytes - VRAM_HEADROOM)
        full_gpu = weights - shape.input_bytes + kv + compute
        if full_gpu <= usable_vram and shape.input_bytes + checkpoints <= usable_ram:
            return result(FITS_GPU, total_layers, full_gpu, shape.input_bytes + checkpoints)
        kv_layer = kv / max(1, shape.n_layers)
        per_layer = shape.layer_bytes + kv_layer
        layers = int((usable_vram - compute) // per_layer) if per_layer > 0 and usable_vram > compute else 0
        layers = max(0, min(layers, shape.n_layers))
        if layers > 0:
            vram = int(layers * per_layer + compute)
            ram = int(shape.input_bytes + shape.output_layer_bytes + (shape.n_layers - layers) * per_layer + compute
                      + checkpoints)
            if ram <= usable_ram:
                return result(PARTIAL, layers, vram, ram)
            return result(TOO_LARGE, layers, vram, ram)
    if all_on_cpu <= usable_ram:
        return result(CPU_ONLY, 0, 0, all_on_cpu)
    return result(TOO_LARGE, 0, 0, all_on_cpu)


# -- one model over several machines (llama.cpp RPC workers) -------------------------------


@dataclass(frozen=True)
class RpcSplit:
    """How a load spreads a model's layers: the local device keeps some, the workers the rest."""

    gpu_layers: int  # n_gpu_layers: layers on the workers (llama.cpp splits them by free memory)
    worker_layers: tuple[int, ...]  # of those, each worker's share, in the order given
    local_layers: int
    total_layers: int

    @property
    def label(self) -> str:
        shares = " + ".join(str(n) for n in self.worker_layers)
        return f"{self.local_layers} layers here, {shares} on the workers (of {self.total_layers})"


def rpc_split(
    shape: ModelShape, local_free_bytes: int, worker_free_bytes: Sequence[int], context: int = 4096,
    kv_type: str = "f16",
) -> RpcSplit:
    """Layers per device in proportion to free memory, as llama.cpp's default split does,
    with no worker given more layers than its free memory holds."""
    total_layers = shape.n_layers + 1  # the output layer counts as one, as llama.cpp counts it
    # Layers on the workers are offloaded ones: "auto" is their cache type (f16).
    per_layer = shape.layer_bytes + kv_cache_bytes(shape, context, kv_cache_type_for(kv_type, offloads=True)) / max(1, shape.n_layers)
    frees = [max(0, int(f)) for f in worker_free_bytes]
    pool = max(1, max(0, local_free_bytes) + sum(frees))
    wanted = round(total_layers * sum(frees) / pool)
    fits = sum(int(f // per_layer) for f in frees) if per_layer > 0 else total_layers
    on_workers = max(0, min(total_layers, wanted, fits))
    shares = [on_workers * f / max(1, sum(frees)) for f in frees]
    counts = [int(x) for x in shares]
    # Largest remainders first, so the counts add up to exactly on_workers.
    for i in sorted(range(len(shares)), key=lambda i: shares[i] - counts[i], reverse=True)[: on_workers - sum(counts)]:
        counts[i] += 1
    return RpcSplit(on_workers, tuple(counts), total_layers - on_workers, total_layers)


# -- the context a model gets when none is set ----------------------------------------------

# "Auto" context: the model's training context, halved until it fits, never under the floor.
AUTO_CONTEXT_FLOOR = 2048
AUTO_CONTEXT_CAP = 131_072  # even a 1M-token model starts here; a setting can ask for more
# Without a GPU to hold it, the KV cache may take this share of the RAM that is free: the
# weights, the prompt cache's RAM tier and the rest of the desktop need the remainder.
KV_RAM_SHARE = 0.25
# A desktop's cap on the automatic context, on the CPU: every sequence's KV cache together
# stays within twice the model's weights or 1 GiB, whichever is more. A 270M model then
# chats with 16k tokens per answer (0.6 GB of q8_0 cache for four) instead of reserving
# 4 GB for 32k x 4 of f16, while a 7B model keeps its long context where RAM allows. A
# context set by hand is never capped.
KV_WEIGHTS_SHARE = 2.0
KV_DESKTOP_FLOOR = 1 * GIB
FALLBACK_TRAINED_CONTEXT = 4096  # a header without context_length


def auto_context(
    shape: ModelShape, machine: MachineMemory, trained_context: int | None, parallel: int = 1,
    kv_type: str = "f16", n_ubatch: int = DEFAULT_UBATCH, outputs: int | None = None,
) -> int:
    """Tokens of context per sequence for a model loaded with no context setting.

    The largest of ``trained_context``, its halves, down to ``AUTO_CONTEXT_FLOOR`` whose KV
    cache for all ``parallel`` sequences fits: entirely on the GPU when the model fits there
    at the floor (so "auto" never pushes layers off the GPU), else within ``KV_RAM_SHARE``
    of the usable RAM and the desktop cap (``KV_WEIGHTS_SHARE``) without the whole load
    becoming too large.
    """
    ceiling = min(trained_context or FALLBACK_TRAINED_CONTEXT, AUTO_CONTEXT_CAP)
    if ceiling <= AUTO_CONTEXT_FLOOR:
        return max(1, ceiling)
    sequences = max(1, parallel)

    def estimate(per_sequence: int) -> FitEstimate:
        return estimate_fit(shape, machine, context=per_sequence * sequences, kv_type=kv_type, n_ubatch=n_ubatch,
                            sequences=sequences, outputs=outputs)

    on_gpu = machine.has_gpu and estimate(AUTO_CONTEXT_FLOOR).verdict == FITS_GPU
    kv_budget = min(KV_RAM_SHARE * max(0, machine.ram_available_bytes - RAM_HEADROOM),
                    max(KV_WEIGHTS_SHARE * shape.weights_bytes, KV_DESKTOP_FLOOR))
    candidate = ceiling
    while candidate > AUTO_CONTEXT_FLOOR:
        fit = estimate(candidate)
        if on_gpu and fit.verdict == FITS_GPU:
            return candidate
        if not on_gpu and fit.verdict != TOO_LARGE and fit.kv_bytes <= kv_budget:
            return candidate
        candidate //= 2
    return AUTO_CONTEXT_FLOOR


# -- what this machine has ------------------------------------------------------------------


def detect_machine(check_backend: bool = True) -> MachineMemory:
    """Free RAM and VRAM now. Never fails: a machine without a GPU reports none.

    With ``check_backend`` the GPUs are the devices llama.cpp's own backends see (so the
    estimate and an actual load agree: a GPU that the build cannot use counts as none);
    without it (tests, tools that must not load llama.cpp), NVML or nvidia-smi.
    """
    import psutil  # noqa: PLC0415 — only needed here

    memory = psutil.virtual_memory()
    unified = platform.system() == "Darwin" and platform.machine() == "arm64"
    if check_backend:
        gpus, offload = _backend_gpus()
    else:
        gpus, offload = (() if unified else tuple(_nvml_gpus() or _nvidia_smi_gpus())), True
    return MachineMemory(
        ram_total_bytes=int(memory.total), ram_available_bytes=int(memory.available),
        gpus=gpus, offload_supported=offload, unified=unified,
    )


def _backend_gpus() -> tuple[tuple[GpuMemory, ...], bool]:
    from .native import backend_report  # noqa: PLC0415 — loads llama.cpp on first use

    report = backend_report(refresh=True)
    gpus = tuple(GpuMemory(d.description or d.name, d.total_bytes, d.free_bytes)
                 for d in report.gpus if d.kind == "gpu")
    return gpus, bool(report.gpus)


def _nvml_gpus() -> list[GpuMemory]:
    try:
        import pynvml  # type: ignore[import-not-found]  # noqa: PLC0415 — optional (nvidia-ml-py)
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 — NVML raises its own error types when no driver is present
        log.debug("NVML unavailable: %s", exc)
        return []
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            info = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            found.append(GpuMemory(name.decode() if isinstance(name, bytes) else str(name), int(info.total), int(info.free)))
        return found
    except Exception as exc:  # noqa: BLE001
        log.debug("NVML query failed: %s", exc)
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _nvidia_smi_gpus() -> list[GpuMemory]:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return []
    try:
        completed = subprocess.run(  # fixed arguments, found on PATH
            [executable, "--query-gpu=name,memory.total,memory.free", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=5, check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("nvidia-smi failed: %s", exc)
        return []
    return parse_nvidia_smi(completed.stdout)


def parse_nvidia_smi(output: str) -> list[GpuMemory]:
    """Parse ``name, total MiB, free MiB`` lines; lines that do not parse are skipped."""
    gpus = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.rsplit(",", 2)]
        if len(parts) != 3:
            continue
        try:
            gpus.append(GpuMemory(parts[0], int(float(parts[1]) * MIB), int(float(parts[2]) * MIB)))
        except ValueError:
            continue
    return gpus


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return max(value)
    return None


def _per_layer_mean(value: Any, default: int) -> float:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return sum(value) / len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return float(default)


__all__ = [
    "AUTO_CONTEXT_CAP", "AUTO_CONTEXT_FLOOR", "auto_context",
    "CPU_ONLY", "FITS_GPU", "PARTIAL", "TOO_LARGE", "FitEstimate", "GpuMemory", "MachineMemory", "ModelShape",
    "compute_bytes", "detect_machine", "estimate_fit", "kv_cache_bytes", "parse_nvidia_smi",
    "window_checkpoint_bytes",
    "RpcSplit", "rpc_split",
]

"""fit.auto_context: the context a model gets with no setting — its training context, halved
until the KV cache fits the machine — with the shapes of real GGUFs (see test_fit.py)."""

from __future__ import annotations

from inglenook.engine.fit import (
    AUTO_CONTEXT_FLOOR, FITS_GPU, GpuMemory, MachineMemory, ModelShape, auto_context, estimate_fit,
)

GIB = 1024**3

# Meta-Llama-3.1-8B-Instruct-Q4_K_M: 32 layers, 8 KV heads of 128 dims (128 KiB of f16 KV per token).
LLAMA31_8B = ModelShape(
    weights_bytes=4_920_739_232, n_layers=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim_k=128,
    head_dim_v=128, n_vocab=128_256, n_params=8_030_261_248,
)


def cpu(ram_gib: float) -> MachineMemory:
    return MachineMemory(int(ram_gib * GIB), int(ram_gib * GIB))


def gpu(vram_gib: float, ram_gib: float = 64) -> MachineMemory:
    return MachineMemory(int(ram_gib * GIB), int(ram_gib * GIB), (GpuMemory("Test GPU", int(vram_gib * GIB), int(vram_gib * GIB)),))


def test_plenty_of_ram_gives_the_trained_context() -> None:
    assert auto_context(LLAMA31_8B, cpu(64), 8192, parallel=4) == 8192  # 4 GiB of KV, within a quarter of RAM


def test_less_ram_halves_it_until_the_kv_cache_fits_a_quarter() -> None:
    # 16 GiB: a quarter is ~3.9 GiB; 4 sequences × 8192 tokens would be 4 GiB, × 4096 is 2 GiB.
    assert auto_context(LLAMA31_8B, cpu(16), 131_072, parallel=4) == 4096
    assert auto_context(LLAMA31_8B, cpu(16), 131_072, parallel=1) == 16384


def test_a_gpu_keeps_the_whole_model_on_it() -> None:
    chosen = auto_context(LLAMA31_8B, gpu(24), 131_072, parallel=1)
    assert chosen == 65536  # 131072 would need 16 GiB of KV plus 8 GiB of attention scratch
    assert estimate_fit(LLAMA31_8B, gpu(24), context=chosen).verdict == FITS_GPU
    assert estimate_fit(LLAMA31_8B, gpu(24), context=chosen * 2).verdict != FITS_GPU


def test_a_gpu_too_small_for_the_model_falls_back_to_the_ram_rule() -> None:
    assert auto_context(LLAMA31_8B, gpu(2, ram_gib=64), 131_072, parallel=4) == auto_context(LLAMA31_8B, cpu(64), 131_072, parallel=4)


def test_short_trained_contexts_and_tight_machines() -> None:
    assert auto_context(LLAMA31_8B, cpu(64), 1024) == 1024  # never more than the model was trained for
    assert auto_context(LLAMA31_8B, cpu(6), 131_072, parallel=16) == AUTO_CONTEXT_FLOOR  # nothing fits: the floor
    assert auto_context(LLAMA31_8B, cpu(64), None) == 4096  # a header without context_length
    assert auto_context(LLAMA31_8B, cpu(1024), 1_048_576) == 131_072  # the cap

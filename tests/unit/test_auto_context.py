"""fit.auto_context: the context a model gets with no setting — its training context, halved
until the KV cache fits the machine — with the shapes of real GGUFs (see test_fit.py)."""

from __future__ import annotations

from inglenook.engine.runtime.fit import (
    AUTO_CONTEXT_FLOOR, FITS_GPU, GIB as FIT_GIB, GpuMemory, MachineMemory, ModelShape, auto_context,
    estimate_fit, kv_cache_bytes, kv_cache_type_for,
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
    # 131072 tokens are 16 GiB of KV beside 4.9 GB of weights: on a 24 GiB GPU, not on 16.
    assert auto_context(LLAMA31_8B, gpu(24), 131_072, parallel=1) == 131_072
    chosen = auto_context(LLAMA31_8B, gpu(16), 131_072, parallel=1)
    assert chosen == 65536
    assert estimate_fit(LLAMA31_8B, gpu(16), context=chosen).verdict == FITS_GPU
    assert estimate_fit(LLAMA31_8B, gpu(16), context=chosen * 2).verdict != FITS_GPU


def test_a_gpu_too_small_for_the_model_falls_back_to_the_ram_rule() -> None:
    assert auto_context(LLAMA31_8B, gpu(2, ram_gib=64), 131_072, parallel=4) == auto_context(LLAMA31_8B, cpu(64), 131_072, parallel=4)


def test_short_trained_contexts_and_tight_machines() -> None:
    assert auto_context(LLAMA31_8B, cpu(64), 1024) == 1024  # never more than the model was trained for
    assert auto_context(LLAMA31_8B, cpu(6), 131_072, parallel=16) == AUTO_CONTEXT_FLOOR  # nothing fits: the floor
    assert auto_context(LLAMA31_8B, cpu(64), None) == 4096  # a header without context_length
    # The cap: 131,072 tokens of q8_0 (8.5 GiB) are within twice the weights (the desktop cap).
    assert auto_context(LLAMA31_8B, cpu(1024), 1_048_576, kv_type="q8_0") == 131_072


# gemma-3-270m Q4_K_M: 18 layers (every one with a full-size cache), 1 KV head of 256 dims.
GEMMA3_270M = ModelShape(
    weights_bytes=241_410_624, n_layers=18, n_embd=640, n_head=4, n_head_kv=1, head_dim_k=256,
    head_dim_v=256, n_vocab=262_144, n_params=268_098_176,
)


def test_a_small_model_gets_a_desktop_sized_cache_not_its_whole_training_context() -> None:
    """32k x 4 of f16 was 4 GB resident for a 253 MB model; the cache now stays within twice
    the weights or 1 GiB, whichever is more, however much RAM is free."""
    chosen = auto_context(GEMMA3_270M, cpu(64), 32_768, parallel=4, kv_type="auto")
    assert chosen == 8192  # "auto" is f16: 18 KB a token, 1.2 GB for 16,384 x 4
    assert kv_cache_bytes(GEMMA3_270M, chosen * 4, "f16") <= FIT_GIB
    # A machine with little free memory still halves further, as before.
    assert auto_context(GEMMA3_270M, cpu(2), 32_768, parallel=4, kv_type="auto") < chosen
    # A large model's long context is limited by RAM, not by the desktop cap.
    assert auto_context(LLAMA31_8B, cpu(64), 8192, parallel=4, kv_type="auto") == 8192


def test_the_automatic_cache_type_is_f16_on_the_cpu_and_on_a_gpu() -> None:
    assert kv_cache_type_for("auto", offloads=False) == "f16"
    assert kv_cache_type_for("auto", offloads=True) == "f16"
    assert kv_cache_type_for("q8_0", offloads=False) == "q8_0"  # a choice made by hand stays

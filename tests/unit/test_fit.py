"""The memory-fit estimate, checked against real models' published sizes and llama.cpp's numbers."""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from pathlib import Path

import pytest

from inglenook.engine.base.gguf import GGUFInfo, read_gguf
from inglenook.engine.runtime import fit
from inglenook.engine.runtime.fit import (
    CPU_ONLY, FITS_GPU, PARTIAL, TOO_LARGE, GpuMemory, MachineMemory, ModelShape, compute_bytes, estimate_fit,
    checkpoints_per_sequence, kv_cache_bytes, parse_nvidia_smi, window_checkpoint_bytes,
)

GIB = 1024**3
MIB = 1024**2

# Meta-Llama-3-8B-Instruct-Q4_K_M.gguf: 4,920,739,232 bytes; 32 layers, 32 query heads,
# 8 KV heads of 128 dims, 4096 embedding, 128256-token vocabulary, 8.03 B parameters.
LLAMA3_8B_Q4_K_M = ModelShape(
    weights_bytes=4_920_739_232, n_layers=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim_k=128,
    head_dim_v=128, n_vocab=128_256, n_params=8_030_261_248,
)
# Mistral-7B-v0.1 Q4_K_M: 4,368,439,584 bytes; 32 layers, 8 KV heads of 128 dims, 32000 tokens.
MISTRAL_7B_Q4_K_M = ModelShape(
    weights_bytes=4_368_439_584, n_layers=32, n_embd=4096, n_head=32, n_head_kv=8, head_dim_k=128,
    head_dim_v=128, n_vocab=32_000, n_params=7_241_732_096,
)


def machine(ram_gib: float, vram_gib: float | None = None, **kwargs: object) -> MachineMemory:
    gpus = () if vram_gib is None else (GpuMemory("Test GPU", int(vram_gib * GIB), int(vram_gib * GIB)),)
    return MachineMemory(int(ram_gib * GIB), int(ram_gib * GIB), gpus, **kwargs)  # type: ignore[arg-type]


def test_kv_cache_of_llama3_8b_at_8k_is_one_gib() -> None:
    assert kv_cache_bytes(LLAMA3_8B_Q4_K_M, 8192, "f16") == 1 * GIB
    assert kv_cache_bytes(LLAMA3_8B_Q4_K_M, 8192, "q8_0") == 1 * GIB * 34 // 64
    assert kv_cache_bytes(MISTRAL_7B_Q4_K_M, 32768, "f16") == 4 * GIB


def test_compute_buffer_is_near_what_llama_cpp_reports() -> None:
    # Without flash attention llama.cpp reports a compute buffer of about 560 MiB for
    # Llama-3-8B at 8192 tokens: the attention scores of a micro-batch.
    assert compute_bytes(LLAMA3_8B_Q4_K_M, 8192, flash_attention=False) == 576 * MIB
    # At a short context the output logits (vocab × batch) dominate instead, and with flash
    # attention (the default) they always do: the scores are never held whole.
    assert compute_bytes(LLAMA3_8B_Q4_K_M, 512, flash_attention=False) == 128_256 * 512 * 4 + 64 * MIB
    assert compute_bytes(LLAMA3_8B_Q4_K_M, 8192) == 128_256 * 512 * 4 + 64 * MIB
    # A chat context asks for the logits of a row a sequence (and a draft's), not 512.
    assert compute_bytes(LLAMA3_8B_Q4_K_M, 8192, outputs=4) == 128_256 * 4 * 4 + 64 * MIB
    assert compute_bytes(LLAMA3_8B_Q4_K_M, 8192, outputs=4096) == 128_256 * 512 * 4 + 64 * MIB


def test_llama3_8b_on_a_24_gib_gpu_fits() -> None:
    estimate = estimate_fit(LLAMA3_8B_Q4_K_M, machine(32, 24), context=8192)
    assert estimate.verdict == FITS_GPU and estimate.label == "fits on GPU"
    assert estimate.gpu_layers == estimate.total_layers == 33
    # 4.92 GB weights + 1 GiB KV + 314.5 MiB compute (logits of a 512-row batch) ≈ 6.32 GB.
    assert estimate.total_bytes == 4_920_739_232 + GIB + 128_256 * 512 * 4 + 64 * MIB
    assert 6.31e9 < estimate.total_bytes < 6.33e9


def test_llama3_8b_on_a_4_gib_gpu_offloads_part_of_its_layers() -> None:
    estimate = estimate_fit(LLAMA3_8B_Q4_K_M, machine(32, 4), context=8192)
    # (4 GiB − 256 MiB − 314.5 MiB) ÷ (133.6 MB of weights + 32 MiB of KV per layer) = 22.1 layers.
    assert estimate.verdict == PARTIAL
    assert estimate.label == "partial offload (22 of 33 layers)"
    # Without flash attention the attention scores of a micro-batch take 512 MiB more.
    no_flash = estimate_fit(LLAMA3_8B_Q4_K_M, machine(32, 4), context=8192, flash_attention=False)
    assert no_flash.label == "partial offload (20 of 33 layers)"


def test_without_a_gpu_it_is_cpu_only_or_too_large() -> None:
    assert estimate_fit(LLAMA3_8B_Q4_K_M, machine(16), context=8192).label == "CPU only"
    assert estimate_fit(LLAMA3_8B_Q4_K_M, machine(6), context=8192).verdict == TOO_LARGE
    # A GPU that this llama.cpp build cannot use counts for nothing.
    cpu_build = machine(16, 80, offload_supported=False)
    assert estimate_fit(LLAMA3_8B_Q4_K_M, cpu_build, context=8192).verdict == CPU_ONLY


def test_partial_offload_still_needs_ram_for_the_rest() -> None:
    assert estimate_fit(LLAMA3_8B_Q4_K_M, machine(2, 2), context=8192).verdict == TOO_LARGE


def test_context_decides_between_gpu_and_partial() -> None:
    gpu = machine(64, 6)
    assert estimate_fit(MISTRAL_7B_Q4_K_M, gpu, context=4096).verdict == FITS_GPU
    assert estimate_fit(MISTRAL_7B_Q4_K_M, gpu, context=32768).verdict == PARTIAL


def test_apple_silicon_shares_ram_with_the_gpu() -> None:
    mac = MachineMemory(16 * GIB, 12 * GIB, (), offload_supported=True, unified=True)
    assert estimate_fit(LLAMA3_8B_Q4_K_M, mac, context=8192).verdict == FITS_GPU
    small_mac = MachineMemory(8 * GIB, 5 * GIB, (), offload_supported=True, unified=True)
    assert estimate_fit(LLAMA3_8B_Q4_K_M, small_mac, context=8192).verdict == TOO_LARGE


def test_shape_from_real_gguf_headers(smollm2_path: Path, gemma_path: Path) -> None:
    smol = ModelShape.from_gguf(read_gguf(smollm2_path))
    assert (smol.n_layers, smol.n_head, smol.n_head_kv, smol.head_dim_k, smol.n_vocab) == (30, 9, 3, 64, 49152)
    # llama.cpp: "KV self size = 180.00 MiB" for SmolLM2-135M at 8192 tokens (f16).
    assert kv_cache_bytes(smol, 8192) == 180 * MIB
    assert smol.output_bytes is not None and smol.output_bytes < 10_000  # tied embeddings: only the norm
    gemma = ModelShape.from_gguf(read_gguf(gemma_path))
    assert (gemma.n_layers, gemma.n_head_kv, gemma.head_dim_k) == (18, 1, 256)
    # 3 full layers at 2,048 cells and 15 window layers at 1,024 (llama.cpp at 32,768 tokens:
    # "96.00 MiB (32768 cells, 3 layers)" and "15.00 MiB (1024 cells, 15 layers)").
    assert (gemma.n_swa, gemma.swa_layers) == (512, 15)
    assert kv_cache_bytes(gemma, 2048) == 21 * MIB
    assert kv_cache_bytes(gemma, 32768) == 111 * MIB
    assert kv_cache_bytes(gemma, 4 * 32768, sequences=4) == 4 * 111 * MIB
    assert estimate_fit(gemma, machine(4), context=2048).verdict == CPU_ONLY
    # Window checkpoints, each 15 window layers × 512 positions × 1 KiB, in RAM: as many a
    # sequence as the window cache saves room for (its context less 1,024 cells, 512 a
    # checkpoint), 2 to 8.
    assert window_checkpoint_bytes(smol, 8192) == 0  # no window layers
    assert window_checkpoint_bytes(gemma, 32768) == 8 * 15 * 512 * 1024 == 60 * MIB
    assert window_checkpoint_bytes(gemma, 4 * 32768, sequences=4) == 4 * 60 * MIB
    assert [checkpoints_per_sequence(512, n) for n in (256, 1024, 2048, 3072, 4096, 5120, 8192)] == [2, 2, 2, 4, 6, 8, 8]
    assert window_checkpoint_bytes(gemma, 4096) == 6 * 15 * 512 * 1024
    # A 1,024-token window (Gemma 3 12B; its window cache is 1,536 cells a sequence).
    assert [checkpoints_per_sequence(1024, n) for n in (4096, 8192, 9728, 131072)] == [2, 6, 8, 8]
    assert window_checkpoint_bytes(gemma, 256) == 2 * 15 * 256 * 1024  # a context under the window
    # Never more than the full-size window cache would have taken, from 2 checkpoints' room up.
    for per_sequence in (3072, 4096, 6144, 8192, 32768):
        full = kv_cache_bytes(dataclasses.replace(gemma, swa_layers=0), 2 * per_sequence, sequences=2)
        window = kv_cache_bytes(gemma, 2 * per_sequence, sequences=2)
        assert window + window_checkpoint_bytes(gemma, 2 * per_sequence, sequences=2) <= full
    fit = estimate_fit(gemma, machine(4), context=4 * 32768, sequences=4)
    assert fit.checkpoint_bytes == 240 * MIB
    assert fit.ram_needed_bytes == fit.total_bytes == fit.weights_bytes + fit.kv_bytes + fit.compute_bytes + 240 * MIB


def test_with_weights_scales_to_another_quantization() -> None:
    q8 = LLAMA3_8B_Q4_K_M.with_weights(8_540_770_464)
    assert q8.weights_bytes == 8_540_770_464 and q8.n_layers == 32
    assert estimate_fit(q8, machine(32, 8), context=8192).verdict == PARTIAL


def test_parse_nvidia_smi() -> None:
    out = "NVIDIA H200, 143771, 140000\nNVIDIA GeForce RTX 4090, 24564, 1200\ngarbage\n"
    assert parse_nvidia_smi(out) == [
        GpuMemory("NVIDIA H200", 143771 * MIB, 140000 * MIB),
        GpuMemory("NVIDIA GeForce RTX 4090", 24564 * MIB, 1200 * MIB),
    ]


@pytest.mark.skipif(sys.platform == "darwin", reason="Apple Silicon reports unified memory instead")
def test_detect_machine_without_any_gpu_tooling(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as when nvidia-ml-py is absent
    monkeypatch.setenv("PATH", str(tmp_path))
    found = fit.detect_machine(check_backend=False)
    assert found.gpus == () and found.ram_available_bytes > 0 and not found.unified


@pytest.mark.skipif(sys.platform != "linux", reason="uses a shell script as a stand-in for nvidia-smi")
def test_detect_machine_reads_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771, 140000'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    found = fit.detect_machine(check_backend=False)
    assert found.gpus == (GpuMemory("NVIDIA H200", 143771 * MIB, 140000 * MIB),)


def header(architecture: str, **values: object) -> GGUFInfo:
    metadata = {"general.architecture": architecture, f"{architecture}.block_count": 48,
                **{f"{architecture}.{key.replace('__', '.')}": value for key, value in values.items()}}
    return GGUFInfo(path=Path("model.gguf"), version=3, file_size=0, metadata=metadata, tensors=[], data_offset=0)


def test_the_window_is_what_llama_cpp_loads_not_only_what_the_header_says() -> None:
    # The header's window where llama.cpp uses it (gemma-3: 1,024 for 12B, 5 of 6 layers).
    gemma = ModelShape.from_gguf(header("gemma3", attention__sliding_window=1024))
    assert (gemma.n_swa, gemma.swa_layers) == (1024, 40)
    # Phi-3's files carry a window llama.cpp ignores: every layer is counted in full.
    phi3 = ModelShape.from_gguf(header("phi3", attention__sliding_window=2047))
    assert (phi3.n_swa, phi3.swa_layers) == (0, 0)
    # Llama 4's carry none, and it attends in chunks of 8,192 in 3 of every 4 layers; a 0 in
    # the key turns the chunks off.
    llama4 = ModelShape.from_gguf(header("llama4"))
    assert (llama4.n_swa, llama4.swa_layers) == (fit.LLAMA4_CHUNK, 36)
    assert fit.sliding_window_size(header("llama4", attention__sliding_window=0)) == 0
    assert "llama4" in fit.CHUNKED_WINDOW_ARCHITECTURES and "gemma3" not in fit.CHUNKED_WINDOW_ARCHITECTURES

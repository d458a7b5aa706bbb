#!/usr/bin/env python3
"""The one recipe for the llama.cpp inside Inglenook (run, test, CI and the packaged app).

It builds llama-cpp-python from its pinned sdist with ggml's runtime CPU dispatch: the CPU
code is compiled once per instruction-set level into ``libggml-cpu-<variant>.so`` modules
and, at start-up, the engine loads the best one this CPU can run (``engine/runtime/backends.py``).
So one build runs on every x86-64 CPU from AVX2 up and on arm64, whatever machine built it.

Why not llama-cpp-python's default build: it uses GGML_NATIVE (``-march=native``), which
ties the library to the CPU that compiled it and, on a Xeon with AMX, switches on ggml's AMX
kernels, which die with SIGILL in worker threads (the tile permission is per thread and only
the main thread asks for it; llama.cpp PR #26954). The AMX variant is therefore left out.

pip keys a wheel built from an sdist on the sdist alone, not on CMAKE_ARGS, so a machine
that once built it natively would silently reuse that wheel. This recipe never goes through
pip's wheel cache: it builds into its own cache folder whose name is a hash of everything
that shapes the binary (version, flags, variant list, compiler, platform).

    python scripts/llama_build.py install [--cuda] [--python VENV_PYTHON]
    python scripts/llama_build.py wheel [--cuda]          # print the wheel's path
    python scripts/llama_build.py llama-bench [--cuda]    # print llama-bench's path
    python scripts/llama_build.py llama-server [--cuda]   # print llama-server's path
    python scripts/llama_build.py llama-batched-bench     # print llama-batched-bench's path
    python scripts/llama_build.py llama-lookup            # print llama-lookup's path (prompt lookup)
    python scripts/llama_build.py rpc [--cuda] [--python VENV_PYTHON]  # RPC: rpc-server + ggml-rpc module
    python scripts/llama_build.py info                    # the recipe as JSON
    python scripts/llama_build.py llama-bench --upstream  # without SOURCE_PATCHES, for A/B benchmarks

Environment: INGLENOOK_BUILD_CACHE moves the cache folder; CUDA_ARCHITECTURES overrides
the CUDA targets (default 80;86;89;90).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# The llama.cpp commit vendored in that sdist (vendor/llama.cpp's own git history).
LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
# Bumped whenever the recipe changes in a way the flags below do not show.
RECIPE_REVISION = 2

# x86-64 CPU variants, in ggml's own feature names. ggml scores each module against the
# running CPU and the engine loads the best-scoring one. AVX2 (Haswell, 2013) is the floor;
# below it the engine says which feature is missing instead of crashing. No AMX variant.
X86_VARIANTS: dict[str, list[str]] = {
    "haswell": ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2"],
    "alderlake": ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX_VNNI"],
    "skylakex": ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512"],
    "icelake": ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI"],
    "zen4": ["SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI",
             "AVX512_BF16"],
}

COMMON_CMAKE_ARGS = [
    "-DGGML_NATIVE=OFF",
    "-DGGML_BACKEND_DL=ON",
    "-DGGML_CPU_ALL_VARIANTS=ON",
    # Put the backend modules beside libllama in the wheel, where the engine looks for them.
    "-DCMAKE_INSTALL_BINDIR=llama_cpp/lib",
    # libmtmd, llama.cpp's multimodal library (images through a projector GGUF), which the
    # pinned llama-cpp-python binds in llama_cpp.mtmd_cpp. It links the same libggml, so the
    # runtime CPU dispatch above (and CUDA when asked) serves the image encoder too.
    "-DLLAVA_BUILD=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DCMAKE_BUILD_TYPE=Release",
]
CUDA_ARCHITECTURES = "80;86;89;90"


def cuda_cmake_args() -> list[str]:
    """GGML_CUDA for the listed GPU generations (sm_80 A100, 86 RTX 30, 89 RTX 40, 90 H100/H200).

    libggml-cuda.so links the CUDA runtime and cuBLAS dynamically: on a machine without a
    driver or those libraries it fails to load, and the engine runs on the CPU instead.
    """
    archs = os.environ.get("CUDA_ARCHITECTURES", CUDA_ARCHITECTURES)
    # NO_VMM: no direct link to the driver library (libcuda.so), which a build machine
    # without a GPU lacks; the runtime finds the driver itself where there is one.
    return ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={archs}", "-DGGML_CUDA_NO_VMM=ON"]


def cuda_toolkit_root() -> Path:
    nvcc = Path(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc").resolve()
    return nvcc.parent.parent


def cublas_args(folder: Path) -> list[str]:
    """Point CMake at cuBLAS. A toolkit without it (a compiler-only install, as here) gets
    NVIDIA's own ``nvidia-cublas`` wheel from PyPI, the same package users install at run time."""
    root = cuda_toolkit_root()
    for lib_dir in (root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib"):
        if (lib_dir / "libcublas.so").exists():
            return []
    major = nvcc_version().split("cuda_")[-1].split(".")[0]
    target = folder / "cuda-libs"
    if not (target / "nvidia").exists():
        log(f"the CUDA toolkit has no cuBLAS; fetching nvidia-cublas {major}.x from PyPI")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                        f"nvidia-cublas>={major},<{int(major) + 1}"], check=True)
    libs = next(target.glob("nvidia/*/lib"), target / "nvidia" / "cublas" / "lib")
    include = libs.parent / "include"
    return [
        f"-DCUDA_cublas_LIBRARY={next(libs.glob('libcublas.so*'))}",
        f"-DCUDA_cublasLt_LIBRARY={next(libs.glob('libcublasLt.so*'))}",
        f"-DCMAKE_CUDA_FLAGS=-I{include}",
        f"-DCMAKE_CXX_FLAGS=-I{include}",
    ]


def cache_root() -> Path:
    env = os.environ.get("INGLENOOK_BUILD_CACHE")
    if env:
        return Path(env)
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "inglenook" / "build-cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "inglenook" / "build"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "inglenook" / "build"


def compiler_version() -> str:
    for compiler in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if compiler and shutil.which(compiler):
            out = subprocess.run([compiler, "--version"], capture_output=True, text=True)
            return out.stdout.splitlines()[0] if out.stdout else compiler
    return "unknown"


def nvcc_version() -> str:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        raise SystemExit("CUDA build asked for, but nvcc was not found (install the CUDA toolkit)")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def flavour_of(cuda: bool) -> str:
    return "cuda" if cuda else "cpu"


def recipe(cuda: bool) -> dict[str, object]:
    """Everything that shapes the binary; its hash names the cache folder."""
    args = list(COMMON_CMAKE_ARGS) + (cuda_cmake_args() if cuda else [])
    return {
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "llama_cpp_commit": LLAMA_CPP_COMMIT,
        "recipe_revision": RECIPE_REVISION,
        "flavour": flavour_of(cuda),
        "cmake_args": args,
        "x86_variants": X86_VARIANTS,
        # Each patch by name with a digest of its edits, so changing one rebuilds.
        "patches": {name: hashlib.sha256(json.dumps(edits).encode()).hexdigest()[:12]
                    for name, edits in applied_patches().items()},
        "machine": platform.machine(),
        "system": sys.platform,
        "compiler": compiler_version(),
        "nvcc": nvcc_version() if cuda else None,
    }


def recipe_key(spec: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def work_dir(cuda: bool) -> tuple[Path, dict[str, object], str]:
    spec = recipe(cuda)
    key = recipe_key(spec)
    return cache_root() / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-{spec['flavour']}-{key}", spec, key


def log(message: str) -> None:
    print(f"[llama-build] {message}", file=sys.stderr, flush=True)


def fetch_sdist(into: Path) -> Path:
    """The pinned sdist, checked against its sha256 (downloaded once into the cache)."""
    target = cache_root() / "sdists" / SDIST_NAME
    if not target.exists() or sha256_of(target) != SDIST_SHA256:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            log(f"downloading {SDIST_NAME} from PyPI")
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                 f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", tmp],
                check=True,
            )
            got = Path(tmp) / SDIST_NAME
            if sha256_of(got) != SDIST_SHA256:
                raise SystemExit(f"{SDIST_NAME}: sha256 mismatch (expected {SDIST_SHA256})")
            os.replace(got, target)
    source = into / "src"
    if source.exists():
        shutil.rmtree(source)
    with tarfile.open(target) as archive:
        archive.extractall(into / "unpack", filter="data")
    os.replace(into / "unpack" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}", source)
    shutil.rmtree(into / "unpack")
    return source


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_X86_BLOCK = re.compile(
    r'(if \(GGML_CPU_ALL_VARIANTS\).*?if \(GGML_SYSTEM_ARCH STREQUAL "x86"\)\n)(.*?)(\n\s*elseif ?\(GGML_SYSTEM_ARCH STREQUAL "ARM"\))',
    re.S,
)


def patch_variants(source: Path) -> None:
    """Replace ggml's x86 variant list with ours (drops the AMX variant and the pre-AVX2 ones)."""
    cmake = source / "vendor" / "llama.cpp" / "ggml" / "src" / "CMakeLists.txt"
    text = cmake.read_text()
    lines = "\n".join(
        f"        ggml_add_cpu_backend_variant({name:<12} {' '.join(features)})"
        for name, features in X86_VARIANTS.items()
    )
    patched, count = _X86_BLOCK.subn(lambda m: m.group(1) + lines + m.group(3), text)
    if count != 1:
        raise SystemExit(f"{cmake}: the x86 variant list was not where the recipe expects it")
    cmake.write_text(patched)


# Changes to llama.cpp's own source, by name (the engine reads the names from the build's
# inglenook_build.json). Each is a list of (file under vendor/llama.cpp, text, replacement);
# the build stops if a text is not there exactly once, so a new llama.cpp cannot skip one.
#
# flash-attention-tiles-from-32-rows: ggml's CPU flash-attention kernel takes its tiled path
# only for 64 or more query rows of a sequence and a row-at-a-time path below that, and the
# two give a row different last bits. So a prompt resumed from a saved state had to read
# at least its last 64 tokens again for its logits to be a full prefill's
# (model_loading.canonical_rows). In the tiled path each row's result depends on nothing
# but that row (its tile's other rows are masked out or zero, every product is summed in
# the same order), so the patch sends every prompt chunk of 32 rows or more through it and
# sizes the tile's matrix products to the rows it holds instead of always 64. Fewer rows
# keep upstream's path: a decode step, a speculative draft being checked (at most 17 rows),
# where the tiled path's cost of unpacking the cache per tile made 4-row batches of
# gemma-3-270m at depth 2,048 half as fast (benchmarks/flash_attention_patch.py).
#
# flash-attention-k-rows-as-stored: for every 64-cell tile of the cache, the tiled path
# widened K from f16 to f32 into a transposed block, one scalar table lookup and one store
# 256 bytes from the last per value; with a 64 KiB block that overflows L1, that packing
# was half the kernel's time (perf: gemma-3-270m reading 512 tokens at depth 8,192). The
# patch widens each cache row as it is stored (contiguous, vectorised) and multiplies it by
# the query tile transposed once per tile, then turns the 64 x 64 scores the right way in
# L1; it also takes a score row's maximum in sixteen lanes instead of one dependent chain.
# Each score is the same fused multiply-add chain over the same dimensions in the same order
# and a maximum does not depend on order, so every result is bit for bit what it was: the
# logits of 1,500 tokens read in chunks of 37, 48 and 512 matched the build without this
# patch exactly, on SmolLM2 and gemma-3-270m, zen4 and haswell variants (so the KV a state
# saved by either build holds is the same too).
SOURCE_PATCHES: dict[str, list[tuple[str, str, str]]] = {
    "flash-attention-tiles-from-32-rows": [
        ("ggml/src/ggml-cpu/ops.cpp",
         "                                neq1 >= Q_TILE_SZ);",
         "                                neq1 >= 32);"),
        ("ggml/src/ggml-cpu/ops.cpp",
         "            simd_gemm(KQ, (const float *)Q_q, K_f32, Q_TILE_SZ, DK, KV_TILE_SZ);\n"
         "            ggml_vec_scale_f32(Q_TILE_SZ * KV_TILE_SZ, KQ, scale);",
         "            simd_gemm(KQ, (const float *)Q_q, K_f32, tile_rows, DK, KV_TILE_SZ);\n"
         "            ggml_vec_scale_f32(tile_rows * KV_TILE_SZ, KQ, scale);"),
        ("ggml/src/ggml-cpu/ops.cpp",
         "                ggml_vec_tanh_f32(Q_TILE_SZ * KV_TILE_SZ, KQ, KQ);\n"
         "                ggml_vec_scale_f32(Q_TILE_SZ * KV_TILE_SZ, KQ, logit_softcap);",
         "                ggml_vec_tanh_f32(tile_rows * KV_TILE_SZ, KQ, KQ);\n"
         "                ggml_vec_scale_f32(tile_rows * KV_TILE_SZ, KQ, logit_softcap);"),
        ("ggml/src/ggml-cpu/ops.cpp",
         "            if (kv_tile < KV_TILE_SZ) {\n"
         "                for (int tq = 0; tq < Q_TILE_SZ; tq++) {",
         "            if (kv_tile < KV_TILE_SZ) {\n"
         "                for (int tq = 0; tq < tile_rows; tq++) {"),
        ("ggml/src/ggml-cpu/ops.cpp",
         "            for (int tq = 0; tq < Q_TILE_SZ; tq++) {\n"
         "                float * kq_row = KQ + tq * KV_TILE_SZ;",
         "            for (int tq = 0; tq < tile_rows; tq++) {\n"
         "                float * kq_row = KQ + tq * KV_TILE_SZ;"),
        ("ggml/src/ggml-cpu/ops.cpp",
         "            for (int tq = 0; tq < Q_TILE_SZ; tq++) {\n"
         "                if (skip[tq]) {",
         "            for (int tq = 0; tq < tile_rows; tq++) {\n"
         "                if (skip[tq]) {"),
        ("ggml/src/ggml-cpu/ops.cpp",
         "            simd_gemm(VKQ32, KQ, V32, Q_TILE_SZ, KV_TILE_SZ, DV);",
         "            simd_gemm(VKQ32, KQ, V32, tile_rows, KV_TILE_SZ, DV);"),
    ],
    "flash-attention-k-rows-as-stored": [
        # The tile's scratch: one more Q x KV block, for the scores as the products leave them.
        ("ggml/src/ggml-cpu/ggml-cpu.c",
         "sizeof(float)*(GGML_FA_TILE_Q*DK + 2*GGML_FA_TILE_Q*GGML_FA_TILE_KV + GGML_FA_TILE_Q*DV",
         "sizeof(float)*(GGML_FA_TILE_Q*DK + 3*GGML_FA_TILE_Q*GGML_FA_TILE_KV + GGML_FA_TILE_Q*DV"),
        ("ggml/src/ggml-cpu/ops.cpp",
         "        float * base  = (float *) params->wdata + ith*(Q_TILE_SZ*DK + 2*Q_TILE_SZ*KV_TILE_SZ + ",
         "        float * base  = (float *) params->wdata + ith*(Q_TILE_SZ*DK + 3*Q_TILE_SZ*KV_TILE_SZ + "),
        ("ggml/src/ggml-cpu/ops.cpp",
         "        float * K_f32  = V32 + KV_TILE_SZ * DV;\n",
         "        float * K_f32  = V32 + KV_TILE_SZ * DV;\n"
         "        float * KQT    = K_f32 + KV_TILE_SZ * DK;  // scores, one row per cache row\n"),
        # The query tile is stored transposed (one row per dimension), once per tile.
        ("ggml/src/ggml-cpu/ops.cpp",
         "                memcpy(Q_f32 + tq * DK, pq, DK * sizeof(float));\n"
         "            }\n"
         "            for (int tq = tile_rows; tq < Q_TILE_SZ; tq++) {\n"
         "                memset(Q_f32 + tq * DK, 0, DK * sizeof(float));\n"
         "            }\n",
         "                for (int64_t dk = 0; dk < DK; dk++) {\n"
         "                    Q_f32[dk * tile_rows + tq] = pq[dk];\n"
         "                }\n"
         "            }\n"),
        # The cache rows are widened as stored (contiguous, vectorised) and multiply the
        # transposed query tile; the scores are then turned the right way in a block that stays
        # in L1. Every score is the same chain of fused multiply-adds over the same dimensions
        # in the same order as before, so each result is bit for bit what it was.
        ("ggml/src/ggml-cpu/ops.cpp",
         "            for (int tk = 0; tk < kv_tile; tk++) {\n"
         "                const char * k_data = (const char *)k->data + (ic + tk)*nbk1 + ik2*nbk2 + ik3*nbk3;\n"
         "                if (kv_type == GGML_TYPE_F16) {\n"
         "                    const ggml_fp16_t * k_f16 = (const ggml_fp16_t *)k_data;\n"
         "                    for (int64_t dk = 0; dk < DK; dk++) {\n"
         "                        K_f32[dk * KV_TILE_SZ + tk] = GGML_CPU_FP16_TO_FP32(k_f16[dk]);\n"
         "                    }\n"
         "                } else {\n"
         "                    const float * k_f32_src = (const float *)k_data;\n"
         "                    for (int64_t dk = 0; dk < DK; dk++) {\n"
         "                        K_f32[dk * KV_TILE_SZ + tk] = k_f32_src[dk];\n"
         "                    }\n"
         "                }\n"
         "            }\n"
         "            memset(KQ, 0, Q_TILE_SZ * KV_TILE_SZ * sizeof(float));\n"
         "            simd_gemm(KQ, (const float *)Q_q, K_f32, tile_rows, DK, KV_TILE_SZ);\n",
         "            for (int tk = 0; tk < kv_tile; tk++) {\n"
         "                const char * k_data = (const char *)k->data + (ic + tk)*nbk1 + ik2*nbk2 + ik3*nbk3;\n"
         "                if (kv_type == GGML_TYPE_F16) {\n"
         "                    ggml_cpu_fp16_to_fp32((const ggml_fp16_t *)k_data, K_f32 + tk * DK, DK);\n"
         "                } else {\n"
         "                    memcpy(K_f32 + tk * DK, k_data, DK * sizeof(float));\n"
         "                }\n"
         "            }\n"
         "            memset(KQT, 0, kv_tile * tile_rows * sizeof(float));\n"
         "            simd_gemm(KQT, K_f32, (const float *)Q_q, kv_tile, DK, tile_rows);\n"
         "            for (int tq = 0; tq < tile_rows; tq++) {\n"
         "                float * kq_row = KQ + tq * KV_TILE_SZ;\n"
         "                for (int tk = 0; tk < kv_tile; tk++) {\n"
         "                    kq_row[tk] = KQT[tk * tile_rows + tq];\n"
         "                }\n"
         "                for (int tk = kv_tile; tk < KV_TILE_SZ; tk++) {\n"
         "                    kq_row[tk] = 0.0f;\n"
         "                }\n"
         "            }\n"),
        # A row's largest score, in sixteen lanes instead of one chain of dependent maxima.
        # The maximum of the same numbers is the same whatever the order.
        ("ggml/src/ggml-cpu/ops.cpp",
         "                float tile_max;\n"
         "                ggml_vec_max_f32(KV_TILE_SZ, &tile_max, kq_row);\n",
         "                float lane_max[16];\n"
         "                for (int j = 0; j < 16; j++) {\n"
         "                    lane_max[j] = -INFINITY;\n"
         "                }\n"
         "                for (int tk = 0; tk < KV_TILE_SZ; tk += 16) {\n"
         "                    for (int j = 0; j < 16; j++) {\n"
         "                        lane_max[j] = kq_row[tk + j] > lane_max[j] ? kq_row[tk + j] : lane_max[j];\n"
         "                    }\n"
         "                }\n"
         "                float tile_max = -INFINITY;\n"
         "                for (int j = 0; j < 16; j++) {\n"
         "                    tile_max = MAX(tile_max, lane_max[j]);\n"
         "                }\n"),
    ],
}


# flash-attention-decode-grouped-heads: a decode step (one query row) at depth 512 or more
# takes the split-KV path, where each thread walks its share of the cache once per query
# head: per cell a dot product, a scalar exponential, a possible rescale and an f16 multiply-
# add whose running sum goes through f16 every cell. With grouped-query attention the heads
# that share a KV head read the same rows again, and the cache keeps all KV heads of a cell
# side by side, so each walk drags the other heads' rows through the caches too. The patch
# (scripts/llama_patches/flash_attention_decode_grouped.cpp) takes the cells in blocks of 64,
# asks for the next block's rows ahead (into L2), and serves every head from each block: the
# query heads of one KV head together, each K and V row widened to f32 once for the group,
# the block's scores first, then one vectorised softmax step, and V summed in f32. On the
# engine's own CPU variants (AVX-512 and AVX2) the widening is done in registers; elsewhere
# through ggml's row conversion. The attention node alone, against the recipe without this
# patch (benchmarks/decode_attention.py, 2 threads, 1,024-16,384 cells): SmolLM2 0.63-0.78x
# the time, gemma-3-270m 0.64-0.67x, a Llama-3-8B-like layer 0.28-0.61x on zen4; 0.22-0.85x
# on haswell. Decode results
# change in their last bits and are nearer exact attention (f32 sums: ~1e-6 of the output's
# scale, upstream's f16 running sum 5e-3 to 1e-2; tests/integration/test_flash_attention_kernel.py).
# Prompt reading never takes this path, so the prefix cache's rules (canonical_rows) stay.
def _inserted_source(name: str) -> str:
    """C++ a patch inserts, kept as a file of its own in scripts/llama_patches/."""
    return (Path(__file__).resolve().parent / "llama_patches" / name).read_text()


_DECODE_KERNEL = _inserted_source("flash_attention_decode_grouped.cpp")
SOURCE_PATCHES["flash-attention-decode-grouped-heads"] = [
    ("ggml/src/ggml-cpu/ops.cpp",
     "#include <algorithm>\n",
     "#include <algorithm>\n#include <vector>\n"),
    ("ggml/src/ggml-cpu/ops.cpp",
     "static void ggml_compute_forward_flash_attn_ext_f16(\n"
     "        const ggml_compute_params * params,\n"
     "        ggml_tensor * dst) {\n",
     _DECODE_KERNEL +
     "static void ggml_compute_forward_flash_attn_ext_f16(\n"
     "        const ggml_compute_params * params,\n"
     "        ggml_tensor * dst) {\n"),
    ("ggml/src/ggml-cpu/ops.cpp",
     "        if (ic_start < nek1) {\n"
     "            for (int64_t q_head = 0; q_head < neq2; q_head++) {\n",
     "        if (nek2 == nev2 && neq2 % nek2 == 0) {\n"
     "            ggml_compute_forward_flash_attn_ext_f16_decode_grouped(params, dst, chunk_partials, partial_stride);\n"
     "        } else if (ic_start < nek1) {\n"
     "            for (int64_t q_head = 0; q_head < neq2; q_head++) {\n"),
    # Its blocks go round the threads, so every thread's partial counts (no range to skip).
    ("ggml/src/ggml-cpu/ops.cpp",
     "        ggml_flash_attn_ext_reduce_partials(params, dst, nth, chunk_size);\n",
     "        ggml_flash_attn_ext_reduce_partials(params, dst, nth,\n"
     "                                            nek2 == nev2 && neq2 % nek2 == 0 ? 0 : chunk_size);\n"),
]


# kv-cells-by-position: llama.cpp puts a micro-batch's tokens in the first free cells from
# the cache's head, so where a position sits depends on the sequence's history: how its
# prompt was cut into chunks, which drafts were cut, whether it was read or restored. A
# window-sized cache (gemma-3's 1,024 cells for a 512-token window) goes round its cells, and
# a window checkpoint restored into it landed in other cells than a full prefill of the same
# tokens; flash attention sums cells in tiles and blocks by index, so the restored
# conversation's log-probabilities moved (gemma-3-270m: a checkpoint at 1,120 restored after
# the cells had gone round, the first token's by 0.04; one at 832, later tokens' by up to
# 0.16). The patch
# (scripts/llama_patches/kv_cells_by_position.cpp) puts each of a sequence's tokens in cell
# position modulo size, when those cells are free (empty, or left behind by the window) and
# no two tokens share one; anything else (several sequences in one stream, positions that
# repeat) searches as before. A cache's layout is then a function of the positions it
# holds (a checkpoint's cells come back in the order they were saved, which wraps round). The
# split-KV decode path (the third patch) takes its 64-cell blocks round the threads by
# index instead of cutting the cache into one range per thread, so the cells a window
# restore leaves empty at the end (a full prefill leaves stale ones there, masked) change
# no sum.
_CELLS_BY_POSITION = _inserted_source("kv_cells_by_position.cpp")
SOURCE_PATCHES["kv-cells-by-position"] = [
    ("src/llama-kv-cache.cpp",
     "llama_kv_cache::slot_info llama_kv_cache::find_slot(const llama_ubatch & ubatch, bool cont) const {\n",
     _CELLS_BY_POSITION +
     "llama_kv_cache::slot_info llama_kv_cache::find_slot(const llama_ubatch & ubatch, bool cont) const {\n"),
    ("src/llama-kv-cache.cpp",
     '            LLAMA_LOG_ERROR("%s: n_tokens = %d > size = %u\\n", __func__, n_tokens, cells.size());\n'
     "            return { };\n"
     "        }\n",
     '            LLAMA_LOG_ERROR("%s: n_tokens = %d > size = %u\\n", __func__, n_tokens, cells.size());\n'
     "            return { };\n"
     "        }\n"
     "\n"
     "        if (!cont && inglenook_cells_by_position(cells, ubatch, s*n_tokens, n_tokens, n_swa, swa_type, res.idxs[s])) {\n"
     "            continue;\n"
     "        }\n"),
]


# state-seq-window-at: a window checkpoint (the sliding-window layers' part of a sequence's
# state, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) is copied as the cache is, so upstream can only
# take one where a chunk ends, and the engine read the end of each prompt of a window model as
# two chunks to have a checkpoint where its last turn starts: 448 + 64 rows for a 512-token
# prompt, 660 against 698 tokens a second on gemma-3-270m (zen4, 2 threads). The patch
# (scripts/llama_patches/state_seq_window_at.cpp) adds inglenook_state_seq_end_at(p): until
# it is given -1, a sequence-state copy on that thread holds the cells a copy taken when the
# sequence ended at p holds, positions before p whose window is measured from p - 1. The
# cells are still there after a chunk that began before p (a chunk only reuses cells its
# first position's window has left), so the engine reads the last chunk whole and takes the
# checkpoint after it; the copy is byte for byte the one taken at p
# (tests/integration/test_swa_checkpoints.py).
_STATE_SEQ_WINDOW_AT = _inserted_source("state_seq_window_at.cpp")
SOURCE_PATCHES["state-seq-window-at"] = [
    ("src/llama-kv-cache.cpp",
     "void llama_kv_cache::state_write(llama_io_write_i & io, llama_seq_id seq_id, llama_state_seq_flags flags) const {\n",
     _STATE_SEQ_WINDOW_AT +
     "void llama_kv_cache::state_write(llama_io_write_i & io, llama_seq_id seq_id, llama_state_seq_flags flags) const {\n"),
    ("src/llama-kv-cache.cpp",
     "            add_cell = add_cell && (seq_id == -1 || cells.seq_has(i, seq_id));\n",
     "            add_cell = add_cell && (seq_id == -1 || cells.seq_has(i, seq_id));\n"
     "            add_cell = add_cell && inglenook_state_cell_kept(cells, i, seq_id);\n"),
    ("src/llama-kv-cache.cpp",
     "llama_hparams::is_masked_swa(n_swa, swa_type, cells.pos_get(i), cells.seq_pos_max(seq_id));",
     "llama_hparams::is_masked_swa(n_swa, swa_type, cells.pos_get(i), inglenook_state_last_pos(cells, seq_id));"),
]


# ``--upstream``: build llama.cpp as its authors wrote it (no ``SOURCE_PATCHES``), in a cache
# folder of its own, for benchmarks that measure what a patch changes
# (benchmarks/flash_attention_patch.py). The engine then reads prompts as upstream needs.
UPSTREAM = {"value": False}


def applied_patches() -> dict[str, list[tuple[str, str, str]]]:
    return {} if UPSTREAM["value"] else SOURCE_PATCHES


def patch_source(source: Path) -> None:
    """Apply ``SOURCE_PATCHES`` to the unpacked sdist's llama.cpp."""
    root = source / "vendor" / "llama.cpp"
    for name, edits in applied_patches().items():
        for relative, old, new in edits:
            path = root / relative
            text = path.read_text()
            if text.count(old) != 1:
                raise SystemExit(f"{path}: patch {name!r} expects {old.splitlines()[0].strip()!r} exactly once "
                                 f"(found {text.count(old)})")
            path.write_text(text.replace(old, new))
        log(f"patched llama.cpp: {name}")


def stamp_version(source: Path, flavour: str, key: str, spec: dict[str, object]) -> None:
    """Mark the build: a local version label pip shows, and a JSON file the engine reads."""
    init = source / "llama_cpp" / "__init__.py"
    text = init.read_text()
    label = f'__version__ = "{LLAMA_CPP_PYTHON_VERSION}+inglenook.{flavour}"'
    text, count = re.subn(r'__version__ = "[^"]+"', label, text)
    if count != 1:
        raise SystemExit(f"{init}: no __version__ line")
    init.write_text(text)
    info = dict(spec, key=key)
    (source / "llama_cpp" / "inglenook_build.json").write_text(json.dumps(info, indent=2) + "\n")


def build_wheel(cuda: bool) -> Path:
    folder, spec, key = work_dir(cuda)
    wheels = folder / "wheel"
    existing = sorted(wheels.glob("llama_cpp_python-*.whl")) if wheels.exists() else []
    if existing:
        log(f"using the cached build {existing[-1]}")
        return existing[-1]
    folder.mkdir(parents=True, exist_ok=True)
    log(f"building llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} ({spec['flavour']}, llama.cpp "
        f"{LLAMA_CPP_COMMIT[:10]}) into {folder}; this takes a while the first time")
    source = fetch_sdist(folder)
    patch_variants(source)
    patch_source(source)
    stamp_version(source, str(spec["flavour"]), key, spec)
    env = dict(os.environ)
    extra = cublas_args(folder) if cuda else []
    env["CMAKE_ARGS"] = " ".join([*spec["cmake_args"], *extra])  # type: ignore[misc]
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    if cuda and "CUDACXX" not in env:
        env["CUDACXX"] = str(cuda_toolkit_root() / "bin" / "nvcc")
    staging = folder / "wheel.partial"
    shutil.rmtree(staging, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-w", str(staging),
         # Keep the CMake build tree: llama-bench is built later from the same objects.
         "--config-settings", f"build-dir={folder / 'cmake'}", str(source)],
        check=True, env=env,
    )
    os.replace(staging, wheels)
    (folder / "recipe.json").write_text(json.dumps(dict(spec, key=key), indent=2) + "\n")
    return sorted(wheels.glob("llama_cpp_python-*.whl"))[-1]


def install(cuda: bool, python: str) -> None:
    wheel = build_wheel(cuda)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)],
                   check=True)
    # llama-cpp-python's own dependencies (numpy, jinja2, …), without touching the wheel.
    subprocess.run([python, "-m", "pip", "install", "--quiet", "typing-extensions>=4.5", "numpy>=1.20",
                    "diskcache>=5.6.1", "jinja2>=2.11.3"], check=True)
    log(f"installed {wheel.name} into {python}")


# Tools that live under llama.cpp's examples/ rather than tools/.
# The wheel's tree configured once more for llama.cpp's own tools. Its tools folder adds
# tools/mtmd itself, which llama-cpp-python's LLAVA_BUILD adds too (from outside llama.cpp's
# directory scope); CMake refuses the same folder twice, so the tools' configuration turns
# LLAVA_BUILD off: libmtmd is already built and installed with the wheel.
TOOL_TREE_ARGS = ["-DLLAMA_BUILD_TOOLS=ON", "-DLLAVA_BUILD=OFF", "-Wno-dev"]
EXAMPLE_TOOLS = ("llama-lookup",)
TOOLS = ("llama-bench", "llama-server", "llama-batched-bench", *EXAMPLE_TOOLS)


def build_tool(cuda: bool, target: str) -> Path:
    """A llama.cpp tool (one of ``TOOLS``) from the same CMake tree, so it runs the very
    objects the engine runs."""
    folder, _spec, _key = work_dir(cuda)
    if not (folder / "cmake" / "CMakeCache.txt").exists():
        shutil.rmtree(folder / "wheel", ignore_errors=True)  # rebuild to get the tree back
        build_wheel(cuda)
    tree = folder / "cmake"
    binary = tree / "bin" / target
    if not binary.exists():
        subprocess.run(["cmake", "-S", str(folder / "src"), "-B", str(tree), *TOOL_TREE_ARGS,
                        f"-DLLAMA_BUILD_SERVER={'ON' if target == 'llama-server' else 'OFF'}",
                        f"-DLLAMA_BUILD_EXAMPLES={'ON' if target in EXAMPLE_TOOLS else 'OFF'}"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(tree), "--target", target, "-j", str(os.cpu_count() or 2)],
                       check=True, stdout=subprocess.DEVNULL)
    return binary


# llama.cpp's RPC backend (one model's layers over several machines): the ggml-rpc module and
# the rpc-server tool. Both come from the wheel's own CMake tree, configured once more with
# GGML_RPC=ON; the wheel's flags (and so the recipe's hash) stay as they are. With
# GGML_BACKEND_DL the option adds a module and a tool and recompiles nothing else.
RPC_TARGETS = {"ggml-rpc": "libggml-rpc.so", "ggml-rpc-server": "ggml-rpc-server"}
RPC_SERVER_NAME = "rpc-server"  # the installed name, as llama.cpp's docs call it


def build_rpc(cuda: bool) -> dict[str, Path]:
    """Build the RPC module and server in the wheel's tree; returns target -> file."""
    folder, _spec, _key = work_dir(cuda)
    if not (folder / "cmake" / "CMakeCache.txt").exists():
        shutil.rmtree(folder / "wheel", ignore_errors=True)  # rebuild to get the tree back
        build_wheel(cuda)
    tree = folder / "cmake"
    built = {target: tree / "bin" / name for target, name in RPC_TARGETS.items()}
    if not all(path.exists() for path in built.values()):
        subprocess.run(["cmake", "-S", str(folder / "src"), "-B", str(tree), "-DGGML_RPC=ON", *TOOL_TREE_ARGS],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(tree), "--target", *RPC_TARGETS, "-j", str(os.cpu_count() or 2)],
                       check=True, stdout=subprocess.DEVNULL)
    return built


def install_rpc(cuda: bool, python: str) -> Path:
    """Put the RPC module and rpc-server beside the other backend modules in llama_cpp/lib,
    where engine/runtime/backends.py loads modules from and engine/remote/rpc.py finds the server."""
    built = build_rpc(cuda)
    found = subprocess.run([python, "-c", "import importlib.util as u; "
                            "print(list(u.find_spec('llama_cpp').submodule_search_locations)[0])"],
                           check=True, capture_output=True, text=True)
    lib = Path(found.stdout.strip()) / "lib"
    shutil.copy2(built["ggml-rpc"], lib / RPC_TARGETS["ggml-rpc"])
    shutil.copy2(built["ggml-rpc-server"], lib / RPC_SERVER_NAME)
    log(f"installed {RPC_TARGETS['ggml-rpc']} and {RPC_SERVER_NAME} into {lib}")
    return lib


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["install", "wheel", *TOOLS, "rpc", "info"])
    parser.add_argument("--cuda", action="store_true", help="also build the CUDA backend module")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to install into")
    parser.add_argument("--upstream", action="store_true",
                        help="llama.cpp without this recipe's source patches (for A/B benchmarks)")
    args = parser.parse_args()
    UPSTREAM["value"] = args.upstream
    if args.action == "install":
        install(args.cuda, args.python)
    elif args.action == "wheel":
        print(build_wheel(args.cuda))
    elif args.action in TOOLS:
        print(build_tool(args.cuda, args.action))
    elif args.action == "rpc":
        print(install_rpc(args.cuda, args.python))
    else:
        folder, spec, key = work_dir(args.cuda)
        print(json.dumps(dict(spec, key=key, folder=str(folder)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

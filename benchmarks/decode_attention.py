"""The CPU flash-attention node of a decode step, two builds side by side in one process.

Builds one ``ggml_flash_attn_ext`` node per layer over a cache laid out as llama.cpp keeps
it (every KV head of a cell side by side), one query row, and times the graph with each of
two CPU variant libraries (``libggml-cpu-<variant>.so``), alternating, so machine noise hits
both alike. Use it to measure what the recipe's ``flash-attention-decode-grouped-heads``
patch changes: ``--before`` a library from a build without it (an older recipe's cache
folder, or ``llama_build.py --upstream``), ``--after`` this build's. Shapes: SmolLM2
(64 dimensions, 9 query heads on 3 KV heads, 30 layers), gemma-3-270m (256, 4 on 1, 18)
and a Llama-3-8B-like layer (128, 32 on 8, 4 layers). Prints JSON (milliseconds per graph,
medians, and after ÷ before).

    python benchmarks/decode_attention.py --before OLD/libggml-cpu-zen4.so \\
        --after NEW/libggml-cpu-zen4.so [--cells 1024,4096,16384] [--threads 2] [--rounds 25]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.test_flash_attention_kernel import Ggml, InitParams  # the tests' ggml calls

SHAPES = {"smollm2": (64, 9, 3, 30), "gemma-3-270m": (256, 4, 1, 18), "llama-3-8b-like": (128, 32, 8, 4)}


def build_graph(ggml: Ggml, ctx: int, dims: int, heads: int, kv_heads: int, cells: int, layers: int) -> int:
    """One attention node per layer, each over its own cache, in one graph."""
    base = ggml.base
    rng = np.random.default_rng(0)
    graph = base.ggml_new_graph(ctx)
    for _ in range(layers):
        q = ggml.tensor(ctx, rng.normal(size=(heads, 1, dims)).astype(np.float32))
        # [cells, kv_heads, dims] as stored, viewed as [kv_heads, cells, dims] like llama.cpp's
        k = base.ggml_permute(ctx, ggml.tensor(ctx, rng.normal(size=(cells, kv_heads, dims)).astype(np.float16)),
                              0, 2, 1, 3)
        v = base.ggml_permute(ctx, ggml.tensor(ctx, rng.normal(size=(cells, kv_heads, dims)).astype(np.float16)),
                              0, 2, 1, 3)
        mask = ggml.tensor(ctx, np.zeros((1, cells), dtype=np.float16))
        base.ggml_build_forward_expand(graph, base.ggml_flash_attn_ext(ctx, q, k, v, mask, 1 / math.sqrt(dims),
                                                                       0.0, 0.0))
    return graph


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--cells", default="1024,4096,16384")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()

    ggml = Ggml()
    ggml.base.ggml_permute.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 4
    ggml.base.ggml_permute.restype = ctypes.c_void_p
    libraries = {"before": ctypes.CDLL(str(args.before)), "after": ctypes.CDLL(str(args.after))}
    for library in libraries.values():
        library.ggml_graph_compute_with_ctx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        library.ggml_cpu_init()

    results = []
    for name, (dims, heads, kv_heads, layers) in SHAPES.items():
        for cells in (int(c) for c in args.cells.split(",")):
            ctx = ggml.base.ggml_init(InitParams(mem_size=(cells * kv_heads * dims * 4 * layers) + (64 << 20),
                                                 mem_buffer=None, no_alloc=False))
            try:
                graph = build_graph(ggml, ctx, dims, heads, kv_heads, cells, layers)
                times: dict[str, list[float]] = {label: [] for label in libraries}
                for _ in range(args.rounds + 1):  # the first round warms up, not counted
                    for label, library in libraries.items():
                        start = time.perf_counter()
                        library.ggml_graph_compute_with_ctx(ctx, graph, args.threads)
                        times[label].append(time.perf_counter() - start)
                median = {label: 1000 * statistics.median(values[1:]) for label, values in times.items()}
                results.append({"shape": name, "cells": cells, "layers": layers,
                                "ms_before": round(median["before"], 2), "ms_after": round(median["after"], 2),
                                "after_over_before": round(median["after"] / median["before"], 3)})
            finally:
                ggml.base.ggml_free(ctx)
    print(json.dumps({"threads": args.threads, "rounds": args.rounds, "before": str(args.before),
                      "after": str(args.after), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

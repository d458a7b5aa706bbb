"""The CPU flash-attention kernel a decode step runs, held against exact attention.

A decode step (one query row) over 512 or more cache cells takes llama.cpp's split-KV path,
whose inner loop the recipe's ``flash-attention-decode-grouped-heads`` patch replaces: the
query heads that share a KV head walk the cache together, the softmax runs per block of 64
cells and V is summed in f32. These tests build one ``GGML_OP_FLASH_ATTN_EXT`` node with
ggml's own C API (the library the engine loaded, the CPU variant it chose), run it on 1-3
threads and compare every output with attention computed in float64 by numpy from the same
f16 cache and the query rounded to f16 as the kernel rounds it. They cover grouped-query
shapes of SmolLM2 (9 heads on 3) and gemma-3 (4 on 1, 256 dimensions), masked cells (single
ones, a whole 64-cell block, the padding at the end), ALiBi slopes, a logit soft-cap and
attention sinks. Upstream's loop kept the running sum in f16 and was off by 5e-3 to 1e-2 of
the output's scale here; the patched loop by under 1e-6.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from inglenook.engine.runtime.model_loading import FA_DECODE_GROUPED_HEADS
from inglenook.engine.runtime.native import backend_report, build_patches

pytestmark = pytest.mark.integration

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
c_p = ctypes.c_void_p


class InitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", c_p), ("no_alloc", ctypes.c_bool)]


@dataclass(frozen=True)
class Shape:
    dims: int
    heads: int
    kv_heads: int
    cells: int
    max_bias: float = 0.0
    softcap: float = 0.0
    sinks: bool = False


class Ggml:
    """The handful of ggml calls that build and run one attention node."""

    def __init__(self) -> None:
        report = backend_report()
        base = ctypes.CDLL(str(next(report.library_dir.glob("libggml-base.so.*"))))
        chosen = next((v.path for v in report.cpu_variants if v.name == report.cpu_variant), None)
        if chosen is None:
            pytest.skip("a build without runtime CPU dispatch: no variant library to call")
        cpu = ctypes.CDLL(str(chosen))
        self._sig(base.ggml_init, [InitParams], c_p)
        self._sig(base.ggml_free, [c_p], None)
        self._sig(base.ggml_new_tensor_4d, [c_p, ctypes.c_int] + [ctypes.c_int64] * 4, c_p)
        self._sig(base.ggml_get_data, [c_p], c_p)
        self._sig(base.ggml_flash_attn_ext, [c_p] * 5 + [ctypes.c_float] * 3, c_p)
        self._sig(base.ggml_flash_attn_ext_add_sinks, [c_p, c_p], None)
        self._sig(base.ggml_new_graph, [c_p], c_p)
        self._sig(base.ggml_build_forward_expand, [c_p, c_p], None)
        self._sig(cpu.ggml_graph_compute_with_ctx, [c_p, c_p, ctypes.c_int], ctypes.c_int)
        self.base, self.cpu = base, cpu

    @staticmethod
    def _sig(fn: Any, argtypes: list[Any], restype: Any) -> None:
        fn.argtypes, fn.restype = argtypes, restype

    def tensor(self, ctx: int, array: np.ndarray) -> int:
        """A tensor holding ``array`` (numpy's axis order reversed, as ggml counts them)."""
        kind = GGML_TYPE_F16 if array.dtype == np.float16 else GGML_TYPE_F32
        ne = list(reversed(array.shape)) + [1] * (4 - array.ndim)
        tensor = self.base.ggml_new_tensor_4d(ctx, kind, *ne)
        data = np.ascontiguousarray(array)
        ctypes.memmove(self.base.ggml_get_data(tensor), data.ctypes.data, data.nbytes)
        return tensor

    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, sinks: np.ndarray | None,
                  scale: float, max_bias: float, softcap: float, threads: int) -> np.ndarray:
        """``ggml_flash_attn_ext`` for one query row: q [heads, dims] f32, k and v
        [kv_heads, cells, dims] f16, mask [cells] f16. Returns [heads, dims]."""
        heads, dims = q.shape
        ctx = self.base.ggml_init(InitParams(mem_size=256 << 20, mem_buffer=None, no_alloc=False))
        assert ctx
        try:
            q_t = self.tensor(ctx, q.reshape(heads, 1, dims).astype(np.float32))
            k_t, v_t = self.tensor(ctx, k), self.tensor(ctx, v)
            m_t = self.tensor(ctx, mask.reshape(1, -1))
            out = self.base.ggml_flash_attn_ext(ctx, q_t, k_t, v_t, m_t, scale, max_bias, softcap)
            if sinks is not None:
                self.base.ggml_flash_attn_ext_add_sinks(out, self.tensor(ctx, sinks.astype(np.float32)))
            graph = self.base.ggml_new_graph(ctx)
            self.base.ggml_build_forward_expand(graph, out)
            assert self.cpu.ggml_graph_compute_with_ctx(ctx, graph, threads) == 0
            result = np.empty((heads, v.shape[2]), dtype=np.float32)
            ctypes.memmove(result.ctypes.data, self.base.ggml_get_data(out), result.nbytes)
            return result
        finally:
            self.base.ggml_free(ctx)


def alibi_slopes(heads: int, max_bias: float) -> np.ndarray:
    if max_bias <= 0:
        return np.ones(heads)
    floor = 1 << int(math.floor(math.log2(heads)))
    m0, m1 = 2 ** (-max_bias / floor), 2 ** (-(max_bias / 2) / floor)
    return np.array([m0 ** (h + 1) if h < floor else m1 ** (2 * (h - floor) + 1) for h in range(heads)])


def exact_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, sinks: np.ndarray | None,
                    scale: float, max_bias: float, softcap: float) -> np.ndarray:
    """Softmax attention in float64, the query rounded to f16 as the kernel's dot products take it."""
    heads = q.shape[0]
    group = heads // k.shape[0]
    q16 = q.astype(np.float16).astype(np.float64)
    slopes = alibi_slopes(heads, max_bias)
    out = np.empty((heads, v.shape[2]))
    for h in range(heads):
        keys, values = k[h // group].astype(np.float64), v[h // group].astype(np.float64)
        scores = keys @ q16[h] * scale
        if softcap:
            scores = softcap * np.tanh(scores / softcap)
        scores = scores + slopes[h] * mask.astype(np.float64)
        top = scores.max() if sinks is None else max(scores.max(), float(sinks[h]))
        weights = np.exp(scores - top)
        total = weights.sum() + (0.0 if sinks is None else math.exp(float(sinks[h]) - top))
        out[h] = weights @ values / total
    return out


def inputs(shape: Shape, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(shape.heads, shape.dims)).astype(np.float32)
    k = rng.normal(size=(shape.kv_heads, shape.cells, shape.dims)).astype(np.float16)
    v = rng.normal(size=(shape.kv_heads, shape.cells, shape.dims)).astype(np.float16)
    # Position-like biases, a scattering of masked cells, a whole masked block of 64 and the
    # padding cells at the end, as a cache that holds more cells than a sequence uses has.
    mask = -rng.uniform(0, 2, size=shape.cells)
    mask[rng.random(shape.cells) < 0.15] = -np.inf
    mask[128:192] = -np.inf
    mask[-37:] = -np.inf
    sinks = rng.normal(size=shape.heads).astype(np.float32) if shape.sinks else None
    return q, k, v, mask.astype(np.float16), sinks


SHAPES = {
    "smollm2": Shape(dims=64, heads=9, kv_heads=3, cells=1024),
    "gemma-3": Shape(dims=256, heads=4, kv_heads=1, cells=700),
    "alibi, soft-cap, sinks": Shape(dims=64, heads=8, kv_heads=2, cells=600, max_bias=8.0, softcap=30.0, sinks=True),
    "multi-head": Shape(dims=128, heads=4, kv_heads=4, cells=515),
}


def tolerance() -> float:
    """Of the output's scale: f32 sums in the patched loop; an f16 running sum in upstream's
    (a build made with ``llama_build.py --upstream``)."""
    return 1e-5 if FA_DECODE_GROUPED_HEADS in build_patches() else 2e-2


@pytest.fixture(scope="module")
def ggml() -> Ggml:
    return Ggml()


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("name", list(SHAPES))
def test_a_decode_step_at_depth_is_exact_attention(ggml: Ggml, name: str, threads: int) -> None:
    shape = SHAPES[name]
    q, k, v, mask, sinks = inputs(shape, seed=threads)
    scale = 1 / math.sqrt(shape.dims)
    got = ggml.attention(q, k, v, mask, sinks, scale, shape.max_bias, shape.softcap, threads)
    want = exact_attention(q, k, v, mask, sinks, scale, shape.max_bias, shape.softcap)
    assert np.isfinite(got).all()
    error = float(np.abs(got - want).max() / np.abs(want).max())
    assert error < tolerance(), f"{name}, {threads} threads: off by {error:.2e} of the output's scale"


def test_a_fully_masked_share_of_the_cache_leaves_the_result_to_the_rest(ggml: Ggml) -> None:
    """With two threads each takes half the cells; if one half is all masked, that thread's
    partial must count for nothing (no NaN from an empty softmax)."""
    shape = SHAPES["smollm2"]
    q, k, v, mask, sinks = inputs(shape, seed=7)
    mask[: shape.cells // 2] = -np.inf
    scale = 1 / math.sqrt(shape.dims)
    got = ggml.attention(q, k, v, mask, sinks, scale, 0.0, 0.0, threads=2)
    want = exact_attention(q, k, v, mask, sinks, scale, 0.0, 0.0)
    assert np.isfinite(got).all()
    assert float(np.abs(got - want).max() / np.abs(want).max()) < tolerance()

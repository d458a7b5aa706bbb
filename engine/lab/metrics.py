"""Perplexity and KL divergence of next-token distributions, written once for any backend.

The reference model's distribution at each scored position is kept as its ``k`` most
likely tokens (log-probabilities) plus the probability mass of all the others together.
KL(P_ref || Q) is then computed over those k+1 outcomes: exact for the top tokens, and the
tail treated as one outcome. Grouping outcomes never increases a KL divergence, so this is
a slightly optimistic estimate that is exact whenever the reference's tail mass is zero,
and exactly zero when Q equals P. It lets a 150k-token vocabulary be stored as 128 numbers
per position instead of 150k (llama.cpp's perplexity tool stores all of them, compressed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .backend import ArrayBackend

# Rows of logits converted at a time: bounds temporary memory to rows x vocabulary floats.
ROW_CHUNK = 128
_TINY = 1e-30


@dataclass
class ReferenceChunk:
    """What the reference keeps per scored position."""

    top_index: np.ndarray  # (n, k) int32, most likely first
    top_logprob: np.ndarray  # (n, k) float32
    nll: np.ndarray  # (n,) float64: -log p(actual next token)


@dataclass
class ComparisonChunk:
    nll: np.ndarray  # (n,) float64
    kld: np.ndarray  # (n,) float64
    same_top: np.ndarray  # (n,) bool


def summarize_reference(xp: ArrayBackend, logits: np.ndarray, targets: np.ndarray, k: int) -> ReferenceChunk:
    """Top-k log-probabilities and the negative log-likelihood of ``targets``.

    ``logits[i]`` is the distribution that predicts ``targets[i]``.
    """
    index_parts, value_parts, nll_parts = [], [], []
    for start in range(0, len(targets), ROW_CHUNK):
        logprobs = xp.log_softmax(xp.from_numpy(logits[start : start + ROW_CHUNK]))
        target = xp.from_numpy(targets[start : start + ROW_CHUNK, None].astype(np.int64))
        values, index = xp.topk(logprobs, k)
        value_parts.append(xp.to_numpy(values).astype(np.float32))
        index_parts.append(xp.to_numpy(index).astype(np.int32))
        nll_parts.append(-xp.to_numpy(xp.to_float64(xp.gather(logprobs, target)))[:, 0])
    return ReferenceChunk(
        top_index=np.concatenate(index_parts) if index_parts else np.zeros((0, k), np.int32),
        top_logprob=np.concatenate(value_parts) if value_parts else np.zeros((0, k), np.float32),
        nll=np.concatenate(nll_parts) if nll_parts else np.zeros(0),
    )


def compare_to_reference(
    xp: ArrayBackend, logits: np.ndarray, targets: np.ndarray, reference: ReferenceChunk
) -> ComparisonChunk:
    """Per-position NLL, KL(reference || this model) and whether both rank the same token first."""
    nll_parts, kld_parts, same_parts = [], [], []
    for start in range(0, len(targets), ROW_CHUNK):
        stop = start + ROW_CHUNK
        logprobs = xp.log_softmax(xp.from_numpy(logits[start:stop]))
        target = xp.from_numpy(targets[start:stop, None].astype(np.int64))
        ref_index = xp.from_numpy(reference.top_index[start:stop])
        ref_logp = xp.to_float64(xp.from_numpy(reference.top_logprob[start:stop]))

        q_logp = xp.to_float64(xp.gather(logprobs, ref_index))
        p = xp.exp(ref_logp)
        head = xp.sum(p * (ref_logp - q_logp), axis=-1)
        p_rest = xp.clip(1.0 - xp.sum(p, axis=-1), 0.0, 1.0)
        q_rest = xp.clip(1.0 - xp.sum(xp.exp(q_logp), axis=-1), 0.0, 1.0)
        tail = p_rest * (xp.log(xp.clip(p_rest, _TINY, 1.0)) - xp.log(xp.clip(q_rest, _TINY, 1.0)))
        # A reference with no tail mass contributes nothing there, whatever Q's tail is.
        tail = xp.where(p_rest > 0.0, tail, p_rest * 0.0)

        nll_parts.append(-xp.to_numpy(xp.to_float64(xp.gather(logprobs, target)))[:, 0])
        kld_parts.append(xp.to_numpy(head + tail))
        same_parts.append(xp.to_numpy(xp.argmax(logprobs)) == reference.top_index[start:stop, 0])
    return ComparisonChunk(
        nll=np.concatenate(nll_parts) if nll_parts else np.zeros(0),
        kld=np.concatenate(kld_parts) if kld_parts else np.zeros(0),
        same_top=np.concatenate(same_parts) if same_parts else np.zeros(0, bool),
    )


@dataclass
class QualityStats:
    perplexity: float
    kld_mean: float | None = None
    kld_p99: float | None = None
    same_top: float | None = None  # share of positions, 0..1
    positions: int = 0


def perplexity(nll: np.ndarray) -> float:
    return float(np.exp(np.mean(nll))) if len(nll) else float("nan")


def quality_stats(nll: np.ndarray, kld: np.ndarray | None, same_top: np.ndarray | None) -> QualityStats:
    stats = QualityStats(perplexity=perplexity(nll), positions=int(len(nll)))
    if kld is not None and len(kld):
        stats.kld_mean = float(np.mean(kld))
        stats.kld_p99 = float(np.percentile(kld, 99))
    if same_top is not None and len(same_top):
        stats.same_top = float(np.mean(same_top))
    return stats

"""Measure one loaded variant: speed, memory and (against the reference) quality."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..base import Finished, JobCancelled, SamplingParams
from ..runtime import LoadedModel
from .backend import ArrayBackend
from .evaltext import Window
from .metrics import ComparisonChunk, ReferenceChunk, compare_to_reference, summarize_reference

log = logging.getLogger(__name__)

FractionCallback = Callable[[float], None]


@dataclass(frozen=True)
class MeasureConfig:
    window: int = 512  # tokens per evaluation window (llama.cpp's perplexity default)
    top_k: int = 128  # reference tokens kept per position
    max_eval_tokens: int | None = None  # None: the whole evaluation text
    prompt_tokens: int = 256  # prompt-processing speed test length
    decode_tokens: int = 64  # decode speed test length
    backend: str = "auto"  # auto | numpy | torch


@dataclass
class Speed:
    prompt_tps: float
    decode_tps: float


def measure_speed(model: LoadedModel, tokens: list[int], config: MeasureConfig, cancel: threading.Event) -> Speed:
    """Prompt processing and decode speed at the model's thread/GPU settings.

    A short warm-up first, so one-time costs (compute buffers, page faults of the weights)
    are not counted. End-of-generation tokens are suppressed so every run decodes the same
    number of tokens.
    """
    room = model.n_ctx - config.decode_tokens - 1
    prompt = tokens[: max(8, min(config.prompt_tokens, room))]
    no_stop = {token_id: -100.0 for role, (token_id, _) in model.info.special_tokens.items()
               if role in ("eos", "eot", "eom") and 0 <= token_id < model.n_vocab}
    warm = SamplingParams(temperature=0.0, max_tokens=2, logit_bias=no_stop)
    _drain(model.generate(prompt[:8], warm, cancel, reuse_kv=False))
    timed = SamplingParams(temperature=0.0, max_tokens=config.decode_tokens, logit_bias=no_stop)
    finished = _drain(model.generate(prompt, timed, cancel, reuse_kv=False))
    if finished.finish_reason == "cancelled":
        raise JobCancelled("the lab run was cancelled")
    return Speed(
        prompt_tps=finished.timings.prompt_tps(finished.usage.prompt_tokens),
        decode_tps=finished.tokens_per_s,
    )


def _drain(events) -> Finished:  # noqa: ANN001
    for event in events:
        if isinstance(event, Finished):
            return event
    raise RuntimeError("generation ended without a Finished event")


def _window_logits(model: LoadedModel, window: Window, cancel: threading.Event) -> np.ndarray:
    logits = model.logits_for(window.tokens, cancel)
    if len(logits) == 0:
        raise JobCancelled("the lab run was cancelled")
    # Rows first_scored .. len-2 predict the scored targets.
    return logits[window.first_scored : len(window.tokens) - 1]


def evaluate_reference(
    model: LoadedModel, windows: list[Window], xp: ArrayBackend, config: MeasureConfig,
    cancel: threading.Event, progress: FractionCallback,
) -> list[ReferenceChunk]:
    chunks = []
    for i, window in enumerate(windows):
        logits = _window_logits(model, window, cancel)
        chunks.append(summarize_reference(xp, logits, window.targets, config.top_k))
        del logits  # one window of full-vocabulary logits at a time
        progress((i + 1) / len(windows))
    return chunks


def evaluate_against(
    model: LoadedModel, windows: list[Window], reference: list[ReferenceChunk], xp: ArrayBackend,
    cancel: threading.Event, progress: FractionCallback,
) -> ComparisonChunk:
    parts = []
    for i, (window, ref) in enumerate(zip(windows, reference, strict=True)):
        logits = _window_logits(model, window, cancel)
        parts.append(compare_to_reference(xp, logits, window.targets, ref))
        del logits
        progress((i + 1) / len(windows))
    return ComparisonChunk(
        nll=np.concatenate([p.nll for p in parts]),
        kld=np.concatenate([p.kld for p in parts]),
        same_top=np.concatenate([p.same_top for p in parts]),
    )

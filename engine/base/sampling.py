"""Sampling parameters: validated in Python, applied by llama.cpp's native sampler chain."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .errors import InvalidRequest

# The largest completion we accept in one request; the context bounds it further.
MAX_TOKENS_LIMIT = 1_000_000


@dataclass(frozen=True)
class SamplingParams:
    # The defaults are llama.cpp's (common.h, ``common_params_sampling``), as llama-server
    # applies them to a request that sets nothing, and the chain runs in its order
    # (native_sampler). With 0.7 rather than its 0.8 the same seeds gave other answers than
    # llama-server's (issue 33); with 0.8 a seeded request answers token for token as
    # llama-server does (tests/api/test_sampling_parity.py). How often SmolLM2 runs away to
    # the cap is its own, at either temperature: 3 of 50 in benchmarks/lengths.py, the same
    # seeds on both servers.
    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    logit_bias: dict[int, float] = field(default_factory=dict)
    grammar: str | None = None  # GBNF, e.g. from a JSON schema
    logprobs: int | None = None  # top-N alternatives to report per token (0: only the chosen one)

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "SamplingParams":
        """Build from a stored or user-supplied dict, ignoring unknown keys."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in known and v is not None}
        if isinstance(kwargs.get("stop"), str):
            kwargs["stop"] = (kwargs["stop"],)
        elif "stop" in kwargs:
            kwargs["stop"] = tuple(kwargs["stop"])
        if "logit_bias" in kwargs:
            kwargs["logit_bias"] = {int(k): float(v) for k, v in kwargs["logit_bias"].items()}
        return cls(**kwargs).validated()

    def with_overrides(self, **changes: Any) -> "SamplingParams":
        return replace(self, **{k: v for k, v in changes.items() if v is not None}).validated()

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def validated(self, n_vocab: int | None = None) -> "SamplingParams":
        """Raise InvalidRequest (naming the parameter) for anything out of range."""
        _finite("temperature", self.temperature, 0.0, 5.0)
        _finite("top_p", self.top_p, 0.0, 1.0)
        _finite("min_p", self.min_p, 0.0, 1.0)
        _finite("repeat_penalty", self.repeat_penalty, 0.0, 10.0)
        _finite("presence_penalty", self.presence_penalty, -2.0, 2.0)
        _finite("frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        _integer("top_k", self.top_k, 0, 1_000_000)
        _integer("repeat_last_n", self.repeat_last_n, -1, 1_000_000)
        if self.seed is not None:
            _integer("seed", self.seed, -(2**63), 2**64 - 1)
        if self.max_tokens is not None:
            _integer("max_tokens", self.max_tokens, 1, MAX_TOKENS_LIMIT)
        if self.logprobs is not None:
            _integer("logprobs", self.logprobs, 0, 20)
        if len(self.stop) > 16 or any(not isinstance(s, str) or not s for s in self.stop):
            raise InvalidRequest("stop must be up to 16 non-empty strings", param="stop")
        for token, bias in self.logit_bias.items():
            if n_vocab is not None and not 0 <= token < n_vocab:
                raise InvalidRequest(f"logit_bias token id {token} is outside the vocabulary (0..{n_vocab - 1})", param="logit_bias")
            _finite("logit_bias", bias, -100.0, 100.0)
        return self

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _finite(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRequest(f"{name} must be a finite number", param=name)
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low:g} and {high:g}, got {value:g}", param=name)


def _integer(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"{name} must be an integer", param=name)
    if not low <= value <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high}, got {value}", param=name)

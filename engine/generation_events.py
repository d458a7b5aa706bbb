"""What a generation yields: text chunks with their tokens, and a last ``Finished`` with the
usage and timings. Every front end (the window, the terminal, the API) reads these."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TokenLogprob:
    token: str
    token_bytes: bytes
    logprob: float
    top: list[tuple[str, bytes, float]] = field(default_factory=list)


@dataclass
class Chunk:
    """Text produced by one or more tokens."""

    text: str
    token_ids: list[int]
    logprobs: list[TokenLogprob] | None = None


@dataclass
class Usage:
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Timings:
    ttft_s: float = 0.0  # request start to first generated token (includes prefill)
    prompt_s: float = 0.0
    decode_s: float = 0.0
    # Speculative decoding: draft tokens verified, and how many of them were kept.
    draft_n: int = 0
    draft_n_accepted: int = 0

    def prompt_tps(self, tokens: int) -> float:
        return tokens / self.prompt_s if self.prompt_s > 0 else 0.0

    def decode_tps(self, completion_tokens: int) -> float:
        # The first token comes from prefill; speed counts the ones after it.
        return (completion_tokens - 1) / self.decode_s if completion_tokens > 1 and self.decode_s > 0 else 0.0


@dataclass
class Finished:
    finish_reason: str  # stop | length | cancelled
    usage: Usage
    timings: Timings
    model_id: str

    @property
    def tokens_per_s(self) -> float:
        return self.timings.decode_tps(self.usage.completion_tokens)


GenerationEvent = Chunk | Finished

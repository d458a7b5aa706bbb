"""What a generation yields: how far the prompt's reading has come (``PromptProgress``), text
chunks with their tokens, and a last ``Finished`` with the usage and timings. Every front end
(the window, the terminal, the API) reads these; one that has no use for progress skips it."""

from __future__ import annotations

from dataclasses import dataclass, field

from .units import human_duration

# The remaining time of a prompt's reading is estimated only after this many chunks: the
# first one alone is a poor rate (caches warming up, a chunk cut short by the budget).
RATE_AFTER_CHUNKS = 3
# A prompt with fewer new tokens than this is read in a moment (one chunk or less): front
# ends keep "Thinking…" rather than flash a progress line.
WORTH_SHOWING_TOKENS = 512


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


@dataclass(frozen=True)
class PromptProgress:
    """How far the model has read (prefilled) a job's prompt. Sent once when the prompt is
    admitted — tokenized, known to fit, its cached prefix restored (``read == cached``) —
    and then after every chunk the model reads, the last with ``read == total``, just
    before the first token. A long prompt takes minutes on a CPU: this is what lets a front
    end show it coming, and the HTTP API open a stream before the first token."""

    read: int  # prompt tokens in the KV cache now, cached ones included
    total: int  # the prompt's tokens
    cached: int  # tokens restored from a cache, not read
    elapsed_s: float  # seconds since the prompt was admitted
    chunks: int = 0  # chunks read so far

    @property
    def worth_showing(self) -> bool:
        """Whether the reading is long enough for a front end to show its progress."""
        return self.total - self.cached >= WORTH_SHOWING_TOKENS

    @property
    def remaining_s(self) -> float | None:
        """Seconds left at the rate so far; None until a few chunks give a rate."""
        fresh = self.read - self.cached
        if self.chunks < RATE_AFTER_CHUNKS or fresh <= 0 or self.elapsed_s <= 0:
            return None
        return (self.total - self.read) * self.elapsed_s / fresh

    def describe(self) -> str:
        """'Reading 3,200 of 6,159 prompt tokens · ~40 s': one spelling for the window and the terminal."""
        text = f"Reading {self.read:,} of {self.total:,} prompt tokens"
        remaining = self.remaining_s
        return text if remaining is None else f"{text} · ~{human_duration(remaining)}"


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


GenerationEvent = PromptProgress | Chunk | Finished

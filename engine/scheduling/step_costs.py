"""What a model's steps cost, measured as they run, and the prompt chunk that affords.

A prompt read beside streaming answers is fed in chunks; the chunk's size comes from the
measured cost of a decode step and of a prompt token, so the answers' worst gap between
tokens stays a few of their usual steps however deep the prompt's position.
"""

from __future__ import annotations

from .batched import BatchedModel

# A prompt chunk fed beside streaming answers costs about this many of their decode steps:
# their worst gap between tokens stays a few times the usual one.
GAP_FACTOR = 4.0
MIN_PREFILL_CHUNK = 8


def _ewma(previous: float, sample: float, weight: float = 0.3) -> float:
    return sample if previous <= 0 else previous + weight * (sample - previous)


class StepCosts:
    """Measured costs (seconds) of one model's decode step and prompt token, which size its
    prefill chunks while answers stream."""

    def __init__(self) -> None:
        self.decode_step_s = 0.0
        self.prefill_token_s = 0.0

    def prefill_budget(self, model: BatchedModel, decoding: bool, most: int) -> int:
        """Prompt tokens for this step. With nobody decoding, a whole batch. While answers
        stream, as many as cost about ``GAP_FACTOR`` decode steps, measured as it goes: a
        prompt token deep in a long context costs far more than one near its start (on a
        CPU a 512-token chunk at position 4,000 took 6 s, 400 decode steps), so a fixed
        chunk would stall the streams exactly when the prompt is longest."""
        if not decoding:
            return model.options.batch_size
        if self.prefill_token_s <= 0 or self.decode_step_s <= 0:
            return min(most, MIN_PREFILL_CHUNK * 2)
        fits = int(GAP_FACTOR * self.decode_step_s / self.prefill_token_s)
        return max(MIN_PREFILL_CHUNK, min(most, fits))

    def learn(self, seconds: float, prefill_tokens: int, decoding: bool) -> None:
        if prefill_tokens == 0:
            if decoding:
                self.decode_step_s = _ewma(self.decode_step_s, seconds)
            return
        extra = seconds - (self.decode_step_s if decoding else 0.0)
        self.prefill_token_s = _ewma(self.prefill_token_s, max(extra, 0.0) / prefill_tokens)

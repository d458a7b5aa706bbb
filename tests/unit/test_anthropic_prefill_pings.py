"""A Messages stream goes out before a long prefill ends: message_start (with the prompt's
counts), then a ping for each of the prompt's progress events (and each keep-alive due) until
the first token, then the answer. The run is a stand-in whose prompt is read in a set number
of steps, so nothing depends on timing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from inglenook.engine.api.anthropic import stream as api_anthropic_stream
from inglenook.engine.api.anthropic.out import TokenCounts
from inglenook.engine.base.generation_events import PromptProgress, Usage


class PrefillingHandle:
    def __init__(self) -> None:
        self.prompt_usage = Usage(prompt_tokens=20_000, cached_tokens=8_704)


class SlowRun:
    """A run whose prompt is read in ``steps`` progress events, the last a keep-alive (None)."""

    def __init__(self, steps: int) -> None:
        self.handle = PrefillingHandle()
        self.steps = steps
        self.finished = None
        self.closed = False

    async def reading(self, every_s: float) -> AsyncIterator[PromptProgress | None]:
        for step in range(1, self.steps + 1):
            yield None if step == self.steps else PromptProgress(8_704 + step * 512, 20_000, 8_704, step, step)

    def close(self) -> None:
        self.closed = True


class PrefilledAnswer:
    reasoning_inside = None
    stop_sequence = None

    def __init__(self, steps: int) -> None:
        self.run = SlowRun(steps)

    async def pieces(self) -> AsyncIterator[str]:
        for piece in ("Hel", "lo"):
            yield piece

    def stop_reason(self, called_tools: bool) -> str:
        return "end_turn"

    def counts(self) -> TokenCounts:
        return TokenCounts(20_000, 8_704, 2)


def _frames(answer: Any) -> list[tuple[str, dict[str, Any]]]:
    async def collect() -> list[str]:
        return [frame async for frame in api_anthropic_stream.message_stream(answer, None, "m")]

    frames = []
    for raw in asyncio.run(collect()):
        name, data = raw.strip().split("\n")
        frames.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return frames


def test_pings_flow_while_the_prompt_is_prefilled_and_message_start_counts_it() -> None:
    answer = PrefilledAnswer(steps=3)
    frames = _frames(answer)
    names = [name for name, _ in frames]
    assert names[:5] == ["message_start", "ping", "ping", "ping", "ping"]  # one per step before the first token
    assert names[5:] == ["content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop"]
    usage = frames[0][1]["message"]["usage"]
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["output_tokens"]) == (11_296, 8_704, 0)
    assert answer.run.closed


def test_no_extra_ping_when_the_first_token_is_already_there() -> None:
    names = [name for name, _ in _frames(PrefilledAnswer(steps=0))]
    assert names[:3] == ["message_start", "ping", "content_block_start"]

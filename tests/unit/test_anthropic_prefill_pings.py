"""A Messages stream goes out before a long prefill ends: message_start (with the prompt's
counts), then a ping every PING_EVERY_S until the first token, then the answer. The run is a
stand-in whose first token comes after a set number of polls, so nothing depends on timing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from inglenook.engine import api_anthropic_stream
from inglenook.engine.api_anthropic_out import TokenCounts
from inglenook.engine.runtime import Usage


class PrefillingHandle:
    """A job handle whose first event is waiting after ``polls`` checks."""

    def __init__(self, polls: int) -> None:
        self.polls = polls
        self.prompt_usage = Usage(prompt_tokens=20_000, cached_tokens=8_704)

    def pending(self) -> bool:
        self.polls -= 1
        return self.polls < 0


class SlowRun:
    def __init__(self, polls: int) -> None:
        self.handle = PrefillingHandle(polls)
        self.finished = None
        self.closed = False

    def close(self) -> None:
        self.closed = True


class PrefilledAnswer:
    reasoning_inside = None
    stop_sequence = None

    def __init__(self, polls: int) -> None:
        self.run = SlowRun(polls)

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


def test_pings_flow_while_the_prompt_is_prefilled_and_message_start_counts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_anthropic_stream, "PING_EVERY_S", 0.0)
    answer = PrefilledAnswer(polls=3)
    monkeypatch.setattr(api_anthropic_stream.anyio, "sleep", _no_sleep)
    frames = _frames(answer)
    names = [name for name, _ in frames]
    assert names[:5] == ["message_start", "ping", "ping", "ping", "ping"]  # one per poll before the first token
    assert names[5:] == ["content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
                         "message_delta", "message_stop"]
    usage = frames[0][1]["message"]["usage"]
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["output_tokens"]) == (11_296, 8_704, 0)
    assert answer.run.closed


def test_no_extra_ping_when_the_first_token_is_already_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_anthropic_stream, "PING_EVERY_S", 0.0)
    names = [name for name, _ in _frames(PrefilledAnswer(polls=0))]
    assert names[:3] == ["message_start", "ping", "content_block_start"]


async def _no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)

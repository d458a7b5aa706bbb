"""Messages API output from real runs: thinking blocks (whole and streamed), stop
sequences, and an error after the stream has started.

The stream and the whole message are built from real runs of the real scheduler over the
fake model (``tests.fakes``), which answers with a canned reply word by word.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inglenook.engine.api.anthropic import stream as api_anthropic_stream
from inglenook.engine.api.anthropic.out import Answer, whole_message
from inglenook.engine.api.anthropic.stream import message_stream
from inglenook.engine.api.anthropic.thinking import ThinkSplit
from inglenook.engine.api.shared.runs import Run, RunSet
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.text.tool_calls import ToolCallFilter, ToolPlan
from tests.fakes import FakeModel


class ReasoningModel(FakeModel):
    reply = "<think> weigh the options </think> The answer is four ."


class CallingModel(FakeModel):
    reply = '{"name": "add", "arguments": {"a": 2, "b": 2}}'


def _record(model_id: str) -> ModelRecord:
    return ModelRecord(model_id, Path(f"/models/{model_id}.gguf"), model_id, "llama", "Q4_0", 1, 256, 1, "fp-" + model_id, "scan")


@pytest.fixture()
def scheduler() -> Iterator[Scheduler]:
    sched = Scheduler(_record, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=ReasoningModel)
    yield sched
    sched.close()


def answer_of(scheduler: Scheduler, content: str = "2 + 2?", stops: tuple[str, ...] = ()) -> Answer:
    handle = scheduler.submit(GenerateJob("m:q4_0", messages=[{"role": "user", "content": content}]))
    return Answer(Run(handle, RunSet()), stops)


def stream_events(answer: Answer, calls: ToolCallFilter | None = None) -> list[tuple[str, dict[str, Any]]]:
    async def collect() -> list[str]:
        return [frame async for frame in message_stream(answer, calls, "m:q4_0")]

    events = []
    for frame in asyncio.run(collect()):
        name, data = frame.removesuffix("\n\n").split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


def split_all(pieces: list[str]) -> tuple[str, str]:
    split = ThinkSplit()
    out = [p for piece in pieces for p in split.feed(piece)] + split.finish()
    return "".join(t for k, t in out if k == "thinking"), "".join(t for k, t in out if k == "text")


def test_whole_message_puts_reasoning_in_a_thinking_block(scheduler: Scheduler) -> None:
    message = asyncio.run(whole_message(answer_of(scheduler), None, "m:q4_0"))
    assert message["content"] == [
        {"type": "thinking", "thinking": "weigh the options ", "signature": ""},
        {"type": "text", "text": "The answer is four ."},
    ]
    assert message["stop_reason"] == "end_turn"


def test_stream_sends_thinking_deltas_in_their_own_block(scheduler: Scheduler) -> None:
    events = [data for _, data in stream_events(answer_of(scheduler))]
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text"]
    deltas = [(e["index"], e["delta"]["type"]) for e in events if e["type"] == "content_block_delta"]
    assert {d for d in deltas if d[0] == 0} == {(0, "thinking_delta")} and {d for d in deltas if d[0] == 1} == {(1, "text_delta")}
    thinking = "".join(e["delta"].get("thinking", "") for e in events if e["type"] == "content_block_delta")
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert (thinking, text) == ("weigh the options ", "The answer is four .")
    assert [e["type"] for e in events if e["type"] == "content_block_stop"] == ["content_block_stop"] * 2


def test_a_stop_sequence_cancels_the_job_and_is_named(scheduler: Scheduler) -> None:
    message = asyncio.run(whole_message(answer_of(scheduler, stops=("is four",)), None, "m:q4_0"))
    assert [b["type"] for b in message["content"]] == ["thinking", "text"]
    assert message["content"][1]["text"] == "The answer "
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "is four")
    assert message["usage"]["output_tokens"] < len(ReasoningModel.reply.split())


def test_pings_keep_a_held_tool_call_stream_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every chunk of the call is held back until the call is complete; with the interval at
    # zero each held chunk is followed by a ping instead of silence.
    monkeypatch.setattr(api_anthropic_stream, "PING_EVERY_S", 0.0)
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    calls = ToolCallFilter(ToolPlan((tool,), required=False, forced_name=None, native=False), parallel=True)
    sched = Scheduler(_record, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=CallingModel)
    try:
        names = [name for name, _ in stream_events(answer_of(sched), calls)]
    finally:
        sched.close()
    held_chunks = len(CallingModel.reply.split(" "))
    assert names[0] == "message_start"
    pings = next(i for i, name in enumerate(names[1:]) if name != "ping")  # pings after message_start
    # One ping while the prompt is read (more if the prefill outlasts a poll: timing), then one
    # for each held chunk at the least; then the call in one piece.
    assert names[1:1 + pings] == ["ping"] * pings and pings >= 1 + held_chunks
    assert names[1 + pings:] == ["content_block_start", "content_block_delta", "content_block_stop",
                                 "message_delta", "message_stop"]


def test_an_error_after_the_stream_started_is_an_error_event(scheduler: Scheduler) -> None:
    # The fake model refuses a prompt longer than its 256-token context, as a real one does.
    events = stream_events(answer_of(scheduler, content="x" * 400))
    assert [name for name, _ in events] == ["message_start", "ping", "error"]
    assert events[-1][1] == {"type": "error", "error": {"type": "invalid_request_error", "message": "too long"}}


def test_text_without_a_leading_think_tag_is_left_alone() -> None:
    assert split_all(["The <think> tag ", "is mentioned."]) == ("", "The <think> tag is mentioned.")
    assert split_all(["<thi", "s is not it"]) == ("", "<this is not it")
    assert split_all(["<think>cut off by max_tokens"]) == ("cut off by max_tokens", "")


@settings(max_examples=50, deadline=None)
@given(
    thought=st.text(alphabet="ab <>/", max_size=12).filter(lambda t: "</think>" not in t and t.strip() == t),
    answer=st.text(alphabet="ab <>", max_size=12).filter(lambda t: t.strip() == t),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=6),
)
def test_any_split_of_the_stream_gives_the_same_thinking_and_text(thought: str, answer: str, cuts: list[int]) -> None:
    whole = f"<think>\n{thought}</think>\n\n{answer}"
    bounds = sorted({0, len(whole), *(c for c in cuts if c <= len(whole))})
    assert split_all([whole[a:b] for a, b in zip(bounds, bounds[1:])]) == (thought, answer)

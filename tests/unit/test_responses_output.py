"""Responses API output from real runs of the real scheduler over the fake model
(``tests.fakes``, a canned reply word by word): reasoning items, function calls whose
arguments stream as they are written, and streams that add up to the whole response."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inglenook.engine.api.responses.output import ResponseMeta, ResponseObject, whole_response
from inglenook.engine.api.responses.protocol import ResponseCreateRequest
from inglenook.engine.api.responses.stream import response_stream
from inglenook.engine.api.shared.runs import Run, RunSet
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.text.tool_calls import ToolPlan
from tests.fakes import FakeModel

ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}


class ReasoningModel(FakeModel):
    reply = "<think> weigh the options </think> The answer is four ."


class CallingModel(FakeModel):
    reply = 'Let me add . <tool_call> {"name": "add", "arguments": {"a": 2, "b": 2}} </tool_call>'


def _record(model_id: str) -> ModelRecord:
    return ModelRecord(model_id, Path(f"/models/{model_id}.gguf"), model_id, "llama", "Q4_0", 1, 256, 1, "fp-" + model_id, "scan")


def scheduler_for(model: type[FakeModel]) -> Iterator[Scheduler]:
    sched = Scheduler(_record, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=model)
    yield sched
    sched.close()


@pytest.fixture()
def reasoning() -> Iterator[Scheduler]:
    yield from scheduler_for(ReasoningModel)


@pytest.fixture()
def calling() -> Iterator[Scheduler]:
    yield from scheduler_for(CallingModel)


def run_of(scheduler: Scheduler) -> Run:
    handle = scheduler.submit(GenerateJob("m:q4_0", messages=[{"role": "user", "content": "2 + 2?"}]))
    return Run(handle, RunSet())


def meta() -> ResponseMeta:
    return ResponseMeta(ResponseCreateRequest.model_validate({"input": "2 + 2?"}), "m:q4_0")


def whole(scheduler: Scheduler, tools: ToolPlan | None = None) -> dict[str, Any]:
    run = run_of(scheduler)
    asyncio.run(run.drain())
    return whole_response(meta(), run, tools).model_dump(mode="json")


def streamed(scheduler: Scheduler, tools: ToolPlan | None = None) -> list[tuple[str, dict[str, Any]]]:
    finals: list[ResponseObject] = []

    async def keep(final: ResponseObject) -> None:
        finals.append(final)

    async def collect() -> list[str]:
        return [frame async for frame in response_stream(meta(), run_of(scheduler), tools, keep)]

    events = []
    for frame in asyncio.run(collect()):
        if frame.startswith(":"):
            continue  # an SSE comment while the prompt is read: clients skip it
        name, data = frame.strip("\n").split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    assert [e[1]["sequence_number"] for e in events] == list(range(len(events)))
    assert finals and finals[0].model_dump(mode="json")["output"] == events[-1][1]["response"]["output"]
    return events


def shape(output: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each item's type and its text (or a call's name and arguments)."""
    described = []
    for item in output:
        if item["type"] == "function_call":
            described.append(("function_call", f"{item['name']} {json.loads(item['arguments'])}"))
        else:
            described.append((item["type"], item["content"][0]["text"].strip()))
    return described


def test_reasoning_is_its_own_item_before_the_answer(reasoning: Scheduler) -> None:
    response = whole(reasoning)
    assert shape(response["output"]) == [("reasoning", "weigh the options"), ("message", "The answer is four .")]
    assert response["output"][0]["content"][0]["type"] == "reasoning_text"
    assert "think" not in response["output"][1]["content"][0]["text"]


def test_a_streamed_reasoning_answer_matches_the_whole_one(reasoning: Scheduler) -> None:
    events = streamed(reasoning)
    final = events[-1][1]["response"]
    assert shape(final["output"]) == [("reasoning", "weigh the options"), ("message", "The answer is four .")]
    names = [name for name, _ in events]
    assert names.index("response.reasoning_text.done") < names.index("response.output_text.delta")
    thought = "".join(d["delta"] for n, d in events if n == "response.reasoning_text.delta")
    said = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    assert thought.strip() == "weigh the options" and said.strip() == "The answer is four ."
    added = [d["output_index"] for n, d in events if n == "response.output_item.added"]
    assert added == [0, 1]


def test_a_call_is_an_item_after_the_text_and_its_arguments_stream(calling: Scheduler) -> None:
    tools = ToolPlan((ADD,), required=False, forced_name=None, native=False)
    expected = [("message", "Let me add ."), ("function_call", "add {'a': 2, 'b': 2}")]
    assert shape(whole(calling, tools)["output"]) == expected
    events = streamed(calling, tools)
    assert shape(events[-1][1]["response"]["output"]) == expected
    deltas = [d["delta"] for n, d in events if n == "response.function_call_arguments.delta"]
    done = next(d for n, d in events if n == "response.function_call_arguments.done")
    assert len(deltas) > 1, "the arguments came in one piece, not as they were written"
    assert json.loads("".join(deltas)) == json.loads(done["arguments"]) == {"a": 2, "b": 2}
    assert done["name"] == "add"
    names = [name for name, _ in events]
    assert names.index("response.output_text.done") < names.index("response.function_call_arguments.delta")

"""The OpenAI Responses API (what Codex CLI speaks) against the real server and starter model:
the official ``openai`` package's ``responses`` resource, and raw httpx for the SSE framing."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

from inglenook.engine.api.responses.store import ResponseStore
from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from tests.polling import wait_until

from ..prefix_rule import LONG_INSTRUCTIONS, served
from .conftest import STARTER

pytestmark = pytest.mark.api

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
# What Codex and other agents send beside their function tools; none of these may cause a 400.
# (An mcp tool names a server added to Inglenook and runs here, or is refused: tests/mcp/test_mcp_api.py.)
BUILT_IN_TOOLS: list[dict[str, Any]] = [
    {"type": "web_search"},
    {"type": "local_shell"},
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch", "format": {"type": "text"}},
]
STREAM_ORDER_TEXT = [
    "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.done", "response.content_part.done",
    "response.output_item.done",
]


def ask(client: openai.OpenAI, **fields: Any) -> Any:
    return client.responses.create(**{"model": STARTER, "temperature": 0, "max_output_tokens": 8, **fields})


def sse_events(body: str) -> list[tuple[str, dict[str, Any]]]:
    """(event line, data) of each event in a raw SSE body; skips comments (the keep-alives
    sent while the prompt is read); fails on any other framing."""
    events = []
    for block in body.split("\n\n"):
        if not block or block.startswith(":"):
            continue
        lines = block.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        events.append((lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: "))))
    return events


def test_text_input_gets_a_message_with_usage_and_is_stored(client: openai.OpenAI) -> None:
    response = ask(client, input="Say hello.", instructions="You are terse.")
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.model == STARTER
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    [message] = response.output
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "output_text" and response.output_text
    usage = response.usage
    assert usage.output_tokens == 8 and usage.input_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert response.instructions == "You are terse."

    again = client.responses.retrieve(response.id)
    assert again.id == response.id and again.output_text == response.output_text
    items = client.responses.input_items.list(response.id)
    assert [i.type for i in items.data] == ["message"] and items.data[0].content[0].text == "Say hello."
    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(response.id)


def test_the_same_prompt_again_reports_cached_input_tokens(client: openai.OpenAI) -> None:
    # Instructions past the 64 tokens every prompt reads again (tests/prefix_rule.py).
    first = ask(client, input="Name a color.", instructions=LONG_INSTRUCTIONS, store=False)
    second = ask(client, input="Name a color.", instructions=LONG_INSTRUCTIONS, store=False)
    assert second.output_text == first.output_text  # temperature 0 repeats itself
    assert first.usage.input_tokens_details.cached_tokens == 0
    assert second.usage.input_tokens_details.cached_tokens > 0
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)  # store: false keeps nothing


def test_items_input_with_messages_calls_and_outputs(client: openai.OpenAI) -> None:
    items = [
        {"role": "developer", "content": "Answer in one word."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temperature_c": 21}'},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    response = ask(client, input=items, tools=[WEATHER_TOOL, *BUILT_IN_TOOLS], max_output_tokens=6)
    assert response.status in ("completed", "incomplete")
    assert response.output and response.usage.input_tokens > 0
    assert [t.type for t in response.tools] == ["function", "web_search", "local_shell", "custom"]


def test_required_function_call_beside_unknown_tool_types(client: openai.OpenAI) -> None:
    response = ask(
        client, input="What is the weather in Paris?", tools=[*BUILT_IN_TOOLS, WEATHER_TOOL],
        tool_choice="required", max_output_tokens=40,
    )
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")
    assert set(json.loads(calls[0].arguments)) == {"city"}
    assert response.status == "completed"

    # The call's result goes back as items; the model answers in text.
    follow_up = ask(
        client, previous_response_id=response.id, tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temperature_c": 21}'}],
    )
    assert follow_up.previous_response_id == response.id
    # Text, or another call (the small model's choice; one cut at 40 tokens is a call since issue 45).
    assert follow_up.output[0].type in ("message", "function_call")
    assert follow_up.usage.input_tokens > response.usage.input_tokens  # the stored call is in the prompt


def test_forced_function_call_streams_its_arguments(client: openai.OpenAI) -> None:
    events = list(client.responses.create(
        model=STARTER, input="What is the weather in Paris?", tools=[WEATHER_TOOL, {"type": "web_search"}],
        tool_choice={"type": "function", "name": "get_weather"}, temperature=0, max_output_tokens=40, stream=True,
    ))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert done.name == "get_weather" and set(json.loads(done.arguments)) == {"city"}
    streamed = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert streamed == done.arguments
    final = events[-1].response
    [call] = [item for item in final.output if item.type == "function_call"]
    assert call.arguments == done.arguments and call.id == done.item_id


def test_stream_events_match_the_whole_response(client: openai.OpenAI) -> None:
    whole = ask(client, input="Say hello.", store=False)
    events = list(client.responses.create(
        model=STARTER, input="Say hello.", temperature=0, max_output_tokens=8, stream=True, store=False,
    ))
    kinds = [e.type for e in events]
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert [k for k in kinds if k != "response.output_text.delta"] == [
        k for k in STREAM_ORDER_TEXT if k != "response.output_text.delta"
    ] + ["response.incomplete"]
    assert kinds.index("response.output_text.delta") == kinds.index("response.content_part.added") + 1
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in deltas)
    assert text == whole.output_text
    assert next(e for e in events if e.type == "response.output_text.done").text == text
    final = events[-1].response
    assert final.output_text == text and final.status == "incomplete"
    assert final.usage.output_tokens == 8
    assert events[0].response.status == "in_progress" and events[0].response.id == final.id


def test_stream_helper_accumulates_to_the_final_response(client: openai.OpenAI) -> None:
    # Room for the whole greedy answer on any CPU's kernels: the SDK wants response.completed,
    # and a cut-off answer ends with response.incomplete (on haswell it ran past 30 tokens).
    with client.responses.stream(model=STARTER, input="Say hello.", temperature=0, max_output_tokens=200) as stream:
        texts = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.output_text == "".join(texts)
    assert client.responses.retrieve(final.id).output_text == final.output_text  # streamed ones are stored too


def test_a_streamed_response_is_stored_before_its_last_event(
    client: openai.OpenAI, engine: Engine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    heard_the_end = threading.Event()
    save = ResponseStore.save

    def held_save(self: ResponseStore, *args: Any) -> None:
        # A disk that stays busy until the client has heard the stream's end, if it ever
        # does first; the real save follows either way.
        heard_the_end.wait(5.0)
        save(self, *args)

    monkeypatch.setattr(ResponseStore, "save", held_save)
    stored = ResponseStore(engine.store)
    stream = client.responses.create(model=STARTER, input="Say hello.", temperature=0, max_output_tokens=4, stream=True)
    for event in stream:
        if event.type in ("response.completed", "response.incomplete"):
            found = stored.get(event.response.id)  # a client continuing the chain right now
            heard_the_end.set()
            assert found is not None, "the end of the stream was sent before the response was stored"
    follow_up = ask(client, input="Again.", previous_response_id=event.response.id)
    assert follow_up.previous_response_id == event.response.id


def test_previous_response_id_continues_the_chain_from_the_cache(client: openai.OpenAI) -> None:
    first = ask(client, input="My name is Ada. Say hello.", instructions=LONG_INSTRUCTIONS)
    # Instructions do not carry over a chain (OpenAI's rule): each turn sends them.
    second = ask(client, input="What is my name?", previous_response_id=first.id, instructions=LONG_INSTRUCTIONS)
    assert second.previous_response_id == first.id
    # The stored turn is in the prompt, and its prefix came from the cache.
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens > 0
    third = ask(client, input="Thanks.", previous_response_id=second.id, instructions=LONG_INSTRUCTIONS)
    assert third.usage.input_tokens > second.usage.input_tokens

    unstored = ask(client, input="Hi.", store=False)
    for missing in (unstored.id, "resp_nothing"):
        with pytest.raises(openai.BadRequestError) as caught:
            ask(client, input="Again.", previous_response_id=missing)
        assert caught.value.body["param"] == "previous_response_id"
        assert caught.value.body["code"] == "previous_response_not_found"
    client.responses.delete(first.id)
    with pytest.raises(openai.BadRequestError):  # a deleted link breaks the chain after it
        ask(client, input="Again.", previous_response_id=second.id)


class City(BaseModel):
    name: str = Field(max_length=16)
    is_capital: bool


def test_json_schema_through_responses_parse(client: openai.OpenAI) -> None:
    parsed = client.responses.parse(
        model=STARTER, input="Name a city in France.", text_format=City, temperature=0, max_output_tokens=60,
    )
    assert parsed.status == "completed"
    city = parsed.output_parsed
    assert isinstance(city, City) and city.name
    assert parsed.text.format.type == "json_schema"


def test_sse_framing_on_the_wire(server: ApiServer) -> None:
    body = {"model": STARTER, "input": "Say hello.", "temperature": 0, "max_output_tokens": 4, "stream": True}
    with httpx.stream("POST", server.url + "/responses", json=body, timeout=300) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = "".join(response.iter_text())
    assert raw.endswith("\n\n") and "[DONE]" not in raw
    events = sse_events(raw)
    for name, data in events:
        assert data["type"] == name
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    item_ids = {data["item_id"] for _, data in events if "item_id" in data}
    assert len(item_ids) == 1  # one message; every text event names it
    usage = events[-1][1]["response"]["usage"]
    assert set(usage) == {"input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens"}
    assert set(usage["input_tokens_details"]) == {"cached_tokens"}


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]}, "input"),
        ({"input": [{"role": "wizard", "content": "hi"}]}, "input"),
        ({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input"),
        ({"input": "hi", "tools": [{"type": "function", "name": "bad name!"}]}, "tools"),
        ({"input": "hi", "tool_choice": "sometimes"}, "tool_choice"),
        ({"input": "hi", "tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format"),
        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "hi", "background": True}, "background"),
    ],
)
def test_bad_requests_are_400_in_openai_shape(server: ApiServer, body: dict[str, Any], param: str) -> None:
    error = error_of(httpx.post(server.url + "/responses", json={"model": STARTER, **body}, timeout=300), 400)
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_too_long_input_and_unknown_ids(server: ApiServer) -> None:
    long_input = "word " * 3000  # the test server's context is 1024 tokens
    error = error_of(httpx.post(server.url + "/responses", json={"model": STARTER, "input": long_input}, timeout=300), 400)
    assert error["param"] == "input"
    for method in ("GET", "DELETE"):
        error = error_of(httpx.request(method, server.url + "/responses/resp_unknown", timeout=300), 404)
        assert error["code"] == "not_found"
    error_of(httpx.get(server.url + "/responses/resp_unknown/input_items", timeout=300), 404)


def codex_turn(input_items: list[dict[str, Any]]) -> dict[str, Any]:
    """A request shaped like Codex CLI's: streamed, unstored, reasoning and built-in tools."""
    shell = {
        "type": "function", "name": "shell", "description": "Runs a shell command and returns its output.",
        "strict": False,
        "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                       "required": ["command"], "additionalProperties": False},
    }
    return {
        "model": "gpt-5-codex", "instructions": "You are a coding agent running in a terminal.",
        "input": input_items, "tools": [shell, *BUILT_IN_TOOLS], "tool_choice": "auto",
        "parallel_tool_calls": False, "reasoning": {"effort": "medium", "summary": "auto"}, "store": False,
        "stream": True, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "session-1",
        "text": {"verbosity": "low"}, "temperature": 0, "max_output_tokens": 12,
    }


def test_a_codex_shaped_conversation_streams_to_its_end(server: ApiServer) -> None:
    turn = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>none</permissions>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
    ]
    finals = []
    for _ in range(2):
        with httpx.stream("POST", server.url + "/responses", json=codex_turn(turn), timeout=300) as response:
            assert response.status_code == 200
            events = sse_events("".join(response.iter_text()))
        kinds = [name for name, _ in events]
        assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.incomplete")
        assert "error" not in kinds
        finals.append(events[-1][1]["response"])
        done_items = [data["item"] for name, data in events if name == "response.output_item.done"]
        assert done_items == finals[-1]["output"]
        # Codex keeps the history itself (store: false) and sends it back with the call's result.
        turn = [
            *turn, *done_items,
            {"type": "function_call", "call_id": "call_ls", "name": "shell", "arguments": '{"command": ["ls"]}'},
            {"type": "function_call_output", "call_id": "call_ls", "output": "README.md\nsrc"},
        ]
    assert finals[0]["model"] == STARTER  # an unknown model name is served by the default model
    assert finals[1]["usage"]["input_tokens"] > finals[0]["usage"]["input_tokens"]
    # The first turn's prompt is the second's prefix and comes from the cache, all but the
    # few tokens where the generation prompt meets the answer (they tokenize differently),
    # up to an aligned position (tests/prefix_rule.py).
    first_in, second_in = finals[0]["usage"]["input_tokens"], finals[1]["usage"]["input_tokens"]
    assert finals[1]["usage"]["input_tokens_details"]["cached_tokens"] >= served(first_in, second_in, common=first_in - 8) > 0


LONG_STORY = {"model": STARTER, "input": "Write a very long story about a dragon.", "temperature": 0,
              "max_output_tokens": 900, "stream": True}


def test_a_client_that_leaves_mid_stream_cancels_its_job(
    server: ApiServer, engine: Engine, monkeypatch: pytest.MonkeyPatch,
) -> None:
    handles = []
    submit_many = engine.scheduler.submit_many

    def recording_submit(jobs):  # observes the jobs the server submits
        submitted = submit_many(jobs)
        handles.extend(submitted)
        return submitted

    monkeypatch.setattr(engine.scheduler, "submit_many", recording_submit)
    with httpx.stream("POST", server.url + "/responses", json=LONG_STORY, timeout=600) as response:
        deltas = 0
        for line in response.iter_lines():
            deltas += line == "event: response.output_text.delta"
            if deltas >= 3:
                break  # leaving the block closes the connection mid-stream
    [handle] = handles
    wait_until(lambda: handle.cancelled)
    wait_until(lambda: server.active_requests == 0)
    follow_up = httpx.post(server.url + "/responses", json={**LONG_STORY, "stream": False, "max_output_tokens": 2},
                           timeout=600)
    assert follow_up.status_code == 200 and follow_up.json()["usage"]["output_tokens"] == 2


def test_stopping_the_server_ends_a_stream_as_incomplete(engine: Engine) -> None:
    server = ApiServer(engine, port=0)
    server.start()
    lines: list[str] = []
    first_delta = threading.Event()

    def read() -> None:
        with httpx.stream("POST", server.url + "/responses", json=LONG_STORY, timeout=600) as response:
            for line in response.iter_lines():
                lines.append(line)
                if line == "event: response.output_text.delta":
                    first_delta.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert first_delta.wait(600)
    server.stop(timeout=30)
    reader.join(60)
    assert not reader.is_alive()
    events = sse_events("".join(f"{line}\n" if line else "\n" for line in lines))
    assert events[-1][0] == "response.incomplete"  # cut short, and said so; the text so far is kept
    final = events[-1][1]["response"]
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    streamed = "".join(data["delta"] for name, data in events if name == "response.output_text.delta")
    assert final["output"][0]["content"][0]["text"] == streamed and streamed


def test_logprobs_when_included(client: openai.OpenAI) -> None:
    include = ["message.output_text.logprobs"]
    whole = ask(client, input="Say hello.", include=include, top_logprobs=2, store=False)
    part = whole.output[0].content[0]
    assert len(part.logprobs) == 8 and "".join(e.token for e in part.logprobs) == part.text
    assert all(e.logprob <= 0 and len(e.top_logprobs) == 2 for e in part.logprobs)
    events = list(client.responses.create(
        model=STARTER, input="Say hello.", temperature=0, max_output_tokens=8, stream=True, store=False,
        include=include, top_logprobs=2,
    ))
    streamed = [entry for e in events if e.type == "response.output_text.delta" for entry in e.logprobs]
    assert [e.token for e in streamed] == [e.token for e in part.logprobs]
    done = next(e for e in events if e.type == "response.output_text.done")
    assert [e.token for e in done.logprobs] == [e.token for e in part.logprobs]
    assert ask(client, input="Say hello.", store=False).output[0].content[0].logprobs == []  # not asked for

"""The Anthropic Messages API against a real server on loopback, driven by the official
``anthropic`` package (sync, async, streaming, tools, count_tokens, errors) and raw httpx
for the exact event-stream framing."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import anthropic
import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine

from ..prefix_rule import LONG_INSTRUCTIONS
from .conftest import STARTER, serving

pytestmark = pytest.mark.api

HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}


def base_url(server: ApiServer) -> str:
    return server.url.removesuffix("/v1")  # the SDK adds /v1/messages itself


def client_for(server: ApiServer, **options: Any) -> anthropic.Anthropic:
    options.setdefault("api_key", "not-needed")
    return anthropic.Anthropic(base_url=base_url(server), max_retries=0, timeout=300, **options)


@pytest.fixture
def claude(server: ApiServer) -> anthropic.Anthropic:
    return client_for(server)


def sse_events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) per frame; every frame must be exactly one event: and one data: line."""
    assert raw.endswith("\n\n")
    events = []
    for frame in raw[:-2].split("\n\n"):
        lines = frame.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
        events.append((lines[0][len("event: "):], json.loads(lines[1][len("data: "):])))
    return events


def post_stream(server: ApiServer, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(f"{base_url(server)}/v1/messages", json={**body, "stream": True}, timeout=300)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return response


def assert_error(exc: anthropic.APIStatusError, status: int, kind: str) -> None:
    assert exc.status_code == status
    assert isinstance(exc.body, dict) and exc.body["type"] == "error", exc.body
    assert exc.body["error"]["type"] == kind and exc.body["error"]["message"]


# -- messages -----------------------------------------------------------------------------


def test_create_returns_a_message_and_a_repeat_reads_its_prompt_from_the_cache(claude: anthropic.Anthropic) -> None:
    first = claude.messages.create(model=STARTER, max_tokens=4, messages=HELLO, temperature=0,
                                   metadata={"user_id": "someone"})
    assert first.type == "message" and first.role == "assistant" and first.id.startswith("msg_")
    assert first.model == STARTER
    assert [b.type for b in first.content] == ["text"] and first.content[0].text
    assert (first.stop_reason, first.stop_sequence) == ("max_tokens", None)
    assert first.usage.output_tokens == 4 and first.usage.input_tokens > 0
    # A prompt past the 64 tokens every prompt reads again (tests/prefix_rule.py), twice.
    briefed = claude.messages.create(model=STARTER, max_tokens=4, system=LONG_INSTRUCTIONS, messages=HELLO,
                                     temperature=0)
    again = claude.messages.create(model=STARTER, max_tokens=4, system=LONG_INSTRUCTIONS, messages=HELLO,
                                   temperature=0)
    assert again.usage.cache_read_input_tokens > 0
    # Anthropic counts cache reads apart from new input: together they are the whole prompt.
    whole = briefed.usage.input_tokens + briefed.usage.cache_read_input_tokens
    assert again.usage.input_tokens + again.usage.cache_read_input_tokens == whole
    assert again.usage.cache_read_input_tokens > briefed.usage.cache_read_input_tokens


def test_an_unknown_model_name_is_served_by_the_default_model(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(model="claude-sonnet-4-5", max_tokens=2, temperature=0, messages=HELLO)
    assert message.model == STARTER and message.usage.output_tokens == 2


def test_system_as_string_or_blocks_is_the_same_prompt_and_count_tokens_matches_create(claude: anthropic.Anthropic) -> None:
    as_string = claude.messages.count_tokens(model=STARTER, system="Be brief.\n\nBe kind.", messages=HELLO)
    blocks = [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}]
    as_blocks = claude.messages.count_tokens(model=STARTER, system=blocks, messages=HELLO)
    assert as_string.input_tokens == as_blocks.input_tokens > 0
    created = claude.messages.create(model=STARTER, max_tokens=1, system=blocks, messages=HELLO)
    assert created.usage.input_tokens + created.usage.cache_read_input_tokens == as_blocks.input_tokens


def test_async_client_creates_and_counts(server: ApiServer) -> None:
    async def run() -> tuple[anthropic.types.Message, anthropic.types.MessageTokensCount]:
        async with anthropic.AsyncAnthropic(base_url=base_url(server), api_key="x", max_retries=0, timeout=300) as client:
            message = await client.messages.create(model=STARTER, max_tokens=3, messages=HELLO, temperature=0)
            count = await client.messages.count_tokens(model=STARTER, messages=HELLO)
            return message, count

    message, count = asyncio.run(run())
    assert message.content[0].type == "text" and message.usage.output_tokens == 3
    assert count.input_tokens == message.usage.input_tokens + message.usage.cache_read_input_tokens


def test_stop_sequence_ends_the_answer_and_is_named(claude: anthropic.Anthropic) -> None:
    free = claude.messages.create(model=STARTER, max_tokens=12, messages=HELLO, temperature=0).content[0].text
    words = free.split()
    assert len(words) >= 3, free
    stop = words[2]
    stopped = claude.messages.create(model=STARTER, max_tokens=12, messages=HELLO, temperature=0,
                                     stop_sequences=["never-written-xyz", stop])
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", stop)
    text = stopped.content[0].text if stopped.content else ""
    assert text == free[: free.index(stop)]
    assert stopped.usage.output_tokens < 12
    with claude.messages.stream(model=STARTER, max_tokens=12, messages=HELLO, temperature=0,
                                stop_sequences=[stop]) as stream:
        streamed = stream.get_final_message()
    assert (streamed.stop_reason, streamed.stop_sequence) == ("stop_sequence", stop)
    assert "".join(b.text for b in streamed.content if b.type == "text") == text


# -- streaming ----------------------------------------------------------------------------


def test_sdk_stream_accumulates_the_same_message(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(model=STARTER, max_tokens=6, messages=HELLO, temperature=0) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) >= 2 and "".join(pieces) == final.content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 6
    assert final.usage.input_tokens > 0  # from message_delta: the prompt is counted when the job ends


def test_raw_stream_frames_every_event_as_anthropic_does(server: ApiServer) -> None:
    response = post_stream(server, {"model": STARTER, "max_tokens": 5, "messages": HELLO, "temperature": 0})
    events = sse_events(response.text)
    assert all(name == data["type"] for name, data in events)
    names = " ".join(name for name, _ in events)
    # A ping follows message_start, and one every 5 s while the prompt is read: a busy machine
    # may send more before the first token.
    assert re.fullmatch(r"message_start( ping)+ content_block_start( content_block_delta)+ content_block_stop "
                        r"message_delta message_stop", names), names
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["id"].startswith("msg_")
    assert start["usage"]["input_tokens"] + start["usage"]["cache_read_input_tokens"] > 0  # the prompt, counted
    first_block = next(data for name, data in events if name == "content_block_start")
    assert first_block == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    assert all(d["type"] == "text_delta" and d["text"] for d in deltas)
    final = events[-2][1]
    assert final["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert final["usage"]["output_tokens"] == 5 and final["usage"]["input_tokens"] > 0


def test_a_claude_code_shaped_request_streams_although_max_tokens_exceeds_the_context(server: ApiServer) -> None:
    """What Claude Code sends: system and text blocks with cache_control, tools with $schema,
    thinking, metadata, fields this server does not know, and a max_tokens far above the
    1024-token context of this test's model."""
    body = {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "temperature": 1,
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
            {"type": "text", "text": "Answer in one short sentence.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>Be brief.</system-reminder>"},
            {"type": "text", "text": "Say hello.", "cache_control": {"type": "ephemeral"}},
        ]}],
        "tools": [{**WEATHER, "input_schema": {**WEATHER["input_schema"], "additionalProperties": False,
                                               "$schema": "http://json-schema.org/draft-07/schema#"}}],
        "metadata": {"user_id": "user_abc_account__session_123"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "context_management": {"edits": []},
    }
    response = httpx.post(f"{base_url(server)}/v1/messages?beta=true", json={**body, "stream": True}, timeout=300,
                          headers={"anthropic-version": "2023-06-01", "anthropic-beta": "claude-code-20250219"})
    assert response.status_code == 200, response.text
    events = sse_events(response.text)
    assert [name for name, _ in events][:2] == ["message_start", "ping"]
    assert [name for name, _ in events][-2:] == ["message_delta", "message_stop"]
    assert events[-2][1]["delta"]["stop_reason"] in ("end_turn", "max_tokens", "tool_use")


# -- tools --------------------------------------------------------------------------------


def test_forced_tool_call_is_a_tool_use_block_and_server_tools_are_accepted(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(
        model=STARTER, max_tokens=60, temperature=0, messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER, WEB_SEARCH], tool_choice={"type": "tool", "name": "get_weather"},
    )
    assert message.stop_reason == "tool_use"
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather" and uses[0].id.startswith("toolu_")
    assert isinstance(uses[0].input, dict) and isinstance(uses[0].input["city"], str)


def test_streamed_tool_call_sends_input_json_deltas(server: ApiServer) -> None:
    body = {"model": STARTER, "max_tokens": 60, "temperature": 0, "tools": [WEATHER], "tool_choice": {"type": "any"},
            "messages": [{"role": "user", "content": "What is the weather in Rome?"}]}
    events = sse_events(post_stream(server, body).text)
    starts = [data["content_block"] for name, data in events if name == "content_block_start"]
    assert starts and starts[-1]["type"] == "tool_use" and starts[-1]["name"] == "get_weather" and starts[-1]["input"] == {}
    index = len(starts) - 1
    partial = [data["delta"] for name, data in events if name == "content_block_delta" and data["index"] == index]
    assert partial and all(d["type"] == "input_json_delta" for d in partial)
    assert isinstance(json.loads("".join(d["partial_json"] for d in partial))["city"], str)
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_sdk_stream_of_a_tool_call_parses_its_input(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(model=STARTER, max_tokens=60, temperature=0, tools=[WEATHER], tool_choice={"type": "any"},
                                messages=[{"role": "user", "content": "Weather in Oslo?"}]) as stream:
        final = stream.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and len(uses) == 1 and isinstance(uses[0].input.get("city"), str)


def test_tool_results_reach_the_prompt_and_server_tools_stay_out_of_it(claude: anthropic.Anthropic) -> None:
    def conversation(result: Any, is_error: bool = False) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": result,
                                          "is_error": is_error}]},
        ]

    short = claude.messages.count_tokens(model=STARTER, tools=[WEATHER], messages=conversation("sunny"))
    blocks = [{"type": "text", "text": "sunny, 21 degrees, light wind from the west, no rain expected"}]
    longer = claude.messages.count_tokens(model=STARTER, tools=[WEATHER], messages=conversation(blocks, is_error=True))
    assert longer.input_tokens > short.input_tokens
    with_search = claude.messages.count_tokens(model=STARTER, tools=[WEATHER, WEB_SEARCH], messages=conversation("sunny"))
    assert with_search.input_tokens == short.input_tokens
    answer = claude.messages.create(model=STARTER, max_tokens=8, temperature=0, tools=[WEATHER],
                                    messages=conversation("sunny"))
    assert answer.stop_reason in ("end_turn", "max_tokens", "tool_use") and answer.content


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "fragment"), [
    ({"max_tokens": 0}, "max_tokens"),
    ({"temperature": 1.5}, "temperature"),
    ({"messages": [{"role": "user", "content": [{"type": "hologram", "text": "?"}]}]}, "hologram"),
    ({"messages": [{"role": "robot", "content": "Hi"}]}, "role"),
    ({"messages": []}, "messages"),
])
def test_bad_requests_are_anthropic_invalid_request_errors(claude: anthropic.Anthropic, fields: dict, fragment: str) -> None:
    body: dict[str, Any] = {"model": STARTER, "max_tokens": 4, "messages": HELLO, **fields}
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(**body)
    assert_error(caught.value, 400, "invalid_request_error")
    assert fragment in caught.value.body["error"]["message"]


def test_missing_max_tokens_and_broken_json_are_refused_in_anthropics_shape(server: ApiServer) -> None:
    url = f"{base_url(server)}/v1/messages"
    missing = httpx.post(url, json={"model": STARTER, "messages": HELLO}, timeout=60)
    assert missing.status_code == 400 and missing.json()["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in missing.json()["error"]["message"]
    broken = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}, timeout=60)
    assert broken.status_code == 400 and broken.json()["type"] == "error"
    unknown = httpx.post(f"{url}/nonexistent", json={}, timeout=60)
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"


def test_an_over_long_prompt_is_refused_before_streaming_naming_the_context(claude: anthropic.Anthropic) -> None:
    long = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model=STARTER, max_tokens=4, messages=long)
    assert_error(caught.value, 400, "invalid_request_error")
    assert "1024" in caught.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError):
        with claude.messages.stream(model=STARTER, max_tokens=4, messages=long) as stream:
            stream.get_final_message()
    # Too long to answer is still countable.
    assert claude.messages.count_tokens(model=STARTER, messages=long).input_tokens > 1024


def test_api_key_by_x_api_key_or_bearer_and_gate_errors_in_anthropics_shape(engine: Engine) -> None:
    with serving(engine, api_key="sesame", max_body_bytes=64 * 1024) as server:
        by_header = client_for(server, api_key="sesame")  # the SDK sends x-api-key
        assert by_header.messages.create(model=STARTER, max_tokens=1, temperature=0, messages=HELLO).usage.output_tokens == 1
        by_bearer = anthropic.Anthropic(base_url=base_url(server), auth_token="sesame", max_retries=0, timeout=300)
        assert by_bearer.messages.count_tokens(model=STARTER, messages=HELLO).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError) as caught:
            client_for(server, api_key="wrong").messages.create(model=STARTER, max_tokens=1, messages=HELLO)
        assert_error(caught.value, 401, "authentication_error")
        url = f"{base_url(server)}/v1/messages"
        too_big = httpx.post(url, headers={"x-api-key": "sesame"}, timeout=60,
                             json={"model": STARTER, "max_tokens": 1, "messages": [{"role": "user", "content": "x" * 100_000}]})
        assert too_big.status_code == 413 and too_big.json()["error"]["type"] == "request_too_large"
        foreign = httpx.post(url, headers={"x-api-key": "sesame", "host": "attacker.example"}, json={}, timeout=60)
        assert foreign.status_code == 403 and foreign.json()["error"]["type"] == "permission_error"
        # Other endpoints keep OpenAI's error shape.
        chat = httpx.post(f"{server.url}/chat/completions", json={}, timeout=60)
        assert chat.status_code == 401 and "type" not in chat.json()

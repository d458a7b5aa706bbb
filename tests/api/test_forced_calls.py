"""A forced tool call is always returned as a call (issue 45), in all three APIs, through the
official SDKs: its arguments are held to the tool's schema (declared keys only, each of its
type, the required ones present) whether or not ``strict`` is set, and a call the token limit
cuts comes back as a call marked as cut (``length``, ``max_tokens``, ``incomplete``) with the
arguments written so far, never as text."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from inglenook.engine.api.server import ApiServer

from .conftest import STARTER

pytestmark = pytest.mark.timeout(300)

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city"]}
QUESTIONS = ["What's the weather in Paris?", "Weather in Tokyo please", "Is it raining in Berlin?"]
OPENAI_TOOL = [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
                                                  "parameters": SCHEMA}}]
FORCED = {"type": "function", "function": {"name": "get_weather"}}


def held_to_the_schema(arguments: dict[str, Any]) -> None:
    assert set(arguments) <= {"city", "days"} and isinstance(arguments["city"], str), arguments
    assert isinstance(arguments.get("days", 0), int)


@pytest.fixture
def claude(server: ApiServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=300)


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_forced_call_is_a_call_held_to_the_schema_in_every_api(client: openai.OpenAI, claude: anthropic.Anthropic,
                                                                  question: str) -> None:
    # Sampled (temperature 0.8, the default), with room to finish: the grammar decides, not luck.
    chat = client.chat.completions.create(model=STARTER, max_tokens=200, messages=[{"role": "user", "content": question}],
                                          tools=OPENAI_TOOL, tool_choice=FORCED)  # type: ignore[arg-type]
    calls = chat.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    held_to_the_schema(json.loads(calls[0].function.arguments))  # type: ignore[union-attr]

    message = claude.messages.create(
        model=STARTER, max_tokens=200, messages=[{"role": "user", "content": question}],
        tools=[{"name": "get_weather", "description": "Get the weather", "input_schema": SCHEMA}],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": "get_weather"})
    uses = [b for b in message.content if b.type == "tool_use"]
    assert message.stop_reason == "tool_use" and len(uses) == 1
    held_to_the_schema(uses[0].input)  # type: ignore[arg-type]

    response = client.responses.create(
        model=STARTER, max_output_tokens=200, input=question,
        tools=[{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": False}],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "get_weather"})
    calls_out = [item for item in response.output if item.type == "function_call"]
    assert calls_out and calls_out[0].name == "get_weather"  # type: ignore[union-attr]
    held_to_the_schema(json.loads(calls_out[0].arguments))  # type: ignore[union-attr]


def test_a_forced_call_cut_by_the_token_limit_is_still_a_call(client: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    question = [{"role": "user", "content": QUESTIONS[1]}]
    # 24 tokens hold the call's opening ({"name": "get_weather", "arguments": {) but hardly all of it.
    chat = client.chat.completions.create(model=STARTER, max_tokens=24, temperature=0, messages=question,  # type: ignore[arg-type]
                                          tools=OPENAI_TOOL, tool_choice=FORCED)  # type: ignore[arg-type]
    choice = chat.choices[0]
    assert choice.message.tool_calls and choice.message.tool_calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    finished = _whole(choice.message.tool_calls[0].function.arguments)  # type: ignore[union-attr]
    assert choice.finish_reason == ("tool_calls" if finished else "length")

    message = claude.messages.create(
        model=STARTER, max_tokens=24, temperature=0, messages=question,  # type: ignore[arg-type]
        tools=[{"name": "get_weather", "description": "Get the weather", "input_schema": SCHEMA}],  # type: ignore[list-item]
        tool_choice={"type": "tool", "name": "get_weather"})
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather" and isinstance(uses[0].input, dict)
    assert not [b for b in message.content if b.type == "text" and "get_weather" in b.text]
    assert message.stop_reason == ("tool_use" if finished else "max_tokens")

    with claude.messages.stream(
            model=STARTER, max_tokens=24, temperature=0, messages=question,  # type: ignore[arg-type]
            tools=[{"name": "get_weather", "description": "Get the weather", "input_schema": SCHEMA}],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "get_weather"}) as stream:
        streamed = stream.get_final_message()
    assert [b.type for b in streamed.content if b.type != "text"] == ["tool_use"]
    assert streamed.stop_reason == message.stop_reason

    response = client.responses.create(
        model=STARTER, max_output_tokens=24, temperature=0, input=QUESTIONS[1],
        tools=[{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": False}],  # type: ignore[list-item]
        tool_choice={"type": "function", "name": "get_weather"})
    calls_out = [item for item in response.output if item.type == "function_call"]
    assert calls_out and calls_out[0].name == "get_weather"  # type: ignore[union-attr]
    assert response.status == ("completed" if finished else "incomplete")


def _whole(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False

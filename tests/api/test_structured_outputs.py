"""Structured outputs as clients use them: the official openai package's parse helpers,
with schemas from pydantic, TypedDicts and by hand, against the real server and the
starter model at temperature 0.

Where a test asserts that the answer finishes, its schema bounds every string and array and
its ``max_tokens`` is the most bytes the schema's grammar admits (``tests/grammar_bound``):
the grammar then ends the answer on every CPU, whatever path the model's greedy choices take
(an answer of 128 tokens ended on one machine and ran to the cap on another: issue 39)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import openai
import pytest
from pydantic import BaseModel, Field, TypeAdapter
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from ..grammar_bound import most_bytes
from .conftest import STARTER


class Joke(BaseModel):
    setup: str = Field(max_length=50)
    punchline: str = Field(max_length=50)


class Day(BaseModel):
    day: Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    high_c: int


class Forecast(BaseModel):
    city: str = Field(max_length=24)
    days: list[Day] = Field(max_length=2)


class Weather(BaseModel):
    city: str = Field(max_length=40)
    unit: Literal["celsius", "fahrenheit"]


class CalendarEvent(TypedDict):
    name: Annotated[str, Field(max_length=30)]
    date: Annotated[str, Field(max_length=16)]
    participants: Annotated[list[Annotated[str, Field(max_length=16)]], Field(max_length=2)]


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema the openai package sends for ``model`` (strict: no undeclared keys)."""
    return openai.pydantic_function_tool(model)["function"]["parameters"]


def keys_follow(value: dict[str, Any], order: list[str]) -> bool:
    positions = [order.index(k) for k in value]
    return positions == sorted(positions)


def test_the_issue_joke_parses_with_keys_in_schema_order(client: openai.OpenAI) -> None:
    completion = client.chat.completions.parse(
        model=STARTER, messages=[{"role": "user", "content": "Tell me a joke about computers."}],
        temperature=0, max_tokens=most_bytes(strict_schema(Joke)), response_format=Joke,
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, Joke)
    assert list(json.loads(choice.message.content)) == ["setup", "punchline"]


def test_nested_models_parse_and_keep_their_order(client: openai.OpenAI) -> None:
    completion = client.chat.completions.parse(
        model=STARTER, messages=[{"role": "user", "content": "Give a two-day weather forecast for Paris."}],
        temperature=0, max_tokens=most_bytes(strict_schema(Forecast)), response_format=Forecast,
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    parsed = choice.message.parsed
    assert isinstance(parsed, Forecast) and len(parsed.days) <= 2
    raw = json.loads(choice.message.content)
    assert list(raw) == ["city", "days"]
    assert all(list(day) == ["day", "high_c"] for day in raw["days"])


def test_a_typed_dict_schema(client: openai.OpenAI) -> None:
    schema = TypeAdapter(CalendarEvent).json_schema()
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "Alice and Bob are going to a science fair on Friday."}],
        temperature=0, max_tokens=most_bytes(schema, strict=True),
        response_format={"type": "json_schema", "json_schema": {"name": "CalendarEvent", "strict": True, "schema": schema}},
    )
    assert reply.choices[0].finish_reason == "stop"
    event = json.loads(reply.choices[0].message.content)
    TypeAdapter(CalendarEvent).validate_python(event)
    assert keys_follow(event, ["name", "date", "participants"])


def test_a_hand_written_schema_with_enum_format_and_bounds(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {
            "sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]},
            "summary": {"type": "string", "maxLength": 40},
            "reviewed_on": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 2},
        },
        "required": ["sentiment", "summary", "reviewed_on", "tags"],
        "additionalProperties": False,
    }
    reply = client.chat.completions.create(
        model=STARTER, temperature=0, max_tokens=most_bytes(schema),
        messages=[{"role": "user", "content": "Review: 'The battery died after two days.' Written 2026-11-30."}],
        response_format={"type": "json_schema", "json_schema": {"name": "review", "strict": True, "schema": schema}},
    )
    assert reply.choices[0].finish_reason == "stop"
    review = json.loads(reply.choices[0].message.content)
    assert list(review) == ["sentiment", "summary", "reviewed_on", "tags"]
    assert review["sentiment"] in ("positive", "negative", "neutral") and len(review["summary"]) <= 40
    assert 1 <= len(review["tags"]) <= 2
    assert len(review["reviewed_on"]) == 10 and review["reviewed_on"][4] == "-"


def test_an_answer_cut_by_the_token_limit_is_reported_as_length(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "Tell me a joke about computers."}],
        temperature=0, max_tokens=6,
        response_format={"type": "json_schema", "json_schema": {"name": "Joke", "strict": True,
                                                                 "schema": Joke.model_json_schema()}},
    )
    assert reply.choices[0].finish_reason == "length"
    with pytest.raises(ValueError):
        json.loads(reply.choices[0].message.content)
    with pytest.raises(openai.LengthFinishReasonError):
        client.chat.completions.parse(
            model=STARTER, messages=[{"role": "user", "content": "Tell me a joke about computers."}],
            temperature=0, max_tokens=6, response_format=Joke,
        )


def test_forced_tool_calls_follow_the_same_rules(client: openai.OpenAI) -> None:
    tool = openai.pydantic_function_tool(Weather, name="get_weather")
    # A forced call is written as {"name": ..., "arguments": {...}} under one grammar.
    call = {"type": "object", "additionalProperties": False, "properties": {
        "name": {"const": "get_weather"}, "arguments": tool["function"]["parameters"]}}
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        temperature=0, max_tokens=most_bytes(call), tools=[tool], tool_choice="required",
    )
    assert reply.choices[0].finish_reason == "tool_calls"
    [call] = reply.choices[0].message.tool_calls
    arguments = json.loads(call.function.arguments)
    assert call.function.name == "get_weather"
    assert list(arguments) == ["city", "unit"] and arguments["unit"] in ("celsius", "fahrenheit")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "maxLength": 100000},
        {"type": "string", "pattern": "^(a?){100}$"},
    ],
)
def test_schemas_that_used_to_crash_or_wedge_the_server_now_answer(client: openai.OpenAI, schema: dict) -> None:
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "Say something."}], temperature=0, max_tokens=8,
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    )
    assert reply.choices[0].message.content.startswith('"')


def test_a_pattern_too_costly_for_a_grammar_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model=STARTER, messages=[{"role": "user", "content": "Say a."}], max_tokens=8,
            response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": {
                "type": "string", "pattern": "^(a?){4000}$"}}},
        )
    assert raised.value.body["param"] == "response_format"
    assert "4000" in raised.value.body["message"]

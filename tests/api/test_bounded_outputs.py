"""Forced tool calls and json_schema answers end by the grammar, whatever the model does
(issue 33): a string the schema leaves unbounded is held to json_grammar.STRING_CHARS."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from inglenook.engine.core.engine import Engine
from inglenook.engine.text import json_grammar
from tests.api.conftest import STARTER

SEND = {"type": "function", "function": {
    "name": "send_message",
    "parameters": {"type": "object", "properties": {"recipient": {"type": "string"}, "text": {"type": "string"}},
                   "required": ["recipient", "text"]},
}}


@pytest.fixture
def short_strings(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A small default bound, so a string that never closes reaches it in a few tokens."""
    monkeypatch.setattr(json_grammar, "STRING_CHARS", 20)
    json_grammar._convert.cache_clear()
    yield 20
    json_grammar._convert.cache_clear()


def _babbling_bias(client: openai.OpenAI, engine: Engine) -> dict[str, int]:
    """A logit bias that makes the model write " the" wherever the grammar lets it: inside
    a string it never chooses the closing quote by itself."""
    client.chat.completions.create(model=STARTER, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    model = engine.scheduler.loaded_models()[0]
    [token] = model.tokenize(" the", add_special=False, parse_special=False)
    return {str(token): 100}


def test_a_forced_call_ends_by_the_grammar_when_the_model_never_closes_a_string(
    client: openai.OpenAI, engine: Engine, short_strings: int,
) -> None:
    # Strict, so the babble cannot go on into undeclared keys (bounded too, but slow to reach on
    # two cores; test_grammar_bounds.py checks those bounds in the grammar itself).
    strict = {**SEND, "function": {**SEND["function"], "strict": True}}
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "Tell Alice the meeting moved to Friday."}],
        tools=[strict], tool_choice={"type": "function", "function": {"name": "send_message"}},
        logit_bias=_babbling_bias(client, engine), max_tokens=400, temperature=0,
    )
    choice = reply.choices[0]
    assert choice.finish_reason != "length"
    [call] = choice.message.tool_calls
    arguments = json.loads(call.function.arguments)
    assert all(len(v) <= short_strings for v in arguments.values() if isinstance(v, str))
    # It babbled up to the bound (" the" is 4 characters: the last few may be another token).
    assert max(len(arguments["recipient"]), len(arguments["text"])) > short_strings - 4


def test_a_strict_json_schema_answer_ends_by_the_grammar(client: openai.OpenAI, engine: Engine,
                                                          short_strings: int) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string", "maxLength": 8}},
              "required": ["title", "body"], "additionalProperties": False}
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "A note about plants."}],
        response_format={"type": "json_schema", "json_schema": {"name": "note", "strict": True, "schema": schema}},
        logit_bias=_babbling_bias(client, engine), max_tokens=400, temperature=0,
    )
    assert reply.choices[0].finish_reason == "stop"
    answer = json.loads(reply.choices[0].message.content)
    assert short_strings - 4 < len(answer["title"]) <= short_strings  # the default bound
    assert 4 < len(answer["body"]) <= 8  # the schema's own

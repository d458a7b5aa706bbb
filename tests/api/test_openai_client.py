"""The official openai package against the real server: what tools that speak OpenAI do."""

from __future__ import annotations

import asyncio
import json
import math

import openai
import pytest

from inglenook.engine.core.engine import Engine

from ..prefix_rule import LONG_INSTRUCTIONS
from .conftest import STARTER, serving

pytestmark = pytest.mark.api

HELLO = [{"role": "user", "content": "Say hello."}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert STARTER in ids
    assert client.models.retrieve(STARTER).id == STARTER
    assert client.models.retrieve("smollm2").id == STARTER  # the id without its quant
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_chat_completion_reports_usage_and_the_serving_model(client: openai.OpenAI) -> None:
    # Tools hard-code OpenAI names; by default the default model answers them.
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO, temperature=0, max_tokens=5)
    choice = reply.choices[0]
    assert reply.model == STARTER
    assert reply.object == "chat.completion"
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason == "length"
    assert reply.usage.completion_tokens == 5
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + 5
    again = client.chat.completions.create(model=STARTER, messages=HELLO, temperature=0, max_tokens=5)
    assert again.choices[0].message.content == choice.message.content  # temperature 0 repeats itself
    # A prompt past the 64 tokens every prompt reads again (tests/prefix_rule.py), twice: the
    # second's prefix is reused, and usage says so.
    briefed = [{"role": "system", "content": LONG_INSTRUCTIONS}, *HELLO]
    first = client.chat.completions.create(model=STARTER, messages=briefed, temperature=0, max_tokens=5)
    again = client.chat.completions.create(model=STARTER, messages=briefed, temperature=0, max_tokens=5)
    assert again.usage.prompt_tokens_details.cached_tokens > 0
    assert again.choices[0].message.content == first.choices[0].message.content
    # llama-server's cache_prompt=false bypasses every prompt cache, for comparisons.
    uncached = client.chat.completions.create(
        model=STARTER, messages=briefed, temperature=0, max_tokens=5, extra_body={"cache_prompt": False}
    )
    assert uncached.usage.prompt_tokens_details.cached_tokens == 0
    assert uncached.choices[0].message.content == first.choices[0].message.content


def test_stream_matches_the_whole_answer_and_ends_with_usage(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model=STARTER, messages=HELLO, temperature=0, max_completion_tokens=6)
    chunks = list(client.chat.completions.create(
        model=STARTER, messages=HELLO, temperature=0, max_completion_tokens=6,
        stream=True, stream_options={"include_usage": True},
    ))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6


def test_async_client_runs_requests_concurrently(server) -> None:
    async def main() -> list[str]:
        client = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=300)
        asks = [
            client.chat.completions.create(
                model=STARTER, messages=[{"role": "user", "content": q}], temperature=0, max_tokens=4
            )
            for q in ("Name a color.", "Name a fruit.")
        ]
        replies = await asyncio.gather(*asks)
        stream = await client.chat.completions.create(model=STARTER, messages=HELLO, temperature=0, max_tokens=3, stream=True)
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream])
        await client.close()
        return [r.choices[0].message.content for r in replies] + [streamed]

    texts = asyncio.run(main())
    assert all(texts)


def test_n_choices_stop_and_seed(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model=STARTER, messages=HELLO, temperature=0, max_tokens=8, n=2)
    assert [c.index for c in reply.choices] == [0, 1]
    assert reply.choices[0].message.content == reply.choices[1].message.content
    reference = reply.choices[0].message.content
    words = reference.split()
    stop = words[1]
    stopped = client.chat.completions.create(model=STARTER, messages=HELLO, temperature=0, max_tokens=8, stop=[stop])
    assert stopped.choices[0].finish_reason == "stop"
    assert stop not in stopped.choices[0].message.content
    assert reference.startswith(stopped.choices[0].message.content)
    sampled = [
        client.chat.completions.create(
            model=STARTER, messages=HELLO, temperature=1.0, seed=42, max_tokens=8, top_p=0.9,
            presence_penalty=0.5, frequency_penalty=0.5,
            extra_body={"top_k": 50, "min_p": 0.0, "repeat_penalty": 1.1},  # llama.cpp's extras
        ).choices[0].message.content
        for _ in range(2)
    ]
    assert sampled[0] == sampled[1]  # the same seed, the same answer


def test_logprobs_and_logit_bias(client: openai.OpenAI, engine: Engine) -> None:
    reply = client.chat.completions.create(
        model=STARTER, messages=HELLO, temperature=0, max_tokens=3, logprobs=True, top_logprobs=3
    )
    entries = reply.choices[0].logprobs.content
    assert len(entries) == 3
    assert "".join(e.token for e in entries) == reply.choices[0].message.content
    for entry in entries:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[-1].logprob
        assert bytes(entry.bytes).decode() == entry.token
    # Forbid the first token the model chose: the answer must change.
    first_token = entries[0].token
    model = engine.scheduler.loaded_models()[0]
    [token_id] = model.tokenize(first_token, add_special=False, parse_special=False)
    biased = client.chat.completions.create(
        model=STARTER, messages=HELLO, temperature=0, max_tokens=1, logprobs=True, logit_bias={str(token_id): -100}
    )
    assert biased.choices[0].logprobs.content[0].token != first_token


def test_json_schema_is_enforced(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "Invent a person."}], temperature=0, max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}},
    )
    assert reply.choices[0].finish_reason == "stop"
    person = json.loads(reply.choices[0].message.content)
    assert set(person) == {"name", "age"}
    assert isinstance(person["name"], str) and isinstance(person["age"], int)


def test_json_object_output_parses_as_json(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=STARTER, messages=[{"role": "user", "content": "Reply with an empty JSON object."}],
        temperature=0, max_tokens=12, response_format={"type": "json_object"},
    )
    text = reply.choices[0].message.content
    assert text.lstrip().startswith("{")
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)


def test_required_tool_call_in_response_and_stream(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    reply = client.chat.completions.create(
        model=STARTER, messages=messages, tools=[WEATHER_TOOL], tool_choice="required", temperature=0, max_tokens=40
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert set(json.loads(call.function.arguments)) == {"city"}

    named = {"type": "function", "function": {"name": "get_weather"}}
    stream = client.chat.completions.create(
        model=STARTER, messages=messages, tools=[WEATHER_TOOL], tool_choice=named, temperature=0, max_tokens=40, stream=True
    )
    names, arguments, reasons, pieces = [], "", [], 0
    for chunk in stream:
        choice = chunk.choices[0]
        for delta in choice.delta.tool_calls or []:
            names += [delta.function.name] if delta.function.name else []
            arguments += delta.function.arguments or ""
            pieces += bool(delta.function.arguments)
        reasons += [choice.finish_reason] if choice.finish_reason else []
    assert names == ["get_weather"] and reasons == ["tool_calls"]
    assert set(json.loads(arguments)) == {"city"}
    assert pieces > 1, "the arguments stream as the model writes them, not in one piece at the end"

    # The tool's result goes back in, in OpenAI's shape, and the model answers in text.
    history = messages + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 21}'},
    ]
    answer = client.chat.completions.create(model=STARTER, messages=history, tools=[WEATHER_TOOL], temperature=0, max_tokens=8)
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_roles_and_content_parts(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(
        model=STARTER, temperature=0, max_tokens=3,
        messages=[
            {"role": "developer", "content": "Answer briefly."},
            {"role": "user", "content": [{"type": "text", "text": "Say"}, {"type": "text", "text": "hello."}]},
        ],
    )
    assert reply.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=STARTER, max_tokens=3,
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
        )
    assert caught.value.body["param"] == "messages"


def test_text_completions_with_echo_and_logprobs(client: openai.OpenAI) -> None:
    reply = client.completions.create(
        model=STARTER, prompt="The capital of France is", max_tokens=3, temperature=0, echo=True, logprobs=2
    )
    choice = reply.choices[0]
    assert choice.text.startswith("The capital of France is") and len(choice.text) > len("The capital of France is")
    assert len(choice.logprobs.tokens) == 3 and all(len(t) <= 2 for t in choice.logprobs.top_logprobs)
    assert choice.logprobs.text_offset[0] == len("The capital of France is")
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=STARTER, prompt="The capital of France is", max_tokens=3, temperature=0, stream=True
    ) if c.choices)
    assert "The capital of France is" + streamed == choice.text
    several = client.completions.create(model=STARTER, prompt=["One,", "Two,"], max_tokens=2, temperature=0, n=2)
    assert [c.index for c in several.choices] == [0, 1, 2, 3]


def test_embeddings_float_and_base64(client: openai.OpenAI) -> None:
    # The SDK asks for base64 by default and decodes it; a float request must agree.
    packed = client.embeddings.create(model=STARTER, input=["hello there", "general kenobi"])
    plain = client.embeddings.create(model=STARTER, input=["hello there", "general kenobi"], encoding_format="float")
    assert [d.index for d in packed.data] == [0, 1]
    for a, b in zip(packed.data, plain.data):
        assert len(a.embedding) == len(b.embedding) > 0
        assert math.isclose(sum(x * x for x in b.embedding), 1.0, rel_tol=1e-3)
        assert all(math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-6) for x, y in zip(a.embedding, b.embedding))
    assert packed.usage.prompt_tokens > 0
    assert plain.data[0].embedding != plain.data[1].embedding


def test_errors_arrive_as_sdk_exceptions(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=STARTER, messages=HELLO, max_tokens=-1)
    assert caught.value.body["param"] == "max_tokens"
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=STARTER, messages=[{"role": "user", "content": "word " * 1500}], max_tokens=4)
    assert caught.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):  # the same, when streaming: before the stream starts
        client.chat.completions.create(
            model=STARTER, messages=[{"role": "user", "content": "word " * 1500}], max_tokens=4, stream=True
        )


def test_api_key_and_strict_model_names(engine: Engine) -> None:
    with serving(engine, api_key="s3cret", strict_model_names=True) as server:
        wrong = openai.OpenAI(base_url=server.url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()
        right = openai.OpenAI(base_url=server.url, api_key="s3cret", max_retries=0)
        assert STARTER in [m.id for m in right.models.list()]
        with pytest.raises(openai.NotFoundError) as caught:
            right.chat.completions.create(model="gpt-4o-mini", messages=HELLO, max_tokens=2)
        assert caught.value.code == "model_not_found"

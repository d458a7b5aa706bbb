"""Property-based tests for the API's request handling: whatever the body, never a 500.

Random JSON (any shape, lone surrogates, huge numbers, deep nesting) and bodies shaped like
chat, completion and embedding requests with random values go to the real server over the
starter model. Every answer is either a success or an error in OpenAI's shape with a 4xx
status, and the server keeps answering. A longer run: INGLENOOK_FUZZ_EXAMPLES=2000.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine

pytestmark = pytest.mark.api

EXAMPLES = int(os.environ.get("INGLENOOK_FUZZ_EXAMPLES", "40"))
STARTER = "smollm2-135m-instruct:q4_1"
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Iterator[ApiServer]:
    home = tmp_path_factory.mktemp("fuzz-home")
    previous = os.environ.get("INGLENOOK_HOME")
    os.environ["INGLENOOK_HOME"] = str(home)
    engine = Engine()
    engine.update_settings(context_size=512)
    # A tiny default cap: a random body that happens to be valid answers in a few tokens.
    api = ApiServer(engine, port=0, default_max_tokens=3)
    api.start()
    try:
        yield api
    finally:
        api.stop()
        engine.close()
        if previous is None:
            os.environ.pop("INGLENOOK_HOME", None)
        else:
            os.environ["INGLENOOK_HOME"] = previous


# Text with everything JSON can carry, lone surrogates included (sent as \\udXXX escapes).
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
numbers = st.one_of(st.integers(), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True))
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text)
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(any_text, inner, max_size=4)), max_leaves=12)

roles = st.one_of(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]), any_text)
content = st.one_of(any_text, st.none(), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": any_text}),
                                                  max_size=2), json_values)
message = st.one_of(
    st.fixed_dictionaries({"role": roles, "content": content}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.none(), "tool_calls": json_values}),
    json_values,
)
small_int = st.one_of(st.integers(-2, 3), json_values)
sampling = {
    "model": st.one_of(st.just(STARTER), any_text, json_values),
    "max_tokens": small_int,
    "n": st.one_of(st.integers(-1, 17), json_values),
    "temperature": st.one_of(st.floats(-1, 3), json_values),
    "top_p": st.one_of(st.floats(-0.5, 1.5), json_values),
    "top_k": small_int,
    "seed": st.one_of(st.integers(), json_values),
    "stop": st.one_of(any_text, st.lists(any_text, max_size=5), json_values),
    "logit_bias": st.one_of(st.dictionaries(any_text, numbers, max_size=3), json_values),
    "stream": st.one_of(st.booleans(), json_values),
    "presence_penalty": st.one_of(st.floats(-3, 3), json_values),
}
chat_fields = {
    **sampling,
    "messages": st.one_of(st.lists(message, min_size=0, max_size=4), json_values),
    "max_completion_tokens": small_int,
    "logprobs": st.one_of(st.booleans(), json_values),
    "top_logprobs": small_int,
    "tools": st.one_of(st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": json_values}),
                                max_size=2), json_values),
    "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required"]), json_values),
    "response_format": st.one_of(st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object"])}),
                                 json_values),
}
completion_fields = {
    **sampling,
    "prompt": st.one_of(any_text, st.lists(any_text, max_size=3), st.lists(st.integers(-5, 60_000), max_size=8),
                        json_values),
    "echo": st.one_of(st.booleans(), json_values),
    "logprobs": small_int,
    "suffix": st.one_of(st.none(), any_text),
}
embedding_fields = {
    "model": sampling["model"],
    "input": st.one_of(any_text, st.lists(any_text, max_size=3), st.lists(st.integers(), max_size=3), json_values),
    "encoding_format": st.one_of(st.sampled_from(["float", "base64"]), json_values),
    "dimensions": st.one_of(st.none(), st.integers(-2, 2000), json_values),
}


def shaped(fields: dict[str, st.SearchStrategy]) -> st.SearchStrategy[dict[str, Any]]:
    """Bodies with any subset of a route's fields, plus stray ones."""
    optional = {name: strategy for name, strategy in fields.items()}
    return st.fixed_dictionaries({}, optional=optional).flatmap(
        lambda body: st.dictionaries(any_text, json_values, max_size=2).map(lambda extra: {**extra, **body})
    )


def encode(body: Any) -> bytes:
    # ensure_ascii writes lone surrogates as \\udXXX escapes, as a hostile client would.
    return json.dumps(body, ensure_ascii=True, allow_nan=True).encode()


def check(server: ApiServer, path: str, raw: bytes) -> None:
    response = httpx.post(server.url + path, content=raw, headers={"content-type": "application/json"}, timeout=300)
    assert response.status_code < 500 or response.status_code == 503, response.text
    assert "internal_error" not in response.text, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"]


@FUZZ
@given(body=st.one_of(shaped(chat_fields), json_values))
def test_chat_bodies_never_fail_the_server(server: ApiServer, body: Any) -> None:
    check(server, "/chat/completions", encode(body))


@FUZZ
@given(body=st.one_of(shaped(completion_fields), json_values))
def test_completion_bodies_never_fail_the_server(server: ApiServer, body: Any) -> None:
    check(server, "/completions", encode(body))


@FUZZ
@given(body=st.one_of(shaped(embedding_fields), json_values))
def test_embedding_bodies_never_fail_the_server(server: ApiServer, body: Any) -> None:
    check(server, "/embeddings", encode(body))


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.integers(1, 20_000).map(lambda d: b'{"a":' + b"[" * d + b"]" * d + b"}")))
def test_raw_bytes_never_fail_the_server(server: ApiServer, raw: bytes) -> None:
    check(server, "/chat/completions", raw)


# File and image parts (issue 45): any count, any base64 (or not), any name; each answer a
# success or a 4xx in OpenAI's shape, and the server keeps answering.
b64ish = st.one_of(st.binary(max_size=64).map(lambda b: __import__("base64").b64encode(b).decode()), any_text)
file_part = st.fixed_dictionaries({"type": st.just("file"), "file": st.one_of(st.fixed_dictionaries(
    {"filename": st.one_of(any_text, st.none()), "file_data": st.one_of(b64ish, b64ish.map(
        lambda d: f"data:text/plain;base64,{d}"), json_values)}), json_values)})
image_part = st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.one_of(st.fixed_dictionaries(
    {"url": st.one_of(b64ish.map(lambda d: f"data:image/png;base64,{d}"), any_text,
                      st.sampled_from(["file:///etc/passwd", "http://127.0.0.1/x.png"]))}), json_values)})
parts_message = st.fixed_dictionaries({"role": st.just("user"), "content": st.lists(
    st.one_of(file_part, image_part, st.fixed_dictionaries({"type": st.just("text"), "text": any_text})),
    max_size=24)})


@FUZZ
@given(messages=st.lists(parts_message, min_size=1, max_size=2))
def test_file_and_image_parts_never_fail_the_server(server: ApiServer, messages: list[Any]) -> None:
    check(server, "/chat/completions", encode({"model": STARTER, "messages": messages, "max_tokens": 1}))

"""A stream opens when its prompt is admitted, not at its first token (issue 27).

A long prompt's reading takes minutes on a CPU; clients that see no status line for minutes
give up. Each family's stream must send its status, headers and opening frame while the
prompt is still unread, keep-alives as the prompt is read, and progress chunks to a client
that asks (``return_progress``); an over-long prompt must still be an HTTP error.

The model is loaded with a small batch, so a prompt of ~700 tokens is read in a dozen
chunks. "Before the first token" is made certain, not timed: the engine's step is held shut
until the test has read the headers and the opening frame, so a server that waited for the
first token would time out here instead of passing by luck.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine

from tests.held_steps import hold_steps

from .conftest import STARTER

BATCH = 64  # prompt tokens per step: a ~700-token prompt is read in about a dozen chunks
LONG_WORDS = 600
# A request that fails to open a stream while the engine is held fails within this, not hangs.
HEADERS_TIMEOUT_S = 60.0


@pytest.fixture
def engine(home, smollm2_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    plain = Engine.load_options
    monkeypatch.setattr(Engine, "load_options", lambda self: dataclasses.replace(plain(self), batch_size=BATCH))
    engine = Engine()
    engine.update_settings(context_size=1024)
    yield engine
    engine.close()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set it to let the engine step: until then an admitted prompt stays unread."""
    gate = hold_steps(monkeypatch)
    yield gate
    gate.set()  # never leave the engine's thread waiting


def long_text(topic: str) -> str:
    """About 700 tokens; each test's own topic, so no prompt cache shortens another's reading."""
    words = ("alpha", "beta", "gamma", "delta", "omega", "sigma")
    return f"About {topic}: " + " ".join(words[i % len(words)] for i in range(LONG_WORDS)) + ". Say one word."


@contextlib.contextmanager
def opened(server: ApiServer, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Iterator[
        tuple[httpx.Response, Iterator[str]]]:
    root = server.url.removesuffix("/v1")
    timeout = httpx.Timeout(300.0, read=HEADERS_TIMEOUT_S)
    with httpx.Client(timeout=timeout) as client, client.stream("POST", root + path, json=body, headers=headers) as response:
        yield response, response.iter_lines()


def next_line(lines: Iterator[str]) -> str:
    """The next line with something on it (SSE frames end with a blank line)."""
    for line in lines:
        if line:
            return line
    raise AssertionError("the stream ended")


def data_of(line: str) -> dict[str, Any]:
    return json.loads(line.removeprefix("data: "))


def chat_request(topic: str, **extra: Any) -> dict[str, Any]:
    return {"model": STARTER, "messages": [{"role": "user", "content": long_text(topic)}], "temperature": 0,
            "max_tokens": 3, "stream": True, **extra}


def test_a_chat_stream_opens_before_the_prompt_is_read_then_keeps_alive(server: ApiServer, held: threading.Event) -> None:
    with opened(server, "/v1/chat/completions", chat_request("owls")) as (response, lines):
        # The engine has not read one prompt token yet: status, headers, a comment.
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        first = next_line(lines)
        assert first.startswith(": read 0 of ") and first.endswith(" prompt tokens")
        held.set()
        rest = [line for line in lines if line]
    first_content = next(i for i, line in enumerate(rest) if line.startswith("data: {") and
                         (data_of(line)["choices"] or [{}])[0].get("delta", {}).get("content"))
    comments = [line for line in rest[:first_content] if line.startswith(":")]
    # One comment per prompt chunk read, all before the first token.
    assert len(comments) >= 8, comments
    assert rest[-1] == "data: [DONE]"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_return_progress_sends_llama_server_progress_up_to_the_whole_prompt(server: ApiServer, path: str) -> None:
    if path == "/v1/chat/completions":
        body = chat_request(f"progress on {path}", return_progress=True)
    else:
        body = {"model": STARTER, "prompt": long_text(f"progress on {path}"), "temperature": 0, "max_tokens": 3,
                "stream": True, "return_progress": True}
    with opened(server, path, body) as (response, lines):
        assert response.status_code == 200
        frames = [data_of(line) for line in lines if line.startswith("data: {")]
    progress = [frame["prompt_progress"] for frame in frames if "prompt_progress" in frame]
    assert len(progress) >= 8, "one at admission, then one per chunk read"
    assert set(progress[0]) == {"total", "cache", "processed", "time_ms"}
    processed = [p["processed"] for p in progress]
    assert processed[0] == progress[0]["cache"] == 0 and processed == sorted(processed)
    assert processed[-1] == progress[-1]["total"] and len(set(processed)) == len(processed)
    last_progress = max(i for i, frame in enumerate(frames) if "prompt_progress" in frame)
    texts = [frame["choices"][0].get("text") or frame["choices"][0].get("delta", {}).get("content")
             for frame in frames if frame.get("choices")]
    assert any(texts), "the answer came"
    first_text = next(i for i, frame in enumerate(frames) if frame.get("choices") and (
        frame["choices"][0].get("text") or frame["choices"][0].get("delta", {}).get("content")))
    assert last_progress < first_text, "all of the progress comes before the answer"
    if path == "/v1/chat/completions":  # as llama-server: a chunk with a role delta and the progress beside it
        assert frames[last_progress]["object"] == "chat.completion.chunk"
        assert frames[last_progress]["choices"][0]["delta"] == {"role": "assistant"}


def test_an_anthropic_stream_starts_and_pings_before_the_first_delta(server: ApiServer, held: threading.Event) -> None:
    # Greedy: a sampled answer may end at once, with no delta to count pings before.
    body = {"model": STARTER, "max_tokens": 3, "temperature": 0, "stream": True, "messages": [{"role": "user", "content": long_text("anthropic")}]}
    with opened(server, "/v1/messages", body) as (response, lines):
        assert response.status_code == 200
        assert next_line(lines) == "event: message_start"
        start = data_of(next_line(lines))
        assert start["message"]["usage"]["input_tokens"] > LONG_WORDS  # the prompt's size is known up front
        held.set()
        events = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    first_delta = events.index("content_block_delta")
    assert events[:first_delta].count("ping") >= 8, "a ping per chunk read, before the first delta"
    assert events[-1] == "message_stop"


def test_a_responses_stream_opens_before_the_prompt_is_read(server: ApiServer, held: threading.Event) -> None:
    body = {"model": STARTER, "input": long_text("responses"), "max_output_tokens": 16, "stream": True}
    with opened(server, "/v1/responses", body) as (response, lines):
        assert response.status_code == 200
        assert next_line(lines) == "event: response.created"
        next_line(lines)
        assert next_line(lines) == "event: response.in_progress"
        next_line(lines)
        held.set()
        rest = [line for line in lines if line]
    first_event = next(i for i, line in enumerate(rest) if line.startswith("event: "))
    assert len([line for line in rest[:first_event] if line.startswith(":")]) >= 8, "comments while the prompt is read"
    assert rest[-2] in ("event: response.completed", "event: response.incomplete")


OVER_LONG = "word " * 3000  # over the 1024-token context


@pytest.mark.parametrize(("path", "body", "shape"), [
    ("/v1/chat/completions", {"model": STARTER, "messages": [{"role": "user", "content": OVER_LONG}], "stream": True}, "openai"),
    ("/v1/completions", {"model": STARTER, "prompt": OVER_LONG, "stream": True}, "openai"),
    ("/v1/responses", {"model": STARTER, "input": OVER_LONG, "stream": True}, "openai"),
    ("/v1/messages", {"model": STARTER, "max_tokens": 4, "messages": [{"role": "user", "content": OVER_LONG}],
                      "stream": True}, "anthropic"),
])
def test_an_over_long_prompt_is_still_an_http_error_in_the_familys_shape(
        server: ApiServer, path: str, body: dict[str, Any], shape: str) -> None:
    response = httpx.post(server.url.removesuffix("/v1") + path, json=body, timeout=300)
    assert response.status_code == 400 and response.headers["content-type"].startswith("application/json")
    error = response.json()
    if shape == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
        assert "1024" in error["error"]["message"]
    else:
        assert error["error"]["code"] == "context_length_exceeded" and "1024" in error["error"]["message"]

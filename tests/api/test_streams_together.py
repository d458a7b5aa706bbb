"""Streams, disconnects and sharing the model with the GUI's chats."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from tests.polling import wait_until

from .conftest import STARTER, chat_body

pytestmark = pytest.mark.api


def stream_text(url: str, body: dict) -> tuple[str, str | None]:
    """Stream a chat completion with raw SSE parsing; returns (text, finish_reason)."""
    text, reason = [], None
    with httpx.stream("POST", url + "/chat/completions", json={**body, "stream": True}, timeout=600) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        # Comment lines (": ...", the keep-alives while the prompt is read) are for no one.
        lines = [line for line in response.iter_lines() if line and not line.startswith(":")]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        assert line.startswith("data: ")
        choice = json.loads(line.removeprefix("data: "))["choices"][0]
        text.append(choice["delta"].get("content") or "")
        reason = choice["finish_reason"] or reason
    return "".join(text), reason


def test_client_disconnect_cancels_the_generation(server: ApiServer, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    handles = []
    submit_many = engine.scheduler.submit_many

    def recording_submit(jobs):  # observes the jobs the server submits
        submitted = submit_many(jobs)
        handles.extend(submitted)
        return submitted

    monkeypatch.setattr(engine.scheduler, "submit_many", recording_submit)
    body = chat_body("Write a very long story about a dragon.", max_tokens=900, stream=True)
    with httpx.stream("POST", server.url + "/chat/completions", json=body, timeout=600) as response:
        received = 0
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                received += 1
            if received >= 3:
                break  # leaving the block closes the connection mid-stream
    [handle] = handles
    wait_until(lambda: handle.cancelled)
    model = engine.scheduler.loaded_models()[0]

    def generation_stopped() -> bool:
        before = len(model.kv_tokens)
        time.sleep(0.5)
        return len(model.kv_tokens) == before

    wait_until(generation_stopped)
    generated = len(model.kv_tokens) - len(model.chat_tokens(body["messages"]))
    assert generated < 900 // 2, "the job ran on after the client left"
    # The model is free for the next job.
    follow_up = httpx.post(server.url + "/chat/completions", json=chat_body(), timeout=600)
    assert follow_up.status_code == 200 and follow_up.json()["choices"][0]["finish_reason"] == "length"


def test_a_gui_chat_and_four_http_streams_share_the_model(server: ApiServer, engine: Engine) -> None:
    questions = ["Name a color.", "Name an animal.", "Name a fruit.", "Name a country."]
    chat_question = "Name a planet."
    tokens = 6
    # One at a time first: what each prompt answers at temperature 0.
    expected = {}
    for question in [*questions, chat_question]:
        reply = httpx.post(server.url + "/chat/completions", json=chat_body(question, max_tokens=tokens), timeout=600)
        expected[question] = reply.json()["choices"][0]["message"]["content"]
    assert len(set(expected.values())) > 1

    # Then all together: the GUI's way (a stored conversation) and four HTTP streams.
    results: dict[str, tuple[str, str | None]] = {}
    threads = [
        threading.Thread(target=lambda q=q: results.__setitem__(q, stream_text(server.url, chat_body(q, max_tokens=tokens))))
        for q in questions
    ]
    conversation = engine.chats.new_conversation(model_id=STARTER)
    turn = engine.chats.send(conversation.id, chat_question, temperature=0, max_tokens=tokens)
    for thread in threads:
        thread.start()
    message = turn.wait()
    for thread in threads:
        thread.join(600)

    # Decoded in one batch, each answer agrees with its lone self to rounding (see
    # tests/integration/test_batching.py): the same first token; a near-tie later may differ.
    assert message is not None and message.status == "complete"
    assert message.content.split()[0] == expected[chat_question].split()[0]
    for question in questions:
        text, reason = results[question]
        assert text.split()[0] == expected[question].split()[0], question
        assert reason == "length"
    stored = engine.store.messages(conversation.id)
    assert [m.role for m in stored] == ["user", "assistant"]


def test_stop_ends_streams_cleanly(engine: Engine) -> None:
    server = ApiServer(engine, port=0)
    server.start()
    lines: list[str] = []
    first_chunk = threading.Event()

    def read() -> None:
        body = chat_body("Write a very long story about a dragon.", max_tokens=900, stream=True)
        with httpx.stream("POST", server.url + "/chat/completions", json=body, timeout=600) as response:
            for line in response.iter_lines():
                lines.append(line)
                if '"content"' in line:
                    first_chunk.set()

    reader = threading.Thread(target=read)
    reader.start()
    assert first_chunk.wait(600)
    server.stop(timeout=30)
    reader.join(60)
    assert not reader.is_alive()
    events = [line for line in lines if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    last = json.loads(events[-2].removeprefix("data: "))
    assert last["choices"][0]["finish_reason"] == "length"  # cut short, and said so


def test_default_token_cap_applies_when_the_client_sets_none(engine: Engine) -> None:
    server = ApiServer(engine, port=0, default_max_tokens=3)
    server.start()
    try:
        body = chat_body("Write a long story.")
        del body["max_tokens"]
        reply = httpx.post(server.url + "/chat/completions", json=body, timeout=600).json()
        assert reply["choices"][0]["finish_reason"] == "length"
        assert reply["usage"]["completion_tokens"] == 3
        text, reason = stream_text(server.url, body)
        assert (text, reason) == (reply["choices"][0]["message"]["content"], "length")
        assert server.active_requests == 0
    finally:
        server.stop()


def test_n_choices_stream_side_by_side(server: ApiServer) -> None:
    """n=3 choices are decoded in one batch, so their chunks interleave in the stream."""
    body = {**chat_body("Write a short poem about the sea."), "n": 3, "temperature": 0.9, "seed": 7,
            "max_tokens": 40, "stream": True}
    with httpx.stream("POST", server.url + "/chat/completions", json=body, timeout=600) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    order, texts, reasons = [], {0: "", 1: "", 2: ""}, {}
    for line in lines:
        choice = json.loads(line.removeprefix("data: "))["choices"][0]
        content = choice["delta"].get("content")
        if content:
            order.append(choice["index"])
            texts[choice["index"]] += content
        if choice["finish_reason"]:
            reasons[choice["index"]] = choice["finish_reason"]
    assert set(reasons) == {0, 1, 2} and all(texts.values())
    first_of_last = order.index(2)
    last_of_first = len(order) - 1 - order[::-1].index(0)
    assert first_of_last < last_of_first, order  # not one choice after another

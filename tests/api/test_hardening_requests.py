"""Issue 14, the request layer: one request must never crash, wedge or starve the server.

Each test reproduces a finding of the adversarial pass against the real server and the
real starter model, then checks the server still answers afterwards.
"""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.text.chat_template import ChatTemplate

from .conftest import STARTER, chat_body, serving
from .test_errors_security import assert_error, post

pytestmark = pytest.mark.api

# A template loop that never ends in practice (10^10 iterations), without ranges or output.
ENDLESS_TEMPLATE = "{% for a in messages * 100000 %}{% for b in messages * 100000 %}{% endfor %}{% endfor %}x"


def health(server: ApiServer) -> httpx.Response:
    return httpx.get(server.url.removesuffix("/v1") + "/health", timeout=60)


def still_answers(server: ApiServer) -> None:
    response = post(server, "/chat/completions", json=chat_body())
    assert response.status_code == 200, response.text


@pytest.fixture
def loaded(engine: Engine) -> Engine:
    """The engine with the starter model resident (so tests can reach its chat template)."""
    engine.scheduler.submit(GenerateJob(model_id=STARTER, text="Hi", sampling=SamplingParams(max_tokens=1))).result()
    return engine


@pytest.fixture
def swapped_template(loaded: Engine) -> Iterator[callable]:
    """Give the resident model another chat template, as a hostile GGUF would; restored after."""
    model = loaded.scheduler.loaded_models()[0]
    original = model.chat_template

    def swap(source: str, time_limit_s: float = 600.0) -> None:
        model.context.chat_template = ChatTemplate(source, original.bos_token, original.eos_token, time_limit_s=time_limit_s)

    yield swap
    model.context.chat_template = original


# -- item 6: bad text and deep nesting are 400s -------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "hi \\ud800"}], "max_tokens": 2}', "messages"),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "stop": ["\\udfff"], "max_tokens": 2}', "stop"),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "user": "\\ud83d"}', "user"),
        ("/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "\\ud800": 1}', None),
        ("/completions", b'{"prompt": "hi \\ud800", "max_tokens": 2}', "prompt"),
        ("/embeddings", b'{"input": ["fine", "hi \\ud800"]}', "input"),
    ],
)
def test_lone_surrogates_are_400(server: ApiServer, path: str, body: bytes, param: str | None) -> None:
    response = post(server, path, content=body, headers={"content-type": "application/json"})
    error = assert_error(response, 400, code="invalid_value")
    assert error["param"] == param
    assert "surrogate" in error["message"]
    # A real (paired) surrogate escape is just an emoji and works.
    emoji = b'{"messages": [{"role": "user", "content": "hi \\ud83d\\ude00"}], "max_tokens": 2}'
    assert post(server, "/chat/completions", content=emoji, headers={"content-type": "application/json"}).status_code == 200


@pytest.mark.parametrize("depth", [101, 5000, 100_000])
def test_deep_nesting_is_400(server: ApiServer, depth: int) -> None:
    body = '{"messages": [{"role": "user", "content": "hi"}], "metadata": ' + "[" * depth + "]" * depth + "}"
    response = post(server, "/chat/completions", content=body.encode(), headers={"content-type": "application/json"})
    assert_error(response, 400, code="invalid_json")
    still_answers(server)


# -- item 5: no local paths in error bodies -------------------------------------------------


def test_a_model_under_a_folder_with_spaces_does_not_leak_its_path(engine: Engine, smollm2_path: Path,
                                                                    tmp_path: Path) -> None:
    folder = tmp_path / "John Smith" / "my models"
    folder.mkdir(parents=True)
    copy = folder / "private notes.gguf"
    shutil.copyfile(smollm2_path, copy)
    with copy.open("ab") as f:
        f.write(b"\0" * 64)  # other content: its own record, not the starter's
    record = engine.registry.register_file(copy)
    copy.unlink()  # the file goes away: loading it fails with the engine's own message
    with serving(engine) as server:
        response = post(server, "/chat/completions", json={**chat_body(), "model": record.id})
        assert response.status_code >= 400
        error = response.json()["error"]
        for secret in ("John", "Smith", "my models", "private notes", str(tmp_path)):
            assert secret not in response.text, error
        still_answers(server)


# -- item 9: what can never be served is a 400, not "retry later" ------------------------


def test_an_unservable_request_is_400_with_the_limit(server: ApiServer, engine: Engine) -> None:
    body = {"model": STARTER, "prompt": ["Once upon a time"] * 64, "n": 16, "max_tokens": 1}
    response = post(server, "/completions", json=body)
    error = assert_error(response, 400, param="n")
    assert "retry-after" not in response.headers
    assert str(engine.scheduler.max_queue) in error["message"] and "1024" in error["message"]
    assert post(server, "/completions", json={**body, "prompt": ["Once upon a time"] * 4, "n": 2}).status_code == 200


# -- also weak: the context error names the route's own prompt field ------------------------


def test_context_errors_name_the_prompt_field_of_their_route(server: ApiServer) -> None:
    long_text = "word " * 1500
    assert_error(post(server, "/chat/completions", json=chat_body(long_text)), 400, "messages", "context_length_exceeded")
    assert_error(post(server, "/completions", json={"prompt": long_text, "max_tokens": 2}), 400, "prompt",
                 "context_length_exceeded")
    assert_error(post(server, "/embeddings", json={"input": long_text}), 400, "input", "context_length_exceeded")


# -- item 3: a huge conversation is refused early, and stays cheap --------------------------


def test_fifty_thousand_messages_are_refused_without_tokenizing_them_all(server: ApiServer) -> None:
    messages = [{"role": "user", "content": "a"} for _ in range(50_000)]
    response = post(server, "/chat/completions", json={"model": STARTER, "messages": messages, "max_tokens": 2})
    error = assert_error(response, 400, "messages", "context_length_exceeded")
    # The whole prompt holds about 300,000 tokens; the check stopped within a piece of the
    # 1024-token context instead of tokenizing (quadratically) all of it first.
    counted = int(error["message"].split("at least ")[1].split()[0])
    assert 1024 < counted < 20_000
    still_answers(server)


# -- item 7: hostile chat templates ---------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'A' * 3000000000 }}",
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
        "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        "{{ messages[0]['content'] | center(3000000000) }}",
    ],
)
def test_hostile_templates_fail_the_request_not_the_server(server: ApiServer, swapped_template: callable,
                                                           source: str) -> None:
    swapped_template(source)
    error = assert_error(post(server, "/chat/completions", json=chat_body()), 400)
    assert "chat template" in error["message"]


def test_an_endless_template_is_stopped_by_its_time_limit(server: ApiServer, swapped_template: callable) -> None:
    swapped_template(ENDLESS_TEMPLATE, time_limit_s=1.0)
    error = assert_error(post(server, "/chat/completions", json=chat_body()), 400)
    assert "did not finish" in error["message"]


def test_a_request_cancelled_while_its_prompt_is_prepared_ends_and_frees_the_engine(
    loaded: Engine, swapped_template: callable
) -> None:
    swapped_template(ENDLESS_TEMPLATE)  # only the cancel can end this render
    scheduler = loaded.scheduler
    handle = scheduler.submit(GenerateJob(model_id=STARTER, messages=[{"role": "user", "content": "hi"}]))
    wait_until_busy(scheduler)
    handle.cancel()
    events = list(handle.events())
    assert isinstance(events[-1], Finished) and events[-1].finish_reason == "cancelled"
    assert not any(isinstance(e, Chunk) for e in events)


# -- item 2: /health tells a stuck engine -------------------------------------------------


def wait_until_busy(scheduler) -> None:
    ready = threading.Event()
    for _ in range(6000):
        beat = scheduler.heartbeat()
        if beat is not None and "answering" in beat.doing:
            return
        ready.wait(0.05)
    raise AssertionError("the scheduler never started the job")


def test_health_reports_an_engine_stuck_in_one_step(loaded: Engine, swapped_template: callable) -> None:
    with serving(loaded, stuck_after_s=0.0) as server:
        assert health(server).status_code == 200  # idle is never stuck
        swapped_template(ENDLESS_TEMPLATE)
        handle = loaded.scheduler.submit(GenerateJob(model_id=STARTER, messages=[{"role": "user", "content": "hi"}]))
        try:
            wait_until_busy(loaded.scheduler)
            response = health(server)
            assert response.status_code == 503
            body = response.json()
            assert body["status"] == "stuck" and "answering" in body["doing"] and body["busy_for_s"] >= 0
        finally:
            handle.cancel()
        list(handle.events())
        assert health(server).json()["status"] == "ok"


# -- also weak: idle and slow connections are closed, and their number is capped ----------


def read_all(sock: socket.socket) -> bytes:
    sock.settimeout(120)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def connect(server: ApiServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=120)


def test_idle_and_slow_connections_are_closed(engine: Engine) -> None:
    with serving(engine, read_timeout_s=1.0) as server:
        with connect(server) as idle:  # never sends a byte
            assert b" 408 " in read_all(idle).split(b"\r\n")[0]
        with connect(server) as slow:  # headers that never end
            slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n")
            assert b" 408 " in read_all(slow).split(b"\r\n")[0]
        with connect(server) as slow_body:  # a body that never arrives whole
            slow_body.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"mess")
            read_all(slow_body)  # the server hangs up rather than waiting for ever
        still_answers(server)


def test_connections_beyond_the_cap_are_refused_with_503(engine: Engine) -> None:
    with serving(engine, max_connections=3) as server:
        held = [connect(server) for _ in range(3)]
        try:
            with connect(server) as extra:
                reply = read_all(extra)
            assert reply.startswith(b"HTTP/1.1 503")
            assert b'"too_many_connections"' in reply
        finally:
            for sock in held:
                sock.close()
        pause = threading.Event()
        for _ in range(600):  # the server notices the closed ones as their events arrive
            try:
                response = post(server, "/chat/completions", json=chat_body())
                if response.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            pause.wait(0.1)
        else:
            raise AssertionError("the server did not accept connections again")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/messages", b'{"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi \\ud800"}]}'),
        ("/messages", b'{"model": "m", "max_tokens": 2, "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
        ("/responses", b'{"model": "m", "input": "hi \\ud800"}'),
        ("/responses", b'{"model": "m", "input": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
    ],
)
def test_the_newer_apis_refuse_bad_text_and_deep_nesting_too(server: ApiServer, path: str, body: bytes) -> None:
    response = post(server, path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert "error" in response.json()
    still_answers(server)

"""Remote engines against real servers on loopback: a second Inglenook, llama-server from the
same build, and small real HTTP servers that misbehave (an HTML page, malformed JSON, silence)."""

from __future__ import annotations

import contextlib
import http.server
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.api.shared.keys import ApiKeys
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.remote.remote import RemoteEndpoint, RemoteEngine, RemoteEngineError
from tests.llama_server import running_llama_server

from tests.second_server import REMOTE_KEY, second_inglenook

pytestmark = pytest.mark.integration

STARTER = "smollm2-135m-instruct:q4_1"


@pytest.fixture
def remote(tmp_path: Path, smollm2_path: Path) -> Iterator[ApiServer]:
    with second_inglenook(tmp_path / "remote-home") as server:
        yield server


@pytest.fixture
def local(home: Path, smollm2_path: Path) -> Iterator[Engine]:  # `home` isolates it
    engine = Engine()
    engine.update_settings(context_size=1024)
    yield engine
    engine.close()


def greedy_turn(engine: Engine, model_id: str, text: str = "Name three colours.") -> tuple[str, object]:
    conversation = engine.chats.new_conversation(model_id=model_id, sampling={"temperature": 0, "max_tokens": 24})
    turn = engine.chats.send(conversation.id, text)
    message = turn.wait()
    return turn.text, message


def test_remote_models_chat_stop_and_regenerate_like_local_ones(
    local: Engine, remote: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    catalogue = local.chats.remotes
    with caplog.at_level(logging.WARNING):
        where = catalogue.add("office", remote.url, REMOTE_KEY)
    assert where == "store"  # no keyring backend on this machine: kept in the settings, and said so
    assert "no system keyring" in caplog.text
    records = catalogue.records()
    assert f"office/{STARTER}" in [r.id for r in records]
    assert all(r.source == "remote:office" for r in records)

    remote_text, message = greedy_turn(local, f"office/{STARTER}")
    local_text, _ = greedy_turn(local, STARTER)
    assert remote_text and remote_text == local_text  # the same model, greedy: the same words
    assert message.status == "complete" and message.model_id == f"office/{STARTER}"
    assert message.completion_tokens > 0 and message.ttft_ms > 0

    conversation = message.conversation_id
    again = local.chats.regenerate(conversation)
    assert again.wait().content == remote_text  # regenerate replaced the answer with the same one
    assert [m.role for m in local.store.messages(conversation)] == ["user", "assistant"]

    local.chats.update_chat_settings(conversation, None, {"temperature": 0, "max_tokens": 400})
    turn = local.chats.send(conversation, "Now write a long poem about the sea.")
    pieces = iter(turn)
    next(pieces)
    turn.cancel()  # Stop: the stream ends quickly and what arrived is kept, marked partial
    list(pieces)
    assert turn.message is not None and turn.message.status == "partial" and turn.message.content

    catalogue.remove("office")
    assert catalogue.records() == []


@pytest.mark.parametrize(
    ("key", "expected"),
    [("wrong-key", "refused the API key"), (None, "refused the API key")],
)
def test_a_bad_key_is_a_clear_message(remote: ApiServer, key: str | None, expected: str) -> None:
    engine = RemoteEngine(RemoteEndpoint("office", remote.url, key))
    with pytest.raises(RemoteEngineError, match=expected):
        engine.model_ids()
    with pytest.raises(RemoteEngineError, match=expected):
        list(engine.chat(STARTER, [{"role": "user", "content": "Hi"}], SamplingParams()).events())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listening_is_a_clear_message() -> None:
    engine = RemoteEngine(RemoteEndpoint("gone", f"http://127.0.0.1:{free_port()}/v1"))
    with pytest.raises(RemoteEngineError, match="cannot connect"):
        engine.model_ids()


class _Misbehaving(http.server.BaseHTTPRequestHandler):
    """Answers as a broken proxy or server would, chosen by the path's first part."""

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._answer()

    def _answer(self) -> None:
        kind = self.path.strip("/").split("/")[0]
        if kind == "silent":
            time.sleep(5)  # longer than the client's read timeout
            return
        if kind == "html":
            self._send(502, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>")
        elif kind == "badjson":
            body = b"data: {\"choices\": [{\"delta\": {\"content\": \"Hel\"}}]}\n\ndata: {oops\n\n"
            self._send(200, "text/event-stream", body)
        elif kind == "cut":
            body = b"data: {\"choices\": [{\"delta\": {\"content\": \"Hel\"}}]}\n\n"
            self._send(200, "text/event-stream", body)

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def misbehaving() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Misbehaving)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("html", "web page .*ends in /v1"), ("badjson", "malformed event"), ("cut", "ended before it was complete"),
     ("silent", "did not answer in time")],
)
def test_a_misbehaving_remote_is_a_clear_message_never_a_hang(misbehaving: str, kind: str, expected: str) -> None:
    engine = RemoteEngine(RemoteEndpoint("odd", f"{misbehaving}/{kind}/v1"), read_timeout_s=1.0)
    answer = engine.chat("m", [{"role": "user", "content": "Hi"}], SamplingParams())
    started = time.monotonic()
    with pytest.raises(RemoteEngineError, match=expected):
        list(answer.events())
    assert time.monotonic() - started < 4.0  # the silent one gives up at its read timeout, not the server's 5 s


def test_a_failed_remote_answer_is_saved_as_an_error_and_the_message_says_why(local: Engine, misbehaving: str) -> None:
    local.chats.remotes.add("odd", f"{misbehaving}/html/v1")
    conversation = local.chats.new_conversation(model_id="odd/m")
    turn = local.chats.send(conversation.id, "Hi")
    with pytest.raises(RemoteEngineError, match="web page"):
        turn.wait()
    assert [m.role for m in local.store.messages(conversation.id)] == ["user"]  # the question is kept


def test_the_local_api_routes_remote_model_names_through_its_own_gate(local: Engine, remote: ApiServer,
                                                                      misbehaving: str) -> None:
    local.chats.remotes.add("office", remote.url, REMOTE_KEY)
    local.chats.remotes.add("odd", f"{misbehaving}/html/v1")
    keys = ApiKeys(local.store)
    _, key = keys.create("team")
    with contextlib.closing(_serving(local, keys)) as server:
        client = openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=120)
        body = {"messages": [{"role": "user", "content": "Name three colours."}], "temperature": 0, "max_tokens": 24}
        proxied = client.chat.completions.create(model=f"office/{STARTER}", **body).choices[0].message.content
        direct = openai.OpenAI(base_url=remote.url, api_key=REMOTE_KEY, max_retries=0, timeout=120)
        assert proxied == direct.chat.completions.create(model=STARTER, **body).choices[0].message.content
        streamed = client.chat.completions.create(model=f"office/{STARTER}", stream=True, **body)
        assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == proxied
        # The gate still holds: no key, no answer, and the remote's key is never needed by clients.
        refused = httpx.post(server.url + "/chat/completions", json={"model": f"office/{STARTER}", **body})
        assert refused.status_code == 401
        with pytest.raises(openai.APIStatusError) as failed:
            client.chat.completions.create(model="odd/m", **body)
        assert failed.value.status_code == 502 and "web page" in failed.value.message


class _Server:
    def __init__(self, server: ApiServer) -> None:
        self.server = server
        self.url = server.url

    def close(self) -> None:
        self.server.stop()


def _serving(engine: Engine, keys: ApiKeys) -> _Server:
    server = ApiServer(engine, port=0, keys=keys)
    server.start()
    return _Server(server)


@pytest.fixture
def llama_server(smollm2_path: Path) -> Iterator[str]:
    """llama-server from the same build, if it was built (scripts/llama_build.py llama-server)."""
    with running_llama_server(smollm2_path, "--alias", "smollm2") as url:
        yield url


def test_llama_server_is_a_remote_engine_too(local: Engine, llama_server: str) -> None:
    local.chats.remotes.add("llama", llama_server)
    assert "llama/smollm2" in [r.id for r in local.chats.remotes.records()]
    text, message = greedy_turn(local, "llama/smollm2")
    assert text and message.status == "complete"

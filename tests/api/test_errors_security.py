"""Error bodies, status codes and the server's defences, driven with raw httpx."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.errors import PortInUse, QueueFull, ServerError
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine

from .conftest import STARTER, chat_body, serving

pytestmark = pytest.mark.api


def post(server: ApiServer, path: str, **kwargs) -> httpx.Response:
    return httpx.post(server.url + path, timeout=300, **kwargs)


def assert_error(response: httpx.Response, status: int, param: str | None = None, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if param is not None:
        assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    return error


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"model": "x", "messages": [', None),  # malformed JSON
        (b'["not", "an", "object"]', None),
        (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "temperature"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": Infinity}', "temperature"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "top_p": 1.5}', "top_p"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -5}', "max_tokens"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}', "max_tokens"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "n": 0}', "n"),
        (b'{"messages": [{"role": "wizard", "content": "hi"}]}', "messages"),
        (b'{"messages": []}', "messages"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"abc": 1}}', "logit_bias"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 3}', "top_logprobs"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema"}}', "response_format"),
    ],
)
def test_bad_requests_are_400_before_any_work(server: ApiServer, body: bytes, param: str | None) -> None:
    response = post(server, "/chat/completions", content=body, headers={"content-type": "application/json"})
    error = assert_error(response, 400, param)
    assert error["type"] == "invalid_request_error"


def test_values_only_the_model_can_check_are_400_too(server: ApiServer) -> None:
    # Token ids outside the vocabulary, in a prompt and in logit_bias.
    assert_error(post(server, "/completions", json={"prompt": [1, 2, 10_000_000], "max_tokens": 2}), 400, "prompt")
    assert_error(post(server, "/completions", json={"prompt": [-1], "max_tokens": 2}), 400, "prompt")
    biased = chat_body(logit_bias={"10000000": 5})
    assert_error(post(server, "/chat/completions", json=biased), 400, "logit_bias")
    too_long = chat_body("word " * 1500)
    error = assert_error(post(server, "/chat/completions", json=too_long), 400, "messages", "context_length_exceeded")
    assert "1024" in error["message"]
    # A stream that cannot start is an HTTP error, not a broken stream.
    assert_error(post(server, "/chat/completions", json={**too_long, "stream": True}), 400, code="context_length_exceeded")
    # The server still works afterwards.
    assert post(server, "/chat/completions", json=chat_body()).status_code == 200


def test_unknown_fields_are_accepted(server: ApiServer) -> None:
    body = chat_body(some_future_option={"x": 1}, messages=[{"role": "user", "content": "hi", "audio": None}])
    response = post(server, "/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"]


def test_unknown_routes_and_models(engine: Engine) -> None:
    with serving(engine, strict_model_names=True) as server:
        assert_error(httpx.get(server.url + "/nothing-here"), 404)
        error = assert_error(
            post(server, "/chat/completions", json={**chat_body(), "model": "/home/someone/models/secret.gguf"}),
            404, code="model_not_found",
        )
        assert "/home" not in error["message"] and "secret" not in error["message"]
        assert_error(post(server, "/embeddings", json={"model": "gpt-4o", "input": "hi"}), 404, code="model_not_found")


def test_embedding_input_checks(server: ApiServer) -> None:
    assert_error(post(server, "/embeddings", json={"input": [[1, 2, 3]]}), 400, "input")
    assert_error(post(server, "/embeddings", json={"input": []}), 400, "input")
    assert_error(post(server, "/embeddings", json={"input": "hi", "dimensions": 3}), 400, "dimensions")


def test_body_size_limit_is_413(engine: Engine) -> None:
    with serving(engine, max_body_bytes=4096) as server:
        big = chat_body("x" * 10_000)
        assert_error(post(server, "/chat/completions", json=big), 413)

        def chunks():  # no Content-Length: the limit must hold while reading
            for _ in range(10):
                yield b"x" * 1000

        assert_error(post(server, "/chat/completions", content=chunks()), 413)
        assert post(server, "/chat/completions", json=chat_body()).status_code == 200


def test_queue_full_is_503_with_retry_after(server: ApiServer, engine: Engine) -> None:
    scheduler = engine.scheduler
    loading = threading.Event()
    release = threading.Event()

    def hold_the_load(_model_id: str, state: str, _detail: object) -> None:
        if state == "loading":  # called on the worker thread: it stays busy until released
            loading.set()
            release.wait(300)

    scheduler.add_listener(hold_the_load)
    handles = [scheduler.submit(GenerateJob(model_id=STARTER, text="Once upon a time", sampling=SamplingParams(max_tokens=1)))]
    try:
        assert loading.wait(300)
        with pytest.raises(QueueFull):
            while True:
                handles.append(scheduler.submit(GenerateJob(model_id=STARTER, text="Hi", sampling=SamplingParams(max_tokens=1))))
        response = post(server, "/chat/completions", json=chat_body())
        assert_error(response, 503, code="queue_full")
        assert int(response.headers["retry-after"]) >= 1
    finally:
        for handle in handles:
            handle.cancel()
        release.set()
        scheduler.remove_listener(hold_the_load)


def test_api_key(engine: Engine) -> None:
    with serving(engine, api_key="s3cret") as server:
        assert_error(httpx.get(server.url + "/models"), 401, code="invalid_api_key")
        assert_error(httpx.get(server.url + "/models", headers={"authorization": "Bearer s3cre"}), 401)
        assert_error(httpx.get(server.url + "/models", headers={"authorization": "Bearer s3cret-and-more"}), 401)
        assert httpx.get(server.url + "/models", headers={"authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.get(server.url + "/models", headers={"x-api-key": "s3cret"}).status_code == 200
        health = httpx.get(server.url.removesuffix("/v1") + "/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"


def test_host_header_must_be_loopback_or_allowed(engine: Engine) -> None:
    with serving(engine, allowed_hosts=["inglenook.lan"]) as server:
        url = server.url + "/models"
        assert_error(httpx.get(url, headers={"host": "evil.example.com"}), 403, code="forbidden_host")
        assert_error(httpx.get(url, headers={"host": f"attacker.test:{server.port}"}), 403)
        assert_error(httpx.get(url, headers={"host": "10.0.0.5"}), 403)  # loopback bind: loopback hosts only
        for host in ("localhost", f"localhost:{server.port}", f"127.0.0.1:{server.port}", "[::1]", "inglenook.lan"):
            assert httpx.get(url, headers={"host": host}).status_code == 200, host


def test_no_cors_unless_configured(server: ApiServer) -> None:
    url = server.url + "/models"
    response = httpx.get(url, headers={"origin": "http://evil.example.com"})
    assert_error(response, 403, code="forbidden_origin")
    assert "access-control-allow-origin" not in response.headers
    preflight = httpx.options(url, headers={"origin": "http://evil.example.com", "access-control-request-method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers
    # A browser page may not even POST blind (a "simple" request needs no preflight).
    blind = httpx.post(server.url + "/chat/completions", content=b"{}", headers={"origin": "http://evil.example.com", "content-type": "text/plain"})
    assert blind.status_code == 403
    assert httpx.get(url).status_code == 200  # no Origin: not a browser


def test_cors_for_configured_origins_only(engine: Engine) -> None:
    allowed = "http://localhost:3000"
    with serving(engine, cors_origins=[allowed]) as server:
        url = server.url + "/models"
        preflight = httpx.options(url, headers={
            "origin": allowed, "access-control-request-method": "POST", "access-control-request-headers": "authorization",
        })
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == allowed
        response = httpx.get(url, headers={"origin": allowed})
        assert response.status_code == 200 and response.headers["access-control-allow-origin"] == allowed
        other = httpx.get(url, headers={"origin": "http://evil.example.com"})
        assert other.status_code == 403 and "access-control-allow-origin" not in other.headers


def test_network_bind_needs_an_api_key(engine: Engine) -> None:
    with pytest.raises(ServerError, match="API key"):
        ApiServer(engine, host="0.0.0.0", port=0).start()
    with serving(engine, host="0.0.0.0", api_key="k") as server:
        assert server.url.startswith("http://127.0.0.1:")
        auth = {"authorization": "Bearer k"}
        assert httpx.get(server.url + "/models", headers={**auth, "host": "192.0.2.7"}).status_code == 200
        assert_error(httpx.get(server.url + "/models", headers={**auth, "host": "rebound.example.com"}), 403)


def test_port_in_use_is_a_typed_error(engine: Engine) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        server = ApiServer(engine, port=port)
        with pytest.raises(PortInUse):
            server.start()
        assert not server.running


def test_start_stop_and_url(engine: Engine) -> None:
    server = ApiServer.from_settings(engine, port=0)
    assert not server.running
    server.start()
    try:
        assert server.running and server.url == f"http://127.0.0.1:{server.port}/v1"
        assert httpx.get(server.url.removesuffix("/v1") + "/health").json()["status"] == "ok"
    finally:
        server.stop()
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/models")


def test_engine_failures_never_carry_local_detail_to_the_client() -> None:
    from inglenook.engine.api.shared.errors import error_for
    from inglenook.engine.base.errors import InglenookError, ModelLoadError, StoreError

    secret = "/home/John Smith/my models/private notes.gguf"
    for exc in (ModelLoadError(f"model file not found: {secret}"), StoreError(f"cannot open {secret}"),
                InglenookError(f"internal error near {secret}")):
        error = error_for(exc)
        assert error.status == 500 and error.code == exc.code
        assert "John" not in error.message and "Smith" not in error.message and "notes" not in error.message

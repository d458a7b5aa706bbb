"""The local OpenAI-compatible HTTP API: FastAPI on uvicorn, in a thread of this process.

A thin translation layer. Handlers parse a request model, turn it into scheduler jobs
(``api/shared/requests``), wait for them without blocking the event loop (``api/shared/runs``) and write
OpenAI's response shapes (``api/shared/responses``). Errors of every kind become OpenAI error
bodies in ``api/shared/errors``; the Host, Origin, body-size and API-key checks are in
``api/shared/security``.

Why one file of ~400 lines: it is the route table, every endpoint's thin handler in one
place, so what the API serves can be read top to bottom; the work is in the families'
packages (``api/openai``, ``api/responses``, ``api/anthropic``) and ``api/shared``.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..base import (
    EmbedJob, EmbeddingData, EmbeddingList, EmbeddingRequest, EmbeddingUsage, InglenookError, InvalidRequest,
    ModelNotFound, PortInUse, ServerError,
)
from ..remote import RemoteCatalogue
from .anthropic import messages_router
from .audio_routes import audio_router, speech_card, speech_cards
from .lora_routes import lora_router
from .openai import CHAT_COMPLETIONS, COMPLETIONS, ModelCatalogue, TextEndpoint, TextRequestT
from .remote_proxy import RemoteProxy
from .responses import responses_router
from .shared import (
    DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT_S, DEFAULT_STUCK_AFTER_S, ApiEngine, ApiError, ApiKeys,
    ApiService, Gate, KeyTraffic, Meta, ModelNames, anthropic_error_response, cancelled_on_disconnect, error_body,
    error_for, event_stream, guarded_h11, is_loopback_host, is_messages_path, read_request, run_plan,
)
from .tls import TlsFiles
from .usage_routes import usage_router

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 2048  # when a client sends no max_tokens; the context bounds it further
MAX_EMBEDDING_INPUTS = 256


def create_app(service: ApiService) -> FastAPI:
    """The app every family's routes are mounted on, in the order they are matched."""
    app = FastAPI(title="Inglenook", docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    _add_error_handlers(app)
    app.include_router(messages_router(service))
    _add_health(app, service)
    _add_model_routes(app, service)
    _add_text_routes(app, service)
    _add_embeddings(app, service)
    app.include_router(responses_router(service))  # /v1/responses
    app.include_router(usage_router(service))  # /v1/usage
    app.include_router(lora_router(service))  # /lora-adapters
    app.include_router(audio_router(service))  # /v1/audio/*
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error in the shape of the API it was asked through."""

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        if is_messages_path(request.url.path):  # the Anthropic Messages API has its own error shape
            return anthropic_error_response(exc)
        if isinstance(exc, RequestValidationError):
            exc = ApiError(400, f"invalid request: {exc.errors()[0].get('msg', 'invalid value')}", code="invalid_value")
        elif isinstance(exc, StarletteHTTPException):
            exc = ApiError(exc.status_code, str(exc.detail), code="not_found" if exc.status_code == 404 else None)
        error = error_for(exc, getattr(request.state, "prompt_param", "messages"))
        return JSONResponse(error_body(error), status_code=error.status, headers=error.headers)

    for kind in (ApiError, InglenookError, ValidationError, RequestValidationError, StarletteHTTPException, Exception):
        app.add_exception_handler(kind, on_error)


def _add_health(app: FastAPI, service: ApiService) -> None:
    """/health: ok, shutting down, or stuck in one unit of work (503 either way)."""
    engine = service.engine

    @app.get("/health")
    async def health() -> JSONResponse:
        if service.closing:
            return JSONResponse({"status": "shutting_down"}, status_code=503)
        now = engine.health()
        body: dict[str, Any] = {"status": "ok", "loaded_models": now.loaded_models, "loading_models": now.loading_models,
                                "queue_depth": now.queue_depth}
        if now.busy_s is not None and now.busy_s > service.stuck_after_s:
            # A wedged step holds every later request: say so, so a supervisor can act.
            body.update(status="stuck", busy_for_s=round(now.busy_s, 1), doing=now.doing)
            return JSONResponse(body, status_code=503)
        return JSONResponse(body)


def _add_model_routes(app: FastAPI, service: ApiService) -> None:
    """/v1/models: the installed models' cards, and the routing alias when there is one."""
    names = service.names
    catalogue = ModelCatalogue(service.engine)  # model_cards.py: the fields, aliases, unusable models

    def model_cards() -> list[dict[str, Any]]:
        cards = catalogue.list_cards() + speech_cards(service.engine)
        route = names.router.targets()  # the routing alias "auto", when it has two models to choose from
        if route is not None:
            cards.append(route.card(catalogue.card(route.large)))
        return cards

    @app.get("/v1/models")
    async def list_models() -> dict:
        return {"object": "list", "data": await anyio.to_thread.run_sync(model_cards)}

    def model_card(model_id: str) -> dict[str, Any]:
        try:
            return catalogue.card(model_id)
        except ModelNotFound:
            # A speech model's id (whisper-tiny.en, a voice) or OpenAI's name for one (whisper-1):
            # its card; anything else, 404 as before.
            found = speech_card(service.engine, model_id)
            if found is None:
                raise
            return found

    @app.get("/v1/models/{model_id:path}")
    async def retrieve_model(model_id: str) -> dict:
        return await anyio.to_thread.run_sync(model_card, model_id)


def _add_text_routes(app: FastAPI, service: ApiService) -> None:
    """/v1/chat/completions and /v1/completions, through one handler."""
    names = service.names

    async def generate(request: Request, endpoint: TextEndpoint[TextRequestT]) -> Any:
        """The one handler of /v1/chat/completions and /v1/completions."""
        service.ensure_open()
        request.state.prompt_param = endpoint.prompt_param
        body = await read_request(request, endpoint.request)
        plan = await anyio.to_thread.run_sync(endpoint.plan, body, names)
        runs = await run_plan(request, service, plan, body.stream)
        meta = Meta.new(endpoint.id_prefix, plan)
        if body.stream:
            usage = bool(body.stream_options and body.stream_options.include_usage)
            return event_stream(endpoint.stream(plan, runs, meta, usage, body))
        return endpoint.whole(plan, runs, meta, body).model_dump(mode="json")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await generate(request, CHAT_COMPLETIONS)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await generate(request, COMPLETIONS)


def _add_embeddings(app: FastAPI, service: ApiService) -> None:
    """/v1/embeddings: one embedding job per request, stopped if the client goes away."""
    engine, names = service.engine, service.names

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        service.ensure_open()
        request.state.prompt_param = "input"
        body = await read_request(request, EmbeddingRequest)
        inputs = embedding_inputs(body.input)
        record = await anyio.to_thread.run_sync(names.resolve, body.model)
        [handle] = engine.submit_many([EmbedJob(model_id=record.id, inputs=inputs)])
        try:
            async with cancelled_on_disconnect(request, [handle]):
                result = await anyio.to_thread.run_sync(
                    handle.embeddings, limiter=service.limiter, abandon_on_cancel=True
                )
        finally:
            handle.cancel()  # no-op once done; stops the job if this request went away
        if body.dimensions is not None and result.vectors and body.dimensions != len(result.vectors[0]):
            raise InvalidRequest(f"this model makes {len(result.vectors[0])}-dimensional embeddings", param="dimensions")
        data = [
            EmbeddingData(index=i, embedding=_encode(v, body.encoding_format)) for i, v in enumerate(result.vectors)
        ]
        usage = EmbeddingUsage(prompt_tokens=result.prompt_tokens, total_tokens=result.prompt_tokens)
        return EmbeddingList(data=data, model=result.model_id, usage=usage).model_dump()


def embedding_inputs(value: str | list[str] | list[int] | list[list[int]]) -> list[str]:
    inputs = [value] if isinstance(value, str) else list(value)
    if not inputs or len(inputs) > MAX_EMBEDDING_INPUTS:
        raise InvalidRequest(f"input must hold between 1 and {MAX_EMBEDDING_INPUTS} texts", param="input")
    texts = [i for i in inputs if isinstance(i, str)]
    if len(texts) != len(inputs):
        raise InvalidRequest("embedding inputs must be text; token ids are not supported", param="input")
    if any(not i for i in texts):
        raise InvalidRequest("an embedding input is empty", param="input")
    return texts


def _encode(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector


# -- the server thread --------------------------------------------------------------------


class ApiServer:
    """Runs the API on ``host:port`` in a background thread until ``stop()``.

    ``port=0`` picks a free port (tests); ``url`` then tells which one.
    """

    def __init__(
        self,
        engine: ApiEngine,
        host: str = "127.0.0.1",
        port: int = 8484,
        api_key: str | None = None,
        cors_origins: Sequence[str] = (),
        allowed_hosts: Sequence[str] = (),
        strict_model_names: bool = False,
        *,
        default_model: str | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        max_body_bytes: int = 16 * 1024 * 1024,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        stuck_after_s: float = DEFAULT_STUCK_AFTER_S,
        keys: ApiKeys | None = None,
        tls: TlsFiles | None = None,
        route_all: Any = None,
    ) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self.api_key = api_key or None
        self.cors_origins = list(cors_origins)
        self.allowed_hosts = list(allowed_hosts)
        self.strict_model_names = strict_model_names
        self.default_model = default_model
        self.default_max_tokens = default_max_tokens
        self.max_body_bytes = max_body_bytes
        self.read_timeout_s = read_timeout_s
        self.max_connections = max_connections
        self.stuck_after_s = stuck_after_s
        self.keys = keys  # named keys (a team's server); None: only api_key, if set
        self.traffic = KeyTraffic()  # per-key windows and open streams
        self.tls = tls
        self.route_all = route_all  # serve --rpc: a callable giving the split engine every request goes to
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._service: ApiService | None = None
        self._failure: BaseException | None = None

    @classmethod
    def from_settings(cls, engine: ApiEngine, **overrides: Any) -> "ApiServer":
        s = engine.settings
        values: dict[str, Any] = {
            "host": s.api_host, "port": s.api_port, "api_key": s.api_key, "cors_origins": s.cors_origins,
            "allowed_hosts": s.allowed_hosts, "strict_model_names": s.strict_model_names,
            "keys": ApiKeys.of(engine), "tls": TlsFiles.from_paths(s.tls_cert, s.tls_key),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(engine, **values)

    @property
    def url(self) -> str:
        host = self.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}/v1"

    @property
    def active_requests(self) -> int:
        """Generations in flight (for a status line)."""
        return len(self._service.runs) if self._service is not None else 0

    def active_streams_by_key(self) -> dict[str, int]:
        """Named key -> generations in flight now (who is using the box)."""
        return self.traffic.active_streams()

    @property
    def running(self) -> bool:
        server = self._server
        return bool(self._thread and self._thread.is_alive() and server and server.started and not server.should_exit)

    def build_app(self) -> Any:
        """The ASGI application, gate included (also usable with any ASGI server)."""
        names = ModelNames(self.engine, self.strict_model_names, self.default_model)
        self._service = ApiService(self.engine, names, self.default_max_tokens, self.stuck_after_s)
        # Requests naming "<engine>/<model>" go to that remote engine, behind the same gate.
        app: Any = RemoteProxy(create_app(self._service), RemoteCatalogue(self.engine.store), self.route_all)
        app = Gate(
            app, self.api_key, self.allowed_hosts, self.cors_origins,
            any_ip_host=not is_loopback_host(self.host), max_body_bytes=self.max_body_bytes,
            keys=self.keys, traffic=self.traffic, resolve_model=_resolver(names),
            require_key=not is_loopback_host(self.host),
        )
        if self.cors_origins:
            from starlette.middleware.cors import CORSMiddleware  # noqa: PLC0415

            app = CORSMiddleware(
                app, allow_origins=self.cors_origins, allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["authorization", "content-type", "x-api-key", "openai-organization", "openai-project"],
                max_age=600,
            )
        return app

    def start(self) -> None:
        """Bind, start serving in a thread, and return once the server accepts connections."""
        if self.running:
            return
        if not is_loopback_host(self.host) and not self.api_key and not (self.keys and self.keys.any_active()):
            raise ServerError(
                f"refusing to listen on {self.host}, which other machines can reach, without an API key; "
                "set one (--api-key, or `inglenook keys create NAME`) or listen on 127.0.0.1"
            )
        if self.tls is not None:
            self.tls.check()
        import uvicorn  # noqa: PLC0415 — only the server needs it

        self._socket = self._bind()
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            self.build_app(), log_config=None, access_log=False, lifespan="off",
            http=guarded_h11(self.read_timeout_s, self.max_connections),
            timeout_graceful_shutdown=5, timeout_keep_alive=5,
            ssl_certfile=str(self.tls.cert) if self.tls else None, ssl_keyfile=str(self.tls.key) if self.tls else None,
        )
        self._server = uvicorn.Server(config)
        self._failure = None
        self._thread = threading.Thread(target=self._serve, name="inglenook-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._close_socket()
                raise ServerError(f"the API server did not start: {self._failure or 'timed out'}")
            time.sleep(0.01)
        log.info("API server listening on %s", self.url)

    def _bind(self) -> socket.socket:
        host = self.host.strip("[]")
        family = socket.AF_INET6 if _is_ipv6(host) else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        if hasattr(socket, "SO_EXCLUSIVEADDRUSE"):  # Windows: no other process may share the port
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, self.port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1)):
                raise PortInUse(
                    f"port {self.port} on {self.host} is already in use; choose another with --port",
                    host=self.host, port=self.port,
                ) from None
            raise ServerError(f"cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
        sock.setblocking(False)
        return sock

    def _serve(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        except BaseException as exc:  # reported by start() or logged
            self._failure = exc
            log.exception("the API server stopped with an error")

    def stop(self, timeout: float = 5.0) -> None:
        """End in-flight generations (streams finish cleanly), then stop listening."""
        if self._server is None:
            return
        if self._service is not None:
            self._service.closing = True
            self._service.cancel_all()
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("API server did not stop within %.1fs; closing connections", timeout)
                self._server.force_exit = True
                self._thread.join(2.0)
        self._close_socket()
        self._server = None
        self._thread = None
        log.info("API server stopped")

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> "ApiServer":
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _resolver(names: ModelNames) -> Any:
    """The model id a request's name runs on, for keys limited to some models."""

    def resolve(name: str) -> list[str]:
        try:
            return [names.resolve(name).id]
        except InglenookError:
            return []

    return resolve


def _is_ipv6(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False

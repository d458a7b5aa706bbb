"""The API server's gate: Host and Origin checks, the body size limit, the API key.

A web page can reach a server on 127.0.0.1 in two ways, and both are closed here:
- DNS rebinding: the page's own host name is made to resolve to 127.0.0.1, so the
  browser sends that name as ``Host``. Only loopback names and addresses (and hosts the
  user allowed) pass; IP-literal hosts pass too when the server is bound to a network
  address on purpose, because a rebinding attack always needs a name.
- Cross-origin "simple" requests, which browsers send without a CORS preflight: a request
  whose ``Origin`` is not a configured CORS origin (nor the server itself) is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .anthropic_errors import anthropic_error, is_messages_path
from .errors import ApiError, error_body
from .key_limits import GENERATION_PATHS, KeyTraffic, request_client
from .keys import ApiKeyRecord, ApiKeys

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/health"})
# How often a keyed stream checks that its key still works (a revoked key ends its streams).
REVOCATION_POLL_S = 0.5
# Names a request's model resolves to (the name itself, the model id), for keys limited to models.
ModelResolver = Callable[[str], list[str]]


def is_loopback_host(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def split_host(value: str) -> str:
    """The host part of a ``Host`` header (``[::1]:8484`` -> ``[::1]``, ``a:80`` -> ``a``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Gate:
    """Pure ASGI middleware; cheap checks first, then the body, then the key."""

    def __init__(
        self,
        app: ASGIApp,
        api_key: str | None,
        allowed_hosts: Sequence[str] = (),
        cors_origins: Sequence[str] = (),
        any_ip_host: bool = False,
        max_body_bytes: int = 16 * 1024 * 1024,
        keys: ApiKeys | None = None,
        traffic: KeyTraffic | None = None,
        resolve_model: ModelResolver | None = None,
        require_key: bool = False,
    ) -> None:
        self.app = app
        self.api_key = api_key.encode() if api_key else None
        self.allowed_hosts = {h.strip().lower() for h in allowed_hosts}
        self.cors_origins = {o.rstrip("/").lower() for o in cors_origins}
        self.any_ip_host = any_ip_host
        self.max_body_bytes = max_body_bytes
        self.keys = keys
        self.traffic = traffic or KeyTraffic()
        self.resolve_model = resolve_model
        # A server other machines reach never serves without a key, even once every named
        # key is revoked (then it refuses everyone until a key is created).
        self.require_key = require_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        record: ApiKeyRecord | None = None
        try:
            self._check_host(headers.get("host"))
            self._check_origin(headers.get("origin"), headers.get("host"))
            if scope["path"] not in OPEN_PATHS and scope["method"] != "OPTIONS":
                record = await self._authorize(headers)
            body, early = await self._read_body(headers, receive)
            if record is not None:
                await self._admit(record, scope, body)
        except ApiError as error:
            await send_error(send, error, scope["path"])
            return
        receive = replay_body(body, early, receive)
        if record is None:
            await self.app(scope, receive, send)
        else:
            await self._serve_keyed(record, scope, receive, send)

    def _check_host(self, host_header: str | None) -> None:
        if host_header is None or "*" in self.allowed_hosts:
            return  # no Host header: not a browser, so not a rebinding attack
        host = split_host(host_header)
        if is_loopback_host(host) or host in self.allowed_hosts or (self.any_ip_host and _is_ip(host)):
            return
        log.warning("refused a request for host %r (add it to allowed hosts if it is yours)", host)
        raise ApiError(403, "this server answers only requests addressed to its own host", code="forbidden_host")

    def _check_origin(self, origin: str | None, host_header: str | None) -> None:
        if origin is None:
            return
        normalized = origin.rstrip("/").lower()
        if normalized in self.cors_origins or "*" in self.cors_origins:
            return
        parts = urlsplit(normalized)
        if host_header and parts.netloc == host_header.strip().lower() and is_loopback_host(parts.hostname or ""):
            return  # same origin: a page served by this very server
        log.warning("refused a cross-origin request from %r", origin)
        raise ApiError(403, "cross-origin requests from this origin are not allowed", code="forbidden_origin")

    async def _authorize(self, headers: Headers) -> ApiKeyRecord | None:
        """The named key the request carries; None for the server's own key or an open server."""
        token = _supplied_token(headers)
        # Compare in constant time so the key cannot be guessed byte by byte from timings.
        if self.api_key is not None and hmac.compare_digest(token.encode(), self.api_key):
            return None
        revoked = False
        if self.keys is not None:
            if token:
                record = await anyio.to_thread.run_sync(self.keys.find, token)
                if record is not None:
                    return record
                revoked = await anyio.to_thread.run_sync(self.keys.was_revoked, token)
            open_server = self.api_key is None and not self.require_key and not revoked
            if open_server and not await anyio.to_thread.run_sync(self.keys.any_active):
                return None  # no key of any kind is configured: open, as a loopback server is
        elif self.api_key is None and not self.require_key:
            return None
        if revoked:
            raise REVOKED
        message = "missing API key" if not token else "incorrect API key"
        raise ApiError(401, f"{message}; send it as 'Authorization: Bearer KEY'", code="invalid_api_key")

    async def _admit(self, record: ApiKeyRecord, scope: Scope, body: bytes) -> None:
        """A named key's limits, checked before the request reaches the app: models, rate."""
        if record.limits.models and scope["method"] == "POST":
            model = _model_named(body)
            names = [model] if model else []
            if model and self.resolve_model is not None:
                names += await anyio.to_thread.run_sync(self.resolve_model, model)
            if not record.limits.allows_model(*names):
                allowed = ", ".join(record.limits.models)
                raise ApiError(403, f"this key may use only these models: {allowed}", code="model_not_allowed",
                               param="model")
        self.traffic.admit(record)
        if self.keys is not None:
            await anyio.to_thread.run_sync(self.keys.record_use, record.name)

    async def _serve_keyed(self, record: ApiKeyRecord, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a keyed request as its client; a generation holds one of the key's streams and
        ends, with an error in its own stream format, if the key is revoked meanwhile."""
        generation = scope["method"] == "POST" and scope["path"] in GENERATION_PATHS
        with contextlib.ExitStack() as held:
            try:
                if generation:
                    held.enter_context(self.traffic.stream(record))
            except ApiError as error:
                await send_error(send, error, scope["path"])
                return
            client = request_client.set(record.client)
            held.callback(request_client.reset, client)
            await self._run_watched(record, generation, scope, receive, send)

    async def _run_watched(self, record: ApiKeyRecord, generation: bool, scope: Scope, receive: Receive,
                           send: Send) -> None:
        response = _ResponseState()

        async def tracked_send(message: Message) -> None:
            response.saw(message)
            await send(message)

        watcher: asyncio.Future[None] | None = None
        try:
            with anyio.CancelScope() as app_scope:
                if generation and self.keys is not None:
                    # A plain task, not a task group: the app's own errors stay unwrapped.
                    watcher = asyncio.ensure_future(self._end_if_revoked(record.name, app_scope, response))
                await self.app(scope, receive, tracked_send)
            if response.revoked:
                await _end_revoked(send, response, scope["path"])
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

    async def _end_if_revoked(self, name: str, app_scope: anyio.CancelScope, response: "_ResponseState") -> None:
        assert self.keys is not None
        while True:
            await anyio.sleep(REVOCATION_POLL_S)
            if not await anyio.to_thread.run_sync(self.keys.is_active, name):
                log.info("API key %r was revoked; ending its open stream", name)
                response.revoked = True
                app_scope.cancel()
                return

    async def _read_body(self, headers: Headers, receive: Receive) -> tuple[bytes, Message | None]:
        """Read the body (refusing it past the limit), so the app gets it in one piece."""
        declared = headers.get("content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_body_bytes
            except ValueError:
                raise ApiError(400, "the Content-Length header is not a number") from None
            if too_big:
                raise _too_large(self.max_body_bytes)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"", message  # the client left before sending it all
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_body_bytes:
                raise _too_large(self.max_body_bytes)
            chunks.append(body)
            if not message.get("more_body", False):
                return b"".join(chunks), None


def _supplied_token(headers: Headers) -> str:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        token = headers.get("x-api-key", "")
    return token.strip()


def _model_named(body: bytes) -> str:
    """The body's ``model`` field; '' when there is none (the app reports bad JSON itself)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) else ""


@dataclass
class _ResponseState:
    started: bool = False
    ended: bool = False
    event_stream: bool = False
    revoked: bool = False

    def saw(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            content_type = dict(message.get("headers", [])).get(b"content-type", b"")
            self.event_stream = content_type.startswith(b"text/event-stream")
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True


REVOKED = ApiError(401, "this API key was revoked", code="invalid_api_key")


async def _end_revoked(send: Send, response: _ResponseState, path: str) -> None:
    """Tell the client its key was revoked: an error response, or the stream's last event."""
    if not response.started:
        await send_error(send, REVOKED, path)
        return
    if response.ended:
        return
    tail = b""
    if response.event_stream:
        if is_messages_path(path):
            _, body, _ = anthropic_error(REVOKED)
            tail = b"event: error\ndata: " + json.dumps(body).encode() + b"\n\n"
        else:
            tail = b"data: " + json.dumps(error_body(REVOKED)).encode() + b"\n\n"
    await send({"type": "http.response.body", "body": tail, "more_body": False})


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than {limit // 1024} KiB", code="request_too_large")


def replay_body(body: bytes, early: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read (or the message that ended the
    read early), then the client's later messages (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return early or {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the disconnect

    return replay


async def send_error(send: Send, error: ApiError, path: str = "") -> None:
    status, body = error.status, error_body(error)
    if is_messages_path(path):  # the Anthropic Messages API has its own error shape
        status, body, _ = anthropic_error(error)
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})

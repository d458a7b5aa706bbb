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

import hmac
import ipaddress
import json
import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .api_anthropic_errors import anthropic_error, is_messages_path
from .api_errors import ApiError, error_body

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/health"})


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
    ) -> None:
        self.app = app
        self.api_key = api_key.encode() if api_key else None
        self.allowed_hosts = {h.strip().lower() for h in allowed_hosts}
        self.cors_origins = {o.rstrip("/").lower() for o in cors_origins}
        self.any_ip_host = any_ip_host
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            self._check_host(headers.get("host"))
            self._check_origin(headers.get("origin"), headers.get("host"))
            if scope["path"] not in OPEN_PATHS and scope["method"] != "OPTIONS":
                self._check_key(headers)
            receive = await self._buffered_body(headers, receive)
        except ApiError as error:
            await send_error(send, error, scope["path"])
            return
        await self.app(scope, receive, send)

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

    def _check_key(self, headers: Headers) -> None:
        if self.api_key is None:
            return
        supplied = headers.get("authorization", "")
        scheme, _, token = supplied.partition(" ")
        if scheme.lower() != "bearer":
            token = headers.get("x-api-key", "")
        # Compare in constant time so the key cannot be guessed byte by byte from timings.
        if not hmac.compare_digest(token.strip().encode(), self.api_key):
            message = "missing API key" if not token else "incorrect API key"
            raise ApiError(401, f"{message}; send it as 'Authorization: Bearer KEY'", code="invalid_api_key")

    async def _buffered_body(self, headers: Headers, receive: Receive) -> Receive:
        """Read the body (refusing it past the limit), then hand it to the app in one piece."""
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
                return _replay(b"", message, receive)  # the client left before sending it all
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_body_bytes:
                raise _too_large(self.max_body_bytes)
            chunks.append(body)
            if not message.get("more_body", False):
                return _replay(b"".join(chunks), None, receive)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than {limit // 1024} KiB", code="request_too_large")


def _replay(body: bytes, early: Message | None, receive: Receive) -> Receive:
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

"""The local API's route to remote engines: a request naming ``<engine>/<model>`` is forwarded.

An ASGI layer inside the ``Gate``: the Host, Origin, key and per-key limits apply to proxied
requests exactly as to local ones, and the client's own key never leaves this server (the
remote gets the key stored for it). The remote's answer, streamed or not, passes through
as it came; failures to reach it become this API's own errors (502, 504) in its own shape,
and a stream the remote cuts short ends with an error event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from collections.abc import Callable

import anyio
import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..base import InglenookError
from ..remote import (
    SEPARATOR, RemoteCatalogue, RemoteEndpoint, RemoteEngineError, status_failure, timeouts,
    transport_failure,
)
from .shared import GENERATION_PATHS, ApiError, error_body, replay_body, send_error

log = logging.getLogger(__name__)

# Response headers worth passing on; hop-by-hop ones and lengths are the server's business.
_PASSED_HEADERS = ("content-type", "cache-control", "retry-after")


class RemoteProxy:
    """``route_all`` (``serve --rpc``): every other model request goes to that engine too."""

    def __init__(self, app: ASGIApp, catalogue: RemoteCatalogue,
                 route_all: Callable[[], RemoteEndpoint] | None = None) -> None:
        self.app = app
        self.catalogue = catalogue
        self.route_all = route_all

    def _proxied(self, path: str) -> bool:
        return path.startswith("/v1/") if self.route_all is not None else path in GENERATION_PATHS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not self._proxied(scope["path"]):
            await self.app(scope, receive, send)
            return
        body, early = await _read_all(receive)
        found: tuple[RemoteEndpoint, str | None] | None = None
        data = _json_object(body)
        model = data.get("model") if data is not None else None
        if isinstance(model, str) and SEPARATOR in model:
            found = await anyio.to_thread.run_sync(self.catalogue.owner, model)
        if found is None and data is not None and self.route_all is not None:
            try:
                found = await anyio.to_thread.run_sync(self.route_all), None  # the name as sent
            except InglenookError as exc:
                log.warning("cannot route %s to the split engine: %s", scope["path"], exc)
                error = ApiError(503, str(exc), type="server_error", code=exc.code)
                await send_error(send, error, scope["path"])
                return
        if found is None or data is None:
            await self.app(scope, replay_body(body, early, receive), send)
            return
        endpoint, remote_id = found
        if remote_id is not None:
            data["model"] = remote_id
        await _forward(endpoint, scope["path"], data, receive, send)


async def _forward(endpoint: RemoteEndpoint, path: str, data: dict, receive: Receive, send: Send) -> None:
    """Stream the remote's answer back; a client that leaves stops the forwarding."""
    progress = _Progress()
    url = endpoint.url + path.removeprefix("/v1")
    with anyio.CancelScope() as scope:
        watcher = asyncio.ensure_future(_cancel_on_disconnect(receive, scope))
        try:
            async with httpx.AsyncClient(timeout=timeouts()) as client:
                async with client.stream("POST", url, json=data, headers=endpoint.headers()) as upstream:
                    if upstream.status_code >= 400:
                        await _send_remote_error(endpoint, upstream, path, send)
                        return
                    headers = [(k.encode(), upstream.headers[k].encode()) for k in _PASSED_HEADERS
                               if k in upstream.headers]
                    await send({"type": "http.response.start", "status": upstream.status_code, "headers": headers})
                    progress.started = True
                    progress.event_stream = upstream.headers.get("content-type", "").startswith("text/event-stream")
                    async for piece in upstream.aiter_raw():
                        await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.HTTPError as exc:
            await _fail(transport_failure(endpoint, exc), isinstance(exc, httpx.TimeoutException), progress, path, send)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher


class _Progress:
    started = False
    event_stream = False


async def _send_remote_error(endpoint: RemoteEndpoint, upstream: httpx.Response, path: str, send: Send) -> None:
    content = await upstream.aread()
    content_type = upstream.headers.get("content-type", "")
    status = upstream.status_code
    if status < 500 and status not in (401, 403) and "json" in content_type and _json_object(content) is not None:
        # The remote's own complaint about the request (bad parameter, unknown model): as it is.
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]})
        await send({"type": "http.response.body", "body": content})
        return
    failure = status_failure(endpoint, status, content_type, content)
    log.warning("proxied request to %r: %s", endpoint.name, failure)
    await send_error(send, ApiError(502, str(failure), type="server_error", code="remote_engine_error"), path)


async def _fail(failure: RemoteEngineError, timed_out: bool, progress: _Progress, path: str, send: Send) -> None:
    log.warning("proxied request: %s", failure)
    error = ApiError(504 if timed_out else 502, str(failure), type="server_error", code="remote_engine_error")
    if not progress.started:
        await send_error(send, error, path)
        return
    tail = b"data: " + json.dumps(error_body(error)).encode() + b"\n\n" if progress.event_stream else b""
    await send({"type": "http.response.body", "body": tail, "more_body": False})


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _read_all(receive: Receive) -> tuple[bytes, Message | None]:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _json_object(body: bytes) -> dict | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None

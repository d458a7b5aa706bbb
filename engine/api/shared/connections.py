"""Connection limits for the API server: a cap on open connections and a read deadline.

uvicorn closes a kept-alive connection that sits idle after a response, but a connection
that never sends a request, or sends its headers or body a byte at a time, stays open
forever, and it accepts any number of them. Each costs a file descriptor and memory, so a
handful of slow clients could exhaust the process. ``guarded_h11`` makes uvicorn's h11
protocol give every request ``read_timeout_s`` from its first byte (or from the connection
opening) to arrive whole, and refuse connections beyond ``max_connections`` with a 503 in
the API's error shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

DEFAULT_READ_TIMEOUT_S = 30.0
DEFAULT_MAX_CONNECTIONS = 512


def _error_response(status: int, reason: str, message: str, code: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "server_error" if status >= 500 else
                                 "invalid_request_error", "param": None, "code": code}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n"
    )
    if status == 503:
        head += "retry-after: 1\r\n"
    return head.encode("ascii") + b"\r\n" + body


class _GuardedH11(H11Protocol):
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None

    # uvicorn's H11Protocol narrows asyncio's BaseTransport to Transport (and ignores the same error).
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning("refusing a connection: %d are open already", len(self.connections) - 1)
            transport.write(_error_response(503, "Service Unavailable", "the server has too many open connections",
                                            "too_many_connections"))
            transport.close()
            return
        self._arm_read_deadline()  # the first request must arrive in time too

    def data_received(self, data: bytes) -> None:
        if self._read_deadline is None and self.conn.their_state is h11.IDLE:
            self._arm_read_deadline()  # the next request on a kept-alive connection starts
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
            self._disarm_read_deadline()  # the request is complete (or the connection is ending)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_read_deadline()
        super().connection_lost(exc)

    def _arm_read_deadline(self) -> None:
        self._disarm_read_deadline()
        self._read_deadline = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

    def _disarm_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        log.info("closing a connection whose request did not arrive within %.0fs", self.read_timeout_s)
        if self.cycle is None or self.cycle.response_complete:
            # Nothing has been answered on this request yet: say why before closing.
            self.transport.write(_error_response(408, "Request Timeout", "the request did not arrive in time",
                                                 "request_timeout"))
        self.transport.close()


def guarded_h11(read_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a request read deadline and a connection cap."""
    return type("GuardedH11", (_GuardedH11,), {"read_timeout_s": read_timeout_s, "max_connections": max_connections})

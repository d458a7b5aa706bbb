"""Per-key limits and who is using the server now, for named API keys (``api/shared/keys``).

Counts live in this process's memory: a restart starts every window afresh, which errs on
the side of letting people work. Nothing is limited unless the key's admin set a limit, and
only then does a request get a 429 (with ``Retry-After``, in the API's own error shape).
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ...usage import UNCOUNTED_PREFIX, uncounted
from .errors import ApiError
from .keys import ApiKeyRecord

RATE_WINDOW_S = 60.0
# Paths whose POSTs generate (or embed): each one in flight holds one of the key's streams.
GENERATION_PATHS = frozenset(
    {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages", "/v1/embeddings"}
)

# The client of the request being served ("api:<key name>"), for the jobs it submits.
request_client: contextvars.ContextVar[str] = contextvars.ContextVar("inglenook_request_client", default="")


def stamp_client(jobs: Sequence[object]) -> None:
    """Mark jobs with the keyed request's client (usage accounting); unkeyed jobs keep theirs.
    Work tagged uncounted (count_tokens' probe) stays uncounted under the key's name."""
    client = request_client.get()
    if client:
        for job in jobs:
            if hasattr(job, "client"):  # GenerateJob; embeddings carry no client
                was_uncounted = str(getattr(job, "client")).startswith(UNCOUNTED_PREFIX)
                setattr(job, "client", uncounted(client) if was_uncounted else client)


class KeyTraffic:
    """Request windows and open streams per key name; thread-safe (the window reads it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._recent: dict[str, deque[float]] = {}
        self._streams: dict[str, int] = {}

    def admit(self, record: ApiKeyRecord, now: float | None = None) -> None:
        """Count one request against the key's per-minute limit, or raise a 429."""
        limit = record.limits.requests_per_minute
        if limit is None:
            return
        now = time.monotonic() if now is None else now
        with self._lock:
            recent = self._recent.setdefault(record.name, deque())
            while recent and recent[0] <= now - RATE_WINDOW_S:
                recent.popleft()
            if len(recent) >= limit:
                wait = max(1, math.ceil(recent[0] + RATE_WINDOW_S - now))
                raise ApiError(
                    429, f"this key may make {limit} requests per minute; try again in {wait} s",
                    type="rate_limit_error", code="rate_limit_exceeded", headers={"Retry-After": str(wait)},
                )
            recent.append(now)

    @contextmanager
    def stream(self, record: ApiKeyRecord) -> Iterator[None]:
        """Hold one of the key's concurrent streams while the block runs, or raise a 429."""
        limit = record.limits.max_streams
        with self._lock:
            open_now = self._streams.get(record.name, 0)
            if limit is not None and open_now >= limit:
                raise ApiError(
                    429, f"this key may run {limit} generation(s) at once; wait for one to end",
                    type="rate_limit_error", code="too_many_streams", headers={"Retry-After": "1"},
                )
            self._streams[record.name] = open_now + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._streams[record.name] - 1
                if left:
                    self._streams[record.name] = left
                else:
                    del self._streams[record.name]

    def active_streams(self) -> dict[str, int]:
        """Key name -> generations in flight right now (the window's "who is using the box")."""
        with self._lock:
            return dict(self._streams)

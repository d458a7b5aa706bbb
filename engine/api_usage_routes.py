"""``GET /v1/usage``: this server's recorded usage and what it would have cost elsewhere.

Only for the machine itself: a request from another address is refused (403) even with a
valid key, since usage per client says who uses the server and when. When the server has an
API key, the security gate (``api_security``) asks for it here as on every other path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request

from .api_errors import ApiError
from .api_security import is_loopback_host
from .scheduler import GenerateJob
from .usage import api_client, checked_days, uncounted
from .usage_summary import UsageSummary

if TYPE_CHECKING:
    from .server import ApiService


def request_client_tag(request: Request) -> str:
    """The usage client of an API request, from its User-Agent. A request made with a named
    key is stamped with the key's name afterwards (``api_key_limits.stamp_client``)."""
    return api_client(request.headers.get("user-agent"))


def tag_jobs(jobs: Iterable[GenerateJob], request: Request, counted: bool = True) -> None:
    """Mark a request's jobs with its client; ``counted=False`` for work that is free on the
    API it imitates (count_tokens' one-token probe)."""
    client = request_client_tag(request)
    for job in jobs:
        job.client = client if counted else uncounted(client)


def usage_router(service: "ApiService") -> APIRouter:
    router = APIRouter()
    engine = service.engine

    @router.get("/v1/usage")
    async def usage(request: Request, days: str | None = None) -> dict[str, Any]:
        peer = request.client.host if request.client is not None else ""
        if not is_loopback_host(peer):
            raise ApiError(403, "usage is shown only to this machine", code="forbidden")
        try:
            period = checked_days(days)
        except ValueError as exc:
            raise ApiError(400, str(exc), code="invalid_value", param="days") from None
        summary = await anyio.to_thread.run_sync(UsageSummary.read, engine.store, engine.settings, period)
        return summary.as_dict()

    return router

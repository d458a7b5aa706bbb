"""``GET /v1/usage``: this server's recorded usage and what it would have cost elsewhere.

Only for the machine itself: a request from another address is refused (403) even with a
valid key, since usage per client says who uses the server and when. When the server has an
API key, the security gate (``api/shared/security``) asks for it here as on every other path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request

from ..usage import checked_days
from .shared import ApiError, is_loopback_host

if TYPE_CHECKING:
    from .shared import ApiService


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
        summary = await anyio.to_thread.run_sync(engine.usage_summary, period)
        return summary.as_dict()

    return router

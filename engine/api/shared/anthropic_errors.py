"""Errors under ``/v1/messages`` in Anthropic's shape: ``{"type": "error", "error": {...}}``.

The classification is ``api/shared/errors.error_for``'s (by exception type, messages scrubbed of
paths); only the body and a few statuses differ: a full queue is Anthropic's 529
``overloaded_error``, which its SDK and Claude Code retry.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...base import QueueFull
from .errors import ApiError, error_for

MESSAGES_PATH = "/v1/messages"
OVERLOADED = 529

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    OVERLOADED: "overloaded_error",
}


def is_messages_path(path: str) -> bool:
    return path == MESSAGES_PATH or path.startswith(MESSAGES_PATH + "/")


def error_type(status: int) -> str:
    """Anthropic's name for a status; other 4xx are invalid requests, other 5xx api errors."""
    return _TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")


def anthropic_error(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers for ``exc``."""
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        exc = ApiError(400, f"invalid request: {first.get('msg', 'invalid value')}")
    elif isinstance(exc, StarletteHTTPException):
        exc = ApiError(exc.status_code, str(exc.detail))
    error = error_for(exc)
    status = OVERLOADED if isinstance(exc, QueueFull) else error.status
    body = {"type": "error", "error": {"type": error_type(status), "message": error.message}}
    return status, body, dict(error.headers)


def anthropic_error_response(exc: BaseException) -> JSONResponse:
    status, body, headers = anthropic_error(exc)
    return JSONResponse(body, status_code=status, headers=headers)

"""Engine errors -> HTTP status and OpenAI's error body, in one place.

Errors are classified by type, walking the exception's class hierarchy, never by their
message text. Only errors whose messages are built from the request and fixed text (bad
input, unknown models, a busy or stopping server) pass their message on. Failures inside
the engine (a model that does not load, storage, bugs) carry local detail such as file
paths, so the client gets a fixed sentence per type and the detail goes to the log. The
path scrubber stays as a last line behind that, not as the defence.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from ...base import (
    ContextLengthExceeded, ConversationNotFound, DownloadError, ErrorDetail, ErrorResponse, InglenookError,
    InvalidRequest, JobCancelled, ModelLoadError, ModelNotFound, ModelTooLarge, QueueFull, ServerError,
    StorageUnavailable, StoreError,
)

log = logging.getLogger(__name__)

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"


@dataclass
class ApiError(Exception):
    """An error the HTTP layer itself raises (authentication, body size, host, …)."""

    status: int
    message: str
    type: str = INVALID_REQUEST
    code: str | None = None
    param: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


# Engine error type -> (HTTP status, OpenAI error type). Subclasses inherit their base's row.
_STATUS: dict[type[BaseException], tuple[int, str]] = {
    InvalidRequest: (400, INVALID_REQUEST),
    ContextLengthExceeded: (400, INVALID_REQUEST),
    ModelNotFound: (404, INVALID_REQUEST),
    ConversationNotFound: (404, INVALID_REQUEST),
    QueueFull: (503, SERVER_ERROR),
    ServerError: (503, SERVER_ERROR),
    JobCancelled: (503, SERVER_ERROR),
    ModelLoadError: (500, SERVER_ERROR),
    DownloadError: (502, SERVER_ERROR),
    StorageUnavailable: (503, SERVER_ERROR),
    StoreError: (500, SERVER_ERROR),
    InglenookError: (500, SERVER_ERROR),
}

# Errors whose messages are made of request values and fixed text, never local detail.
_CLIENT_SAFE: tuple[type[BaseException], ...] = (
    InvalidRequest, ContextLengthExceeded, ModelNotFound, ConversationNotFound, QueueFull, ServerError, JobCancelled,
    ModelTooLarge,  # sizes and the budget only
)

# What the client reads for engine failures; the full message is in the server's log.
_PUBLIC_MESSAGE: dict[type[BaseException], str] = {
    ModelLoadError: "the model could not be loaded; the server's log says why",
    DownloadError: "a download failed; the server's log says why",
    StoreError: "the server's storage failed; the server's log says why",
    InglenookError: "the engine failed on this request; the server's log says why",
}

# Absolute paths (POSIX with two or more parts, Windows drive paths, UNC shares). A drive
# letter is one letter standing alone: the "e:" of "file:///etc/passwd" is not one (that
# read "fil<path>"; now "file:<path>").
_PATH = re.compile(r"(?:(?<![A-Za-z0-9])[A-Za-z]:[\\/]|\\\\|/)(?:[^\s'\"<>|]+[\\/])+[^\s'\"<>|,;)]*")


def scrub(message: str) -> str:
    """Remove file-system paths from a message meant for a remote client."""
    return _PATH.sub("<path>", message)


def error_for(exc: BaseException, prompt_param: str = "messages") -> ApiError:
    """Map any exception to the ApiError the client sees. ``prompt_param`` is the field
    that holds the prompt on the route that failed (a context overflow names it)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ValidationError):
        return _from_validation(exc)
    if isinstance(exc, InglenookError):
        status, kind = next(row for cls, row in _STATUS.items() if isinstance(exc, cls))
        param = getattr(exc, "param", None)
        if isinstance(exc, ContextLengthExceeded):
            param = prompt_param
        headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, QueueFull) else {}
        if status >= 500:
            log.warning("request failed: %s: %s", type(exc).__name__, exc)
        return ApiError(status, scrub(client_message(exc)), kind, exc.code, param, headers)
    log.error("unexpected error in the API server", exc_info=exc)
    return ApiError(500, "internal server error", SERVER_ERROR, "internal_error")


def client_message(exc: InglenookError) -> str:
    """The message a remote client may read for ``exc``."""
    if isinstance(exc, _CLIENT_SAFE):
        return str(exc)
    return next(text for cls, text in _PUBLIC_MESSAGE.items() if isinstance(exc, cls))


def error_body(error: ApiError) -> dict:
    detail = ErrorDetail(message=error.message, type=error.type, param=error.param, code=error.code)
    return ErrorResponse(error=detail).model_dump()


def _from_validation(exc: ValidationError) -> ApiError:
    first = exc.errors(include_url=False, include_input=False)[0]
    location = [str(part) for part in first.get("loc", ())]
    param = location[0] if location else None
    message = f"{'.'.join(location) or 'body'}: {first.get('msg', 'invalid value')}"
    if first.get("type") == "json_invalid":
        return ApiError(400, "the request body is not valid JSON", code="invalid_json")
    return ApiError(400, scrub(message), code="invalid_value", param=param)

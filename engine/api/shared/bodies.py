"""Request bodies -> plain JSON values the request models may validate, or a 400.

``json.loads`` accepts two things nothing downstream can use: strings holding lone UTF-16
surrogates (``"\\ud800"`` is valid JSON escape syntax but no Unicode text; encoding it for
the tokenizer fails deep inside the engine) and nesting so deep that parsing or any
recursive walk over it overflows Python's stack. Both are refused here, once, for every
route, with the API's own error shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import ApiError

# Deeper than any real request (a JSON schema nests a few dozen levels at most), far below
# the depth at which Python's recursion limit is near.
MAX_JSON_DEPTH = 100

_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json_body(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object; ``ApiError(400)`` for anything else."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:  # also UnicodeDecodeError: bytes that are not UTF-8
        raise ApiError(400, "the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    check_json_value(data)
    return data


def check_json_value(value: Any) -> None:
    """Refuse nesting deeper than ``MAX_JSON_DEPTH`` and text that is not valid Unicode.

    Iterative, so the check itself cannot overflow the stack it protects.
    """
    pending: list[tuple[Any, int, str]] = [(value, 1, "")]
    while pending:
        item, depth, where = pending.pop()
        if isinstance(item, str):
            _check_text(item, where)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        if isinstance(item, dict):
            for key, child in item.items():
                name = f"{where}.{key}" if where else key
                _check_text(key, name)
                pending.append((child, depth + 1, name))
        else:
            pending.extend((child, depth + 1, where) for child in item)


def _check_text(text: str, where: str) -> None:
    if not text.isascii() and _SURROGATE.search(text):
        # A key itself may be the bad text: never echo a surrogate back into the error body.
        if _SURROGATE.search(where):
            where = ""
        field = where or "body"
        raise ApiError(
            400, f"{field}: the text holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not valid Unicode",
            code="invalid_value", param=where.split(".", 1)[0] or None,
        )


def _too_deep() -> ApiError:
    return ApiError(400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels", code="invalid_json")

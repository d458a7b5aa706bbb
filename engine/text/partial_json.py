"""The object a cut JSON text had begun: what a tool call's arguments held when the token
limit ended the answer inside them (``{"city": "Par`` → ``{}``, ``{"a": 1, "b": [2`` →
``{"a": 1}``). Only members written whole are kept; a value cut in its middle is dropped, never
guessed at."""

from __future__ import annotations

import json
from typing import Any

_CLOSE = {"{": "}", "[": "]"}


def closed_object(text: str) -> dict[str, Any] | None:
    """The longest prefix of ``text`` that ends after a whole member, closed into an object;
    None when ``text`` does not begin an object."""
    text = text.strip()
    if not text.startswith("{"):
        return None
    whole = _loads(text)
    if isinstance(whole, dict):
        return whole
    cuts: list[tuple[int, str]] = []  # (where a member ended, the closers then)
    stack: list[str] = []
    in_string = escaped = False
    for at, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in _CLOSE:
            stack.append(_CLOSE[char])
        elif char in "}]":
            if stack:
                stack.pop()
            if not stack:
                break
        elif char == ",":
            cuts.append((at, "".join(reversed(stack))))
    for at, closers in reversed(cuts):
        found = _loads(text[:at] + closers)
        if isinstance(found, dict):
            return found
    return {}


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None

"""A tool's answer as the model reads it and a person sees it: text, pictures and links,
cut to a size the context can hold (with a note saying so, never an overflow error)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: The most characters of one result the model reads: ~16k tokens of English, a quarter of a
#: 64k context. Larger answers (a 10 MB file) are cut with a note.
MAX_RESULT_CHARS = 60_000


@dataclass(frozen=True)
class ToolResult:
    text: str  # what goes back to the model
    is_error: bool = False
    images: tuple[tuple[str, str], ...] = ()  # (mime type, base64 data), for the window
    links: tuple[tuple[str, str], ...] = ()  # (name, uri)
    cut_from: int = 0  # the full length when the text was cut, else 0

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "is_error": self.is_error, "images": [list(i) for i in self.images],
                "links": [list(link) for link in self.links], "cut_from": self.cut_from}


@dataclass
class _Parts:
    texts: list[str] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)


def tool_result(result: Any, max_chars: int = MAX_RESULT_CHARS) -> ToolResult:
    """An SDK ``CallToolResult`` -> ``ToolResult``."""
    parts = _Parts()
    for item in getattr(result, "content", None) or []:
        _take(item, parts)
    structured = getattr(result, "structured_content", None)
    if not parts.texts and structured is not None:
        parts.texts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts.texts)
    return cut(ToolResult(text, bool(getattr(result, "is_error", False)), tuple(parts.images), tuple(parts.links)),
               max_chars)


def _take(item: Any, parts: _Parts) -> None:
    kind = getattr(item, "type", "")
    if kind == "text":
        parts.texts.append(str(item.text))
    elif kind == "image":
        parts.images.append((str(item.mime_type), str(item.data)))
        parts.texts.append(f"[image: {item.mime_type}]")
    elif kind == "audio":
        parts.texts.append(f"[audio: {item.mime_type}, not shown]")
    elif kind == "resource_link":
        parts.links.append((str(item.name), str(item.uri)))
        parts.texts.append(f"[resource: {item.name} <{item.uri}>]")
    elif kind == "resource":
        resource = item.resource
        if getattr(resource, "text", None) is not None:
            parts.texts.append(str(resource.text))
        else:
            parts.links.append((str(resource.uri), str(resource.uri)))
            parts.texts.append(f"[resource: <{resource.uri}>, {getattr(resource, 'mime_type', None) or 'binary'}]")
    else:
        parts.texts.append(f"[{kind or 'unknown'} content, not shown]")


def cut(result: ToolResult, max_chars: int) -> ToolResult:
    if len(result.text) <= max_chars:
        return result
    note = (f"\n[… the tool's answer was {len(result.text):,} characters; only the first {max_chars:,} "
            "are shown here]")
    return ToolResult(result.text[:max_chars] + note, result.is_error, result.images, result.links, len(result.text))


def error_result(message: str) -> ToolResult:
    """A failed call, as the model reads it (it may try again or answer without the tool)."""
    return ToolResult(f"Error: {message}", is_error=True)

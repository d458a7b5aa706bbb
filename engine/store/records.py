"""What the store's conversations and messages are, as the rest of the engine reads them."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Conversation:
    id: int
    title: str
    model_id: str | None
    system_prompt: str | None
    sampling: dict[str, Any]
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Conversation":
        return cls(
            id=row["id"],
            title=row["title"] or "",
            model_id=row["model_id"],
            system_prompt=row["system_prompt"],
            sampling=json.loads(row["sampling"] or "{}"),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


@dataclass
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    status: str = "complete"
    finish_reason: str | None = None
    model_id: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_ms: float | None = None
    tokens_per_s: float | None = None
    created_at: float = field(default_factory=time.time)
    parent_id: int | None = None  # the message this one follows; None for a first message

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Message":
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

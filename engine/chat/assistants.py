"""Assistants: named presets of a system prompt, sampling settings and (optionally) a model,
MCP tool servers and document collections, picked when a chat starts (LM Studio's presets,
Jan's assistants).

A few built-ins ship with the app; the person's own, and their edits of a built-in (saved
under the same name, which then wins), live in the settings table as one JSON list. The
same JSON shape is what export writes and import reads, so an assistant can be shared as a
file. ``tool_servers`` and ``collections`` name things set up on this machine (Settings →
Tools, the document library); an assistant imported from elsewhere may name some that are not:
those are skipped when a chat starts (``ChatService.apply_assistant`` says which), never an
error, and files written before these two keys existed still import.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from ..base import InvalidRequest, SamplingParams
from ..store import Store

log = logging.getLogger(__name__)

SETTING = "assistants"
FORMAT = "inglenook-assistants/1"  # in exported files, so an import knows what it reads
NAME_LIMIT = 60
PROMPT_LIMIT = 20_000
NAMES_LIMIT = 50  # tool servers or collections one assistant may name


@dataclass(frozen=True)
class Assistant:
    name: str
    system_prompt: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)  # SamplingParams overrides
    model_id: str | None = None  # None: the app's default model
    description: str = ""
    builtin: bool = False  # shipped with the app (an edit is saved as the person's own)
    tool_servers: tuple[str, ...] = ()  # MCP servers switched on in its chats
    collections: tuple[str, ...] = ()  # document collections attached to its chats

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("builtin")
        data["tool_servers"] = list(self.tool_servers)
        data["collections"] = list(self.collections)
        return data


BUILTINS: tuple[Assistant, ...] = (
    Assistant("General", "", {}, description="The model as it is, with the default settings", builtin=True),
    Assistant("Concise", "Answer briefly and directly. Use at most three sentences unless asked for more.",
              {"temperature": 0.3}, description="Short, direct answers", builtin=True),
    Assistant("Coder", "You are a careful programming assistant. Answer with working code in fenced blocks, "
              "then a short explanation. Say which language each block is in.",
              {"temperature": 0.2, "top_p": 0.9}, description="Code first, low temperature", builtin=True),
    Assistant("Writer", "You help people write: suggest clear, natural wording and keep their voice.",
              {"temperature": 1.0, "top_p": 0.98}, description="Drafting and rewording, more varied", builtin=True),
)


@dataclass(frozen=True)
class AssistantApplied:
    """What starting a chat with an assistant switched on and attached, and the names it gives
    that this machine does not have (so the window can say so)."""

    tool_servers: tuple[str, ...] = ()
    documents: int = 0  # documents attached from the assistant's collections
    missing_servers: tuple[str, ...] = ()
    missing_collections: tuple[str, ...] = ()


def _validated(raw: Any) -> Assistant:
    """An assistant from JSON (a settings row or an imported file), or InvalidRequest saying
    what is wrong with it."""
    if not isinstance(raw, dict):
        raise InvalidRequest("an assistant must be a JSON object")
    name = str(raw.get("name", "")).strip()
    if not name or len(name) > NAME_LIMIT:
        raise InvalidRequest(f"an assistant needs a name of 1 to {NAME_LIMIT} characters")
    prompt = raw.get("system_prompt") or ""
    if not isinstance(prompt, str) or len(prompt) > PROMPT_LIMIT:
        raise InvalidRequest(f"the system prompt of {name!r} must be text of at most {PROMPT_LIMIT} characters")
    sampling = raw.get("sampling") or {}
    if not isinstance(sampling, dict):
        raise InvalidRequest(f"the sampling settings of {name!r} must be a JSON object")
    try:
        SamplingParams.from_dict(sampling)  # the same checks a chat's own settings get
    except InvalidRequest as exc:
        raise InvalidRequest(f"the sampling settings of {name!r} are not valid: {exc}") from exc
    except (TypeError, ValueError) as exc:  # an unknown type of value
        raise InvalidRequest(f"the sampling settings of {name!r} are not valid: {exc}") from exc
    model_id = raw.get("model_id")
    if model_id is not None and not isinstance(model_id, str):
        raise InvalidRequest(f"the model of {name!r} must be a model id")
    return Assistant(name, prompt, dict(sampling), model_id or None, str(raw.get("description") or ""),
                     tool_servers=_names(raw, "tool_servers", name, "tool servers"),
                     collections=_names(raw, "collections", name, "document collections"))


def _names(raw: dict[str, Any], key: str, name: str, what: str) -> tuple[str, ...]:
    """A list of names under ``key`` (absent in files from before it existed: none), each
    once, in the order given."""
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and 0 < len(v.strip()) <= 100 for v in value):
        raise InvalidRequest(f"the {what} of {name!r} must be a list of names")
    if len(value) > NAMES_LIMIT:
        raise InvalidRequest(f"{name!r} names more than {NAMES_LIMIT} {what}")
    return tuple(dict.fromkeys(v.strip() for v in value))


class AssistantLibrary:
    """The built-in assistants and the person's own, kept in the store's settings."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _own(self) -> list[Assistant]:
        own: list[Assistant] = []
        for raw in self.store.get_setting(SETTING, []) or []:
            try:
                own.append(_validated(raw))
            except InvalidRequest as exc:  # a hand-edited database: skip it, keep the rest
                log.warning("ignoring a saved assistant: %s", exc)
        return own

    def _write(self, own: list[Assistant]) -> None:
        self.store.set_setting(SETTING, [a.to_json() for a in own])

    def all(self) -> list[Assistant]:
        """Built-ins first (an edited one in its place), then the person's own by name."""
        own = {a.name.casefold(): a for a in self._own()}
        listed = [own.pop(b.name.casefold(), b) for b in BUILTINS]
        return listed + sorted(own.values(), key=lambda a: a.name.casefold())

    def get(self, name: str) -> Assistant:
        for assistant in self.all():
            if assistant.name.casefold() == name.strip().casefold():
                return assistant
        raise InvalidRequest(f"there is no assistant named {name!r}", param="assistant")

    def save(self, assistant: Assistant) -> Assistant:
        """Add or replace (by name, ignoring case) one of the person's assistants."""
        checked = _validated(assistant.to_json())
        own = [a for a in self._own() if a.name.casefold() != checked.name.casefold()]
        self._write([*own, checked])
        return checked

    def delete(self, name: str) -> bool:
        """Delete the person's assistant ``name`` (a built-in returns to how it shipped)."""
        own = self._own()
        kept = [a for a in own if a.name.casefold() != name.strip().casefold()]
        self._write(kept)
        return len(kept) < len(own)

    def export_json(self, names: list[str] | None = None) -> str:
        chosen = self.all() if names is None else [self.get(n) for n in names]
        return json.dumps({"format": FORMAT, "assistants": [a.to_json() for a in chosen]}, indent=2,
                          ensure_ascii=False)

    def import_json(self, text: str) -> list[Assistant]:
        """Save every assistant in an exported file (or a bare list of them); all or none."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"the file is not JSON ({exc.msg} at line {exc.lineno})") from exc
        items = data.get("assistants") if isinstance(data, dict) else data
        if not isinstance(items, list) or not items:
            raise InvalidRequest('expected {"assistants": [...]} with at least one assistant')
        assistants = [_validated(item) for item in items]
        for assistant in assistants:
            self.save(assistant)
        return assistants

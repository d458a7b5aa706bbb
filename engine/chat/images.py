"""Images in conversations: which models can be sent them, and the stored images put back
into the messages a model sees on every turn.

The files and their rows are ``store.MessageImages``; this module decides what a turn's
prompt carries. A user message's images go before its text, in the order they were sent,
as ``{"type": "image", "image": ImageInput}`` parts (what ``runtime/model_vision`` reads).
A model that reads no images (the chat was switched to a text-only model after pictures were
sent) gets a short note in their place, so the conversation goes on instead of failing on
every turn. Decoded images are kept in memory for a while: a follow-up re-reads the same
pictures, and decoding a large PNG each turn would cost more than the cached prompt saves.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import ImageInput, InglenookError, InvalidRequest, find_projector
from ..remote import SEPARATOR
from ..runtime import header_of
from ..store import MessageImages, Store, StoredImage, encode_png

if TYPE_CHECKING:
    from ..store import Conversation
    from .context import ChatContext

log = logging.getLogger(__name__)

# Decoded images kept in memory (RGB bytes): a 2048x2048 picture is 12 MiB.
DECODED_CACHE_BYTES = 96 * 1024 * 1024


def message_text(message: dict[str, Any]) -> str:
    """A message's text, whether its content is a string or parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def note_for(stored: StoredImage) -> str:
    return f"[an image ({stored.width}x{stored.height}) was sent here; this model cannot see images]"


class ChatImages:
    """The images of a chat service's conversations."""

    def __init__(self, store: Store, folder: Path, chats: ChatContext) -> None:
        self.files = MessageImages(store, folder)
        self._chats = chats
        self._decoded: OrderedDict[str, ImageInput] = OrderedDict()
        self._decoded_bytes = 0
        self._lock = threading.Lock()

    # -- which models read images -------------------------------------------------------

    def problem(self, model_id: str) -> str | None:
        """Why ``model_id`` cannot be sent images, or None when it can (or when only trying
        will tell: a remote engine's model, or one this service cannot look up)."""
        chats = self._chats
        if SEPARATOR in model_id and chats.remotes.owner(model_id) is not None:
            return None  # the remote server says whether it reads images
        if chats.resolve is None:
            return None
        try:
            record = chats.resolve(model_id)
        except InglenookError:
            return None  # an unknown model fails the send on its own, with its own words
        try:
            info = header_of(record)
        except (InglenookError, OSError):
            return None  # an unreadable model file fails the load, which says why
        try:
            if find_projector(info) is not None:
                return None
        except InglenookError as exc:  # a projector for another model beside it
            return f"{model_id} cannot read images: {exc}"
        return (f"{model_id} is a text-only model: it has no vision projector (an mmproj-*.gguf beside it), "
                "so it cannot read images; pick a vision model")

    def check_model(self, model_id: str) -> None:
        """``InvalidRequest`` saying why, when ``model_id`` cannot be sent images."""
        problem = self.problem(model_id)
        if problem is not None:
            raise InvalidRequest(problem, param="images")

    # -- the prompt ---------------------------------------------------------------------

    def into_history(self, conversation: Conversation, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` (the conversation's path, as ``ChatService.history`` reads it) with each
        user message's stored images put back in front of its text."""
        stored = self.files.of_conversation(conversation.id)
        if not stored:
            return messages
        path = [m for m in self._chats.store.messages(conversation.id) if m.status != "error"]
        model_id = conversation.model_id or self._chats.default_model_id()
        sees = self.problem(model_id) is None
        # history() appends one entry per kept message, after an optional system prompt.
        offset = len(messages) - len(path)
        out = list(messages)
        for index, message in enumerate(path):
            images = stored.get(message.id)
            if not images or message.role != "user":
                continue
            entry = out[offset + index]
            if entry.get("role") != "user" or not isinstance(entry.get("content"), str):
                log.warning("message %d's images were not matched to its place in the prompt", message.id)
                continue
            parts: list[dict[str, Any]] = []
            notes: list[str] = []
            for item in images:
                image = self.decoded(item) if sees else None
                if image is not None:
                    parts.append({"type": "image", "image": image})
                elif not sees:
                    notes.append(note_for(item))
            text = "\n".join([*notes, entry["content"]])
            if parts:
                out[offset + index] = {**entry, "content": [*parts, {"type": "text", "text": text}]}
            else:
                out[offset + index] = {**entry, "content": text}
        return out

    def decoded(self, stored: StoredImage) -> ImageInput | None:
        with self._lock:
            found = self._decoded.get(stored.digest)
            if found is not None:
                self._decoded.move_to_end(stored.digest)
                return found
        image = self.files.load(stored)
        if image is None:
            return None
        with self._lock:
            if stored.digest not in self._decoded:
                self._decoded[stored.digest] = image
                self._decoded_bytes += len(image.rgb)
            while self._decoded_bytes > DECODED_CACHE_BYTES and len(self._decoded) > 1:
                _, old = self._decoded.popitem(last=False)
                self._decoded_bytes -= len(old.rgb)
        return image

    @staticmethod
    def for_remote(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages for a remote OpenAI-compatible engine: image parts as base64 PNG data URLs."""
        out = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, list):
                parts = []
                for part in content:
                    if part.get("type") == "image":
                        url = "data:image/png;base64," + base64.b64encode(encode_png(part["image"])).decode("ascii")
                        parts.append({"type": "image_url", "image_url": {"url": url}})
                    else:
                        parts.append(part)
                message = {**message, "content": parts}
            out.append(message)
        return out

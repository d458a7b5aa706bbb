"""Exporting a conversation as Markdown or JSON (pure functions; the caller writes atomically).

Images sent with messages go along: in JSON as data URLs inside each message, in Markdown as
links to copies the caller writes into a folder beside the file (``image_files``)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from inglenook.engine import CallRecord, Conversation, Message, StoredImage

NO_IMAGES: Mapping[int, list[StoredImage]] = {}


def images_folder(target: Path) -> Path:
    """Where a Markdown export's images go: a folder named after the file, beside it."""
    return target.with_name(f"{target.stem}-images")


def image_files(target: Path, messages: list[Message], images: Mapping[int, list[StoredImage]]) -> dict[Path, Path]:
    """For a Markdown export to ``target``: each image file to copy → where its copy goes."""
    folder = images_folder(target)
    return {item.path: folder / item.path.name for m in messages for item in images.get(m.id, [])}


def to_markdown(conversation: Conversation, messages: list[Message], calls: Sequence[CallRecord] = (),
                images: Mapping[int, list[StoredImage]] = NO_IMAGES, folder_name: str = "images") -> str:
    """``images``' links point into ``folder_name`` (relative to the Markdown file)."""
    lines = [f"# {conversation.title or 'Conversation'}", ""]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(conversation.created_at))
    lines += [f"*Exported from Inglenook · started {when}*", ""]
    if conversation.system_prompt:
        lines += ["> **System:** " + conversation.system_prompt.replace("\n", "\n> "), ""]
    answered = {c.result_message_id: c for c in calls}
    for message in messages:
        call = answered.get(message.id)
        if message.role == "tool" and call is not None:
            # A tool call: what ran, with which arguments, and what came back.
            arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False)
            lines += [f"### Tool: {call.server}/{call.tool} ({call.status})", "", "```json", arguments, "```", "",
                      "```", message.content.rstrip(), "```", ""]
            continue
        who = "You" if message.role == "user" else (message.model_id or "Assistant")
        note = " *(stopped)*" if message.status == "partial" else ""
        lines += [f"## {who}{note}", ""]
        for number, item in enumerate(images.get(message.id, []), 1):
            lines += [f"![image {number} ({item.width}×{item.height})]({folder_name}/{item.path.name})", ""]
        lines += [message.content.rstrip(), ""]
    return "\n".join(lines)


def _data_url(item: StoredImage) -> str | None:
    try:
        return f"data:{item.mime};base64," + base64.b64encode(item.read_bytes()).decode("ascii")
    except OSError:
        return None  # its file is gone: the export says what it was, without the pixels


def to_json(conversation: Conversation, messages: list[Message], calls: Sequence[CallRecord] = (),
            images: Mapping[int, list[StoredImage]] = NO_IMAGES) -> str:
    body: dict[str, Any] = {
        "format": "inglenook.conversation",
        "version": 1,
        "conversation": {
            "id": conversation.id,
            "title": conversation.title,
            "model_id": conversation.model_id,
            "system_prompt": conversation.system_prompt,
            "sampling": conversation.sampling,
            "created_at": conversation.created_at,
            "updated_at": conversation.updated_at,
        },
        "messages": [
            {**{k: getattr(m, k) for k in m.__dataclass_fields__ if k != "conversation_id"},
             **({"images": [{"mime": i.mime, "width": i.width, "height": i.height, "digest": i.digest,
                             "url": _data_url(i)} for i in images[m.id]]} if images.get(m.id) else {})}
            for m in messages
        ],
        # Each tool call: the message that asked (message_id), the tool message that holds its
        # result (result_message_id), and what ran.
        "tool_calls": [
            {"call_id": c.call_id, "server": c.server, "tool": c.tool, "arguments": c.arguments, "status": c.status,
             "message_id": c.message_id, "result_message_id": c.result_message_id, "duration_s": c.duration_s,
             "result": c.result.to_json()}
            for c in calls
        ],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"

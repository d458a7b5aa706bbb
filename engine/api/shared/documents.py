"""Files sent inside API requests (OpenAI ``file`` content parts, Responses ``input_file``,
Anthropic ``document`` blocks with base64 data), read as documents and placed first.

Every family turns its own shape into one: a ``file`` content part with ``filename`` and
``file_data`` (a ``data:`` URL or bare base64), as OpenAI's chat API sends it. ``hoist_documents``
takes those parts out of the messages, converts each file in the conversion worker (the
engine's limits: size, time, memory), and the plan puts the documents in their stable block
ahead of the conversation, the same block a chat in the window gets; so the prefix cache
keeps a document's prefill once for every request that sends it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path, PurePath
from typing import Any

from ...base import ChatMessage, ContentPart, DocumentError, InglenookError, InvalidRequest
from ...documents import Document, Limits, convert_bytes_safely, is_recording_name, read_recording

#: A recording's path and a "stop now" test → the transcription's future (``Speech.transcribe``).
Transcribe = Callable[[Path, Callable[[], bool]], "Future[Any]"]

#: All the files of one request are converted within this time (each within its own limit
#: too): a request's files cannot hold a worker for longer, however many it sends.
REQUEST_CONVERT_BUDGET_S = 120.0

FILE_PART = "file"


def file_part(filename: str | None, file_data: str | None, where: str | None = None) -> ContentPart:
    """The one shape every family's file becomes (OpenAI's chat ``file`` part). ``where`` is
    the part's place in the family's own request (``input[0].content[1]``), for its errors:
    the chat message it lands in is numbered differently (instructions come first)."""
    part: dict[str, Any] = {"type": FILE_PART, "file": {"filename": filename or "document", "file_data": file_data}}
    if where is not None:
        part[_WHERE] = where
    return ContentPart.model_validate(part)


_WHERE = "inglenook_where"


def _param(where: str) -> str:
    """The request field a place is in: ``input`` for ``input[0].content[1]``."""
    return where.split("[", 1)[0] or "messages"


def _place(part: ContentPart, default: str) -> str:
    where = (part.model_extra or {}).get(_WHERE)
    return where if isinstance(where, str) and len(where) <= 80 else default


def hoist_documents(messages: list[ChatMessage], transcribe: Transcribe | None = None,
                    ) -> tuple[list[ChatMessage], list[Document]]:
    """``messages`` without their file parts, and the documents those parts held (each file
    once, in order). A message left with no content is dropped. With ``transcribe`` (the
    engine's speech room), a recording (``meeting.m4a``) is a document of its transcript,
    headed by times, as in the window."""
    out: list[ChatMessage] = []
    documents: dict[str, Document] = {}
    budget = _Budget(time.monotonic() + REQUEST_CONVERT_BUDGET_S)
    for index, message in enumerate(messages):
        content = message.content
        if not isinstance(content, list) or not any(part.type == FILE_PART for part in content):
            out.append(message)
            continue
        kept = []
        for n, part in enumerate(content):
            if part.type != FILE_PART:
                kept.append(part)
                continue
            document = _document(part, _place(part, f"messages[{index}].content[{n}]"), budget, transcribe)
            documents.setdefault(document.sha256, document)
        if kept or message.tool_calls:
            out.append(message.model_copy(update={"content": kept or None}))
    return out, list(documents.values())


class _Budget:
    """What is left of a request's time for converting its files, and the files read so far
    (the same bytes twice are converted once)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.seen: dict[str, Document] = {}

    def limits(self, where: str) -> Limits:
        left = self.deadline - time.monotonic()
        if left <= 1.0:
            raise DocumentError(f"{where}: the files of this request took longer than {REQUEST_CONVERT_BUDGET_S:g} s "
                                "to read; send fewer or smaller files per request", param="messages")
        return Limits(timeout_s=min(Limits.timeout_s, left))


def _document(part: ContentPart, where: str, budget: _Budget, transcribe: Transcribe | None = None) -> Document:
    file: Any = (part.model_extra or {}).get("file")
    if not isinstance(file, dict):
        raise InvalidRequest(f"{where}: a file part needs a file object with file_data", param=_param(where))
    if file.get("file_id") and not file.get("file_data"):
        raise InvalidRequest(f"{where}: this server keeps no uploaded files; send the file's bytes in file_data",
                             param=_param(where))
    data = file.get("file_data")
    if not isinstance(data, str) or not data:
        raise InvalidRequest(f"{where}: file_data must be base64 (or a data: URL)", param=_param(where))
    if data.startswith("data:"):
        header, _, data = data.partition(",")
        if ";base64" not in header:
            raise InvalidRequest(f"{where}: a data: URL in file_data must be base64", param=_param(where))
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{where}: file_data is not valid base64", param=_param(where)) from None
    name = str(file.get("filename") or "document")[:200]
    key = hashlib.sha256(name.encode() + b"\0" + raw).hexdigest()
    if key in budget.seen:
        return budget.seen[key]
    try:
        if transcribe is not None and is_recording_name(name):
            document = _recording(name, raw, budget.limits(where).timeout_s, transcribe)
        else:
            document = convert_bytes_safely(name, raw, budget.limits(where))
    except DocumentError as exc:
        raise DocumentError(f"{where}: {exc}", param=_param(where)) from None
    budget.seen[key] = document
    return document


def _recording(name: str, raw: bytes, seconds: float, transcribe: Transcribe) -> Document:
    """A recording's transcript as a document, within ``seconds`` (then stopped between segments)."""
    stop = threading.Event()

    def bounded(path: Path) -> Any:
        future = transcribe(path, stop.is_set)
        try:
            return future.result(timeout=seconds)
        except FutureTimeout:
            stop.set()
            raise DocumentError(f"{name} took longer than {seconds:.0f} s to transcribe") from None
        except InglenookError as exc:  # no Whisper model, audio that does not decode
            raise DocumentError(f"{name}: {exc}") from None

    with tempfile.TemporaryDirectory(prefix="inglenook-recording-") as folder:
        path = Path(folder) / f"recording{PurePath(name).suffix.lower()}"
        path.write_bytes(raw)
        document = read_recording(path, bounded, None, stop.is_set)
    return dataclasses.replace(document, name=name)

"""A converted document: what the model reads of a file, and the limits conversion runs under."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one conversion may use. A file over ``max_file_bytes`` is refused before it is
    read; the worker process is killed past ``timeout_s`` or ``memory_bytes``; text past
    ``max_chars`` is an error rather than a silently cut document."""

    max_file_bytes: int = 200 * MIB
    timeout_s: float = 60.0
    memory_bytes: int = 2048 * MIB
    max_chars: int = 4_000_000
    # A zip-based file (DOCX, PPTX, XLSX) whose members expand past this, or more than
    # ``max_zip_ratio`` times their compressed size, is taken for a zip bomb and not opened.
    max_unzipped_bytes: int = 400 * MIB
    max_zip_ratio: int = 200


@dataclass(frozen=True)
class Document:
    """A file as text: ``text`` is what goes into a prompt (Markdown: headings, tables);
    ``pages`` holds the text of each page or slide when the format has them (PDF, PPTX),
    so a citation can name one; ``sha256`` is of the file's bytes (its identity)."""

    name: str
    kind: str  # pdf, docx, pptx, xlsx, html, csv, markdown, code, text
    sha256: str
    size: int
    text: str
    pages: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())  # e.g. "3 of 10 pages have no text"

    @property
    def page_count(self) -> int:
        return len(self.pages)

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["pages"] = list(self.pages)
        values["notes"] = list(self.notes)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Document:
        return cls(
            name=str(values["name"]), kind=str(values["kind"]), sha256=str(values["sha256"]),
            size=int(values["size"]), text=str(values["text"]),
            pages=tuple(str(p) for p in values.get("pages", ())),
            notes=tuple(str(n) for n in values.get("notes", ())),
        )


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

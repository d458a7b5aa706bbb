"""One file's bytes into a ``Document``, in this process. Callers use ``worker.convert_file``,
which runs this in a separate process under limits; this is what that process runs."""

from __future__ import annotations

from ..base import DocumentError
from .binary_formats import check_zip, docx_text, pdf_pages, pptx_slides, xlsx_text
from .document import Document, Limits, sha256_of
from .sniff import sniff
from .text_formats import convert_text


def convert_bytes(name: str, data: bytes, limits: Limits) -> Document:
    if len(data) > limits.max_file_bytes:
        raise DocumentError(f"{name} is {len(data) // (1024 * 1024)} MB; documents are limited to "
                            f"{limits.max_file_bytes // (1024 * 1024)} MB")
    if not data.strip():
        raise DocumentError(f"{name} is empty")
    kind = sniff(name, data[:4096], data)
    pages: list[str] = []
    notes: list[str] = []
    if kind == "pdf":
        pages, notes = pdf_pages(name, data)
        text = "\n\n".join(f"## Page {i}\n\n{page}" for i, page in enumerate(pages, 1) if page)
    elif kind in ("docx", "pptx", "xlsx"):
        check_zip(name, data, limits)
        try:
            if kind == "docx":
                text = docx_text(data)
            elif kind == "xlsx":
                text = xlsx_text(data)
            else:
                pages = pptx_slides(data)
                text = "\n\n".join(f"## Slide {i}\n\n{slide}" for i, slide in enumerate(pages, 1) if slide)
        except DocumentError:
            raise
        except Exception as exc:  # noqa: BLE001 — each library raises its own (KeyError, lxml, zipfile) on damage
            raise DocumentError(f"{name} is a damaged {kind.upper()} file: {type(exc).__name__}: {exc}") from None
    else:
        text = convert_text(name, kind, data)
    text = text.strip()
    if not text:
        raise DocumentError(f"{name} has no text")
    if len(text) > limits.max_chars:
        raise DocumentError(f"{name} holds {len(text):,} characters of text; the limit is {limits.max_chars:,}")
    return Document(name=name, kind=kind, sha256=sha256_of(data), size=len(data), text=text,
                    pages=tuple(pages), notes=tuple(notes))

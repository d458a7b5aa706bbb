"""What kind of file this is, judged by its bytes first and its name second.

A name can lie (a binary renamed ``.txt``, a DOCX saved as ``.zip``): the leading bytes
decide between PDF, the zip-based Office formats and text; the extension only picks among
kinds of text (CSV, HTML, Markdown, source code), where the bytes alone cannot tell.
"""

from __future__ import annotations

import zipfile
from io import BytesIO
from pathlib import PurePath

from ..base import DocumentError

PDF_MAGIC = b"%PDF-"
ZIP_MAGIC = b"PK\x03\x04"
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # legacy .doc/.xls/.ppt, and encrypted OOXML

# The member that marks each zip-based Office format.
_OOXML_MARKERS = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}

CODE_EXTENSIONS = {
    ".py": "python", ".js": "javascript", ".ts": "typescript", ".tsx": "tsx", ".jsx": "jsx", ".c": "c",
    ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".rs": "rust", ".go": "go", ".java": "java",
    ".kt": "kotlin", ".swift": "swift", ".rb": "ruby", ".php": "php", ".cs": "csharp", ".sh": "bash",
    ".sql": "sql", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".xml": "xml",
    ".css": "css", ".lua": "lua", ".r": "r", ".scala": "scala", ".pl": "perl", ".ini": "ini",
}
MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".rst"}
CSV_EXTENSIONS = {".csv": ",", ".tsv": "\t"}
HTML_EXTENSIONS = {".html", ".htm", ".xhtml"}


def sniff(name: str, head: bytes, data: bytes | None = None) -> str:
    """The kind of a file named ``name`` starting with ``head`` (its first KiB or more);
    ``data`` (the whole file), when given, lets a zip's members decide its Office kind."""
    if PDF_MAGIC in head[:1024]:
        return "pdf"
    if head.startswith(OLE2_MAGIC):
        raise DocumentError(
            f"{name} is a password-protected Office file or an old binary Office format (.doc, .xls, .ppt); "
            "save it as .docx, .xlsx or .pptx without a password, or as PDF"
        )
    if head.startswith(ZIP_MAGIC):
        return _zip_kind(name, data)
    return text_kind(name, head)


def _zip_kind(name: str, data: bytes | None) -> str:
    if data is None:
        suffix = PurePath(name).suffix.lower()
        if suffix in (".docx", ".pptx", ".xlsx"):
            return suffix[1:]
        raise DocumentError(f"{name} is a zip archive, not a document Inglenook reads")
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError) as exc:
        raise DocumentError(f"{name} looks like a zip-based file but is damaged: {exc}") from None
    for marker, kind in _OOXML_MARKERS.items():
        if marker in names:
            return kind
    raise DocumentError(f"{name} is a zip archive, not a Word, PowerPoint or Excel document")


def text_kind(name: str, head: bytes) -> str:
    """Which kind of text (bytes already judged to be text): by extension, then by content."""
    suffix = PurePath(name).suffix.lower()
    if suffix in HTML_EXTENSIONS:
        return "html"
    if suffix in CSV_EXTENSIONS:
        return "csv"
    if suffix in MARKDOWN_EXTENSIONS:
        return "markdown"
    if suffix in CODE_EXTENSIONS:
        return "code"
    start = head.lstrip()[:64].lower()
    if start.startswith((b"<!doctype html", b"<html")):
        return "html"
    return "text"

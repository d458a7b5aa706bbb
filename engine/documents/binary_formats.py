"""PDF, DOCX, PPTX and XLSX into Markdown, with the libraries made for each: pypdfium2
(PDFium, the PDF engine of Chrome: fast, permissive licence, reads what browsers read),
python-docx, python-pptx and openpyxl. Runs in the conversion worker (``child.py``).

markitdown was considered for the Office formats and HTML: it drives these same libraries
(plus pdfminer, slower than PDFium on long PDFs) and pulls in magika with onnxruntime, tens
of megabytes for type detection that ``sniff.py`` does from a few leading bytes.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from io import BytesIO
from typing import Any

from ..base import DocumentError
from .document import Limits
from .text_formats import MAX_TABLE_ROWS, markdown_table

MAX_SHEET_COLUMNS = 200


def check_zip(name: str, data: bytes, limits: Limits) -> None:
    """Refuse a zip whose members would expand past the limits before a library opens it."""
    try:
        with zipfile.ZipFile(BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, ValueError) as exc:
        raise DocumentError(f"{name} is damaged: {exc}") from None
    expanded = sum(info.file_size for info in infos)
    packed = max(1, sum(info.compress_size for info in infos))
    if expanded > limits.max_unzipped_bytes or expanded > packed * limits.max_zip_ratio:
        raise DocumentError(
            f"{name} would expand to {expanded // (1024 * 1024)} MB ({expanded // packed}× its size): "
            "it looks like a zip bomb, so it was not opened"
        )


def pdf_pages(name: str, data: bytes) -> tuple[list[str], list[str]]:
    """Each page's text, and notes (pages without text)."""
    import pypdfium2 as pdfium  # noqa: PLC0415 — loaded in the worker only

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        message = str(exc).lower()
        if "password" in message:
            raise DocumentError(f"{name} is encrypted with a password; save an unprotected copy and attach that") from None
        raise DocumentError(f"{name} is not a readable PDF (damaged or incomplete): {exc}") from None
    pages: list[str] = []
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n").strip())
            textpage.close()
            page.close()
    finally:
        pdf.close()
    if pages and not any(pages):
        raise DocumentError(
            f"{name} has no text layer: it looks like a scanned PDF (pictures of pages). "
            "Inglenook does not read text from images; run it through OCR first"
        )
    empty = sum(1 for p in pages if not p)
    notes = [f"{empty} of {len(pages)} pages have no text (scanned pages are not read)"] if empty else []
    return pages, notes


def docx_text(data: bytes) -> str:
    import docx  # noqa: PLC0415 — loaded in the worker only
    from docx.table import Table  # noqa: PLC0415
    from docx.text.paragraph import Paragraph  # noqa: PLC0415

    document = docx.Document(BytesIO(data))
    out: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text.strip()
            if not text:
                continue
            style = (block.style.name if block.style is not None else "") or ""
            if style.startswith("Heading") and style[7:].strip().isdigit():
                out.append("#" * min(6, int(style[7:])) + " " + text)
            elif style == "Title":
                out.append("# " + text)
            elif style.startswith("List"):
                out.append("- " + text)
            else:
                out.append(text)
        elif isinstance(block, Table):
            out.append(markdown_table([[cell.text for cell in row.cells] for row in block.rows]))
    return "\n\n".join(out)


def pptx_slides(data: bytes) -> list[str]:
    from pptx import Presentation  # noqa: PLC0415 — loaded in the worker only

    slides = []
    for slide in Presentation(BytesIO(data)).slides:
        parts: list[str] = []
        for shape in slide.shapes:
            parts += list(_shape_text(shape))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                parts.append(f"Notes: {notes}")
        slides.append("\n\n".join(p for p in parts if p))
    return slides


def _shape_text(shape: Any) -> Iterator[str]:
    if getattr(shape, "has_table", False) and shape.has_table:
        yield markdown_table([[cell.text for cell in row.cells] for row in shape.table.rows])
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        text = shape.text_frame.text.strip()
        if text:
            is_title = getattr(shape, "is_placeholder", False) and "TITLE" in str(shape.placeholder_format.type)
            yield f"### {text}" if is_title else text
    for child in getattr(shape, "shapes", ()):  # a group
        yield from _shape_text(child)


def xlsx_text(data: bytes) -> str:
    import openpyxl  # noqa: PLC0415 — loaded in the worker only

    book = openpyxl.load_workbook(BytesIO(data), read_only=True, data_only=True)
    out = []
    try:
        for sheet in book.worksheets:
            rows: list[list[str]] = []
            for i, row in enumerate(sheet.iter_rows(values_only=True)):
                if i >= MAX_TABLE_ROWS:
                    rows.append(["… more rows"])
                    break
                rows.append(["" if v is None else str(v) for v in row[:MAX_SHEET_COLUMNS]])
            table = markdown_table(rows)
            if table:
                out.append(f"## Sheet: {sheet.title}\n\n{table}")
    finally:
        book.close()
    return "\n\n".join(out)

"""Real documents written by the tests (no binaries in the repository): PDFs by hand (the
format is text with byte offsets), DOCX, PPTX and XLSX with the libraries that read them,
and the bad files a person might attach."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: Sequence[Sequence[tuple[float, float, str]]], encrypt: bool = False,
              image_only: bool = False) -> bytes:
    """A PDF whose page ``i`` shows each (x, y, text) of ``pages[i]`` in Helvetica.

    ``encrypt`` adds a standard security handler with a user password we never tell
    (readers must refuse it); ``image_only`` draws filled boxes instead of text, as a scan
    has pictures and no text layer."""
    objects: list[bytes] = []
    n_pages = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, page in enumerate(pages):
        if image_only:
            stream = "".join(f"0.2 g {x} {y} {8 * len(t)} 10 re f\n" for x, y, t in page)
        else:
            stream = "".join(f"BT /F1 11 Tf {x} {y} Td ({_escape(t)}) Tj ET\n" for x, y, t in page)
        data = stream.encode("latin-1")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {5 + 2 * i} 0 R >>".encode())
        objects.append(f"<< /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream")
    trailer_extra = ""
    if encrypt:
        objects.append(b"<< /Filter /Standard /V 1 /R 2 /O <" + b"ab" * 32 + b"> /U <" + b"cd" * 32 + b"> /P -4 >>")
        trailer_extra = f" /Encrypt {len(objects)} 0 R /ID [<{'01' * 16}> <{'01' * 16}>]"
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{trailer_extra} >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def report_pdf(path: Path, n_pages: int = 3) -> Path:
    """A multi-page report: a heading and prose on each page, a table on page 2."""
    pages = []
    for number in range(1, n_pages + 1):
        lines = [(72.0, 720.0, f"Quarterly report, section {number}")]
        lines += [(72.0, 690.0 - 16 * k, f"Paragraph {k} of page {number} talks about the harbour and the mill.")
                  for k in range(4)]
        if number == 2:
            table = [("Region", "Units", "Revenue"), ("North", "1200", "48000"), ("South", "950", "38000")]
            for row, cells in enumerate(table):
                for col, cell in enumerate(cells):
                    lines.append((72.0 + 120 * col, 560.0 - 16 * row, cell))
        pages.append(lines)
    path.write_bytes(pdf_bytes(pages))
    return path


def docx_file(path: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_heading("Tenancy agreement", level=1)
    document.add_paragraph("This agreement is made between the landlord and the tenant.")
    document.add_heading("Clause 7: Pets", level=2)
    document.add_paragraph("The tenant may keep one cat named Biscuit, and no other animals.")
    document.add_paragraph("Rent is due on the first day of each month", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Item", "Amount"
    table.cell(1, 0).text, table.cell(1, 1).text = "Deposit", "900"
    document.save(path)
    return path


def xlsx_file(path: Path) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Inventory"
    sheet.append(["Item", "Count", "Shelf"])
    sheet.append(["Teapot", 12, "B3"])
    sheet.append(["Kettle", 4, "C1"])
    book.create_sheet("Empty")
    book.save(path)
    return path


def pptx_file(path: Path) -> Path:
    from pptx import Presentation

    deck = Presentation()
    for title, body in (("Launch plan", "Ship the lantern in spring."), ("Risks", "The glass supplier is late.")):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(path)
    return path


def zip_bomb_docx(path: Path, expanded_mb: int = 600) -> Path:
    """A zip that claims to be a Word file and expands ~``expanded_mb`` MB from a few hundred KB."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            block = b"\0" * (1024 * 1024)
            for _ in range(expanded_mb):
                member.write(block)
    return path


def sparse_file(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk space (a hole): for size limits."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    os.utime(path)
    return path

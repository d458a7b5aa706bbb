"""Documents into text (engine/documents): real files written by the tests, converted by the
real libraries in the real worker process, and the bad files a person might attach."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.base import DocumentError
from inglenook.engine.documents import Limits, convert_bytes_safely, convert_file, documents_block, with_documents
from inglenook.engine.documents.sniff import sniff
from tests.document_files import (
    docx_file, pdf_bytes, pptx_file, report_pdf, sparse_file, xlsx_file, zip_bomb_docx,
)


def test_a_multi_page_pdf_keeps_its_pages_and_its_table(tmp_path: Path) -> None:
    document = convert_file(report_pdf(tmp_path / "report.pdf", n_pages=3))
    assert document.kind == "pdf"
    assert document.page_count == 3
    assert "Quarterly report, section 3" in document.pages[2]
    assert "## Page 2" in document.text
    # The table's rows come out in order, one line each, cells side by side.
    lines = [line.split() for line in document.pages[1].splitlines()]
    assert ["Region", "Units", "Revenue"] in lines
    assert ["North", "1200", "48000"] in lines
    assert lines.index(["Region", "Units", "Revenue"]) < lines.index(["South", "950", "38000"])
    assert len(document.sha256) == 64 and document.size == (tmp_path / "report.pdf").stat().st_size


def test_a_docx_keeps_headings_lists_and_tables(tmp_path: Path) -> None:
    document = convert_file(docx_file(tmp_path / "lease.docx"))
    assert document.kind == "docx"
    assert "# Tenancy agreement" in document.text
    assert "## Clause 7: Pets" in document.text
    assert "- Rent is due on the first day of each month" in document.text
    assert "| Deposit | 900 |" in document.text
    assert document.text.index("Clause 7") < document.text.index("Biscuit")


def test_an_xlsx_becomes_one_table_per_sheet_with_data(tmp_path: Path) -> None:
    document = convert_file(xlsx_file(tmp_path / "stock.xlsx"))
    assert document.kind == "xlsx"
    assert "## Sheet: Inventory" in document.text
    assert "| Item | Count | Shelf |" in document.text
    assert "| Teapot | 12 | B3 |" in document.text
    assert "Empty" not in document.text  # a sheet without cells adds nothing


def test_a_pptx_has_one_page_per_slide(tmp_path: Path) -> None:
    document = convert_file(pptx_file(tmp_path / "plan.pptx"))
    assert document.kind == "pptx" and document.page_count == 2
    assert "Launch plan" in document.pages[0] and "glass supplier" in document.pages[1]


def test_the_bytes_decide_not_the_name(tmp_path: Path) -> None:
    # A DOCX named .txt is read as Word; a PDF named .docx as PDF.
    docx_file(tmp_path / "a.docx").rename(tmp_path / "notes.txt")
    assert convert_file(tmp_path / "notes.txt").kind == "docx"
    (tmp_path / "odd.docx").write_bytes(pdf_bytes([[(72, 700, "hello from a pdf")]]))
    document = convert_file(tmp_path / "odd.docx")
    assert document.kind == "pdf" and "hello from a pdf" in document.text


@pytest.mark.parametrize(("name", "content", "kind", "expected"), [
    ("table.csv", "city,people\nOslo,700000\n", "csv", "| Oslo | 700000 |"),
    ("page.html", "<html><head><script>var x=1</script></head><body><h2>Menu</h2><p>Soup of the day</p>"
                  "<ul><li>bread</li></ul></body></html>", "html", "## Menu"),
    ("notes.md", "# Title\n\nSome *text*.", "markdown", "# Title"),
    ("tool.py", "def main():\n    return 1\n", "code", "```python\ndef main():"),
    ("log", "2024-01-01 started\n2024-01-01 stopped\n", "text", "started"),
    ("snippet.bin", "<!DOCTYPE html><p>hi</p>", "html", "hi"),
])
def test_kinds_of_text(tmp_path: Path, name: str, content: str, kind: str, expected: str) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    document = convert_file(tmp_path / name)
    assert document.kind == kind
    assert expected in document.text
    if kind == "html":
        assert "var x" not in document.text


def test_text_in_another_encoding_is_decoded(tmp_path: Path) -> None:
    text = "Café crème brûlée à la carte, déjà vu, naïve façade. " * 20
    (tmp_path / "latin.txt").write_bytes(text.encode("cp1252"))
    assert "crème brûlée" in convert_file(tmp_path / "latin.txt").text
    (tmp_path / "utf16.txt").write_bytes(text.encode("utf-16"))  # with a BOM
    assert "déjà vu" in convert_file(tmp_path / "utf16.txt").text


def test_a_binary_renamed_txt_is_refused(tmp_path: Path) -> None:
    (tmp_path / "photo.txt").write_bytes(bytes(range(256)) * 64)
    with pytest.raises(DocumentError, match="binary file"):
        convert_file(tmp_path / "photo.txt")


def test_a_damaged_pdf_says_so(tmp_path: Path) -> None:
    good = pdf_bytes([[(72, 700, "text")]])
    (tmp_path / "cut.pdf").write_bytes(good[:60])
    with pytest.raises(DocumentError, match="not a readable PDF"):
        convert_file(tmp_path / "cut.pdf")


def test_an_encrypted_pdf_says_it_needs_a_password(tmp_path: Path) -> None:
    (tmp_path / "locked.pdf").write_bytes(pdf_bytes([[(72, 700, "secret")]], encrypt=True))
    with pytest.raises(DocumentError, match="password"):
        convert_file(tmp_path / "locked.pdf")


def test_a_scanned_pdf_says_it_has_no_text(tmp_path: Path) -> None:
    (tmp_path / "scan.pdf").write_bytes(pdf_bytes([[(72, 700, "picture of words")]] * 2, image_only=True))
    with pytest.raises(DocumentError, match="scanned"):
        convert_file(tmp_path / "scan.pdf")


def test_a_zip_bomb_dressed_as_docx_is_not_opened(tmp_path: Path) -> None:
    bomb = zip_bomb_docx(tmp_path / "cv.docx", expanded_mb=500)
    assert bomb.stat().st_size < 2 * 1024 * 1024
    with pytest.raises(DocumentError, match="zip bomb"):
        convert_file(bomb)


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    huge = sparse_file(tmp_path / "huge.pdf", 500 * 1024 * 1024)
    with pytest.raises(DocumentError, match="500 MB"):
        convert_file(huge)


def test_too_much_text_is_an_error_not_a_silent_cut(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("word " * 10_000, encoding="utf-8")
    with pytest.raises(DocumentError, match="characters of text"):
        convert_file(tmp_path / "long.txt", Limits(max_chars=1000))


def test_a_conversion_past_its_time_limit_is_stopped(tmp_path: Path) -> None:
    # A 300-page PDF takes the worker far longer than a 50 ms limit allows: the worker is
    # killed at the limit and the caller hears why.
    report_pdf(tmp_path / "long.pdf", n_pages=300)
    with pytest.raises(DocumentError, match="longer than 0.05 s"):
        convert_file(tmp_path / "long.pdf", Limits(timeout_s=0.05))
    assert convert_file(tmp_path / "long.pdf").page_count == 300  # the same file within the default limit


def test_bytes_from_an_api_request_convert_the_same(tmp_path: Path) -> None:
    data = report_pdf(tmp_path / "r.pdf", n_pages=2).read_bytes()
    document = convert_bytes_safely("r.pdf", data)
    assert document == convert_file(tmp_path / "r.pdf")


def test_sniff_reads_office_kinds_from_the_zip(tmp_path: Path) -> None:
    data = xlsx_file(tmp_path / "x.bin").read_bytes()
    assert sniff("x.bin", data[:4096], data) == "xlsx"
    with pytest.raises(DocumentError, match="old binary Office"):
        sniff("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100)


def test_documents_go_first_in_a_block_of_their_own(tmp_path: Path) -> None:
    document = convert_file(docx_file(tmp_path / "lease.docx"))
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Pets?"}]
    messages, shared = with_documents(chat, [document])
    assert shared == 1
    assert messages[0] == {"role": "system", "content": documents_block([document])}
    assert messages[1:] == chat
    assert 'name="lease.docx"' in messages[0]["content"]
    assert with_documents(chat, []) == (chat, 0)


def test_passages_follow_pages_and_headings_and_stay_short() -> None:
    from inglenook.engine.documents import Document, split_passages

    long_paragraph = "The mill turned all night. " * 80  # ~2,100 characters: cut at sentence ends
    text = (f"## Page 1\n\nIntro line.\n\nSecond paragraph.\n\n## Page 2\n\n{long_paragraph}\n\n"
            "# Clause 7: Pets\n\nOne cat.")
    passages = split_passages(Document("d.pdf", "pdf", "0" * 64, 1, text), max_chars=1000)
    labels = [p.label for p in passages]
    assert labels[0] == "page 1" and passages[0].text == "Intro line.\n\nSecond paragraph."
    assert labels.count("page 2") == 3 and all(len(p.text) <= 1000 for p in passages)
    assert all(p.text.endswith("night.") for p in passages if p.label == "page 2")
    assert passages[-1].label == "Clause 7: Pets" and "One cat." in passages[-1].text
    assert [p.ordinal for p in passages] == list(range(len(passages)))

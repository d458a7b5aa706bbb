"""Text files into Markdown: decoding (BOMs, UTF-8, then a detected encoding), telling binary
from text, and the kinds of text — CSV as a table, HTML as headings and paragraphs, source
code in a fence. Runs in the conversion worker (``child.py``)."""

from __future__ import annotations

import codecs
import csv
import io
from html.parser import HTMLParser
from pathlib import PurePath

from ..base import DocumentError
from .sniff import CODE_EXTENSIONS, CSV_EXTENSIONS

_BOMS = [
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
]
# Control characters that never appear in text (tab, newlines, form feed and escape do).
_BINARY_BYTES = set(range(0, 8)) | {11} | set(range(14, 27)) | set(range(28, 32))
MAX_TABLE_ROWS = 5000


def decode(name: str, data: bytes) -> str:
    """``data`` as text, or a DocumentError saying it is not text."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom):].decode(encoding)
            except UnicodeDecodeError:
                raise DocumentError(f"{name} starts like {encoding} text but is not valid {encoding}") from None
    sample = data[:65536]
    if sample and sum(b in _BINARY_BYTES for b in sample) > max(1, len(sample) // 1000):
        raise DocumentError(f"{name} is a binary file, not text or a document Inglenook reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes  # noqa: PLC0415 — only for text that is not UTF-8

    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        raise DocumentError(f"{name} is not text in any encoding Inglenook recognises")
    # Western single-byte text fits several code pages almost equally well by the detector's
    # measure (French in cp1252 scored 0.1 "chaos" against cp1257's 0.0, which turns è into
    # č): among nearly equally clean readings, take Windows-1252, by far the most common.
    for match in matches:
        if match.encoding in ("cp1252", "latin_1") and match.chaos <= best.chaos + 0.12:
            return str(match)
    return str(best)


def convert_text(name: str, kind: str, data: bytes) -> str:
    text = decode(name, data).replace("\r\n", "\n").replace("\r", "\n")
    if kind == "csv":
        return csv_table(text, CSV_EXTENSIONS.get(PurePath(name).suffix.lower(), ","))
    if kind == "html":
        return html_to_markdown(text)
    if kind == "code":
        language = CODE_EXTENSIONS.get(PurePath(name).suffix.lower(), "")
        fence = "````" if "```" in text else "```"
        return f"{fence}{language}\n{text.rstrip()}\n{fence}"
    return text


def markdown_table(rows: list[list[str]]) -> str:
    """Rows (the first is the header) as a Markdown table; cells on one line, pipes escaped."""
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)

    def line(cells: list[str]) -> str:
        cells = [c.replace("\n", " ").replace("|", "\\|").strip() for c in cells] + [""] * (width - len(cells))
        return "| " + " | ".join(cells) + " |"

    out = [line(rows[0]), "|" + "---|" * width]
    out += [line(r) for r in rows[1:]]
    return "\n".join(out)


def csv_table(text: str, delimiter: str) -> str:
    rows = []
    for i, row in enumerate(csv.reader(io.StringIO(text), delimiter=delimiter)):
        if i >= MAX_TABLE_ROWS:
            rows.append([f"… {len(text.splitlines()) - i} more rows"])
            break
        rows.append(row)
    return markdown_table(rows)


class _HtmlText(HTMLParser):
    """HTML into Markdown-ish text: headings, paragraphs, list items, table rows; no scripts."""

    _SKIP = {"script", "style", "noscript", "template", "head"}
    _BLOCK = {"p", "div", "section", "article", "br", "tr", "ul", "ol", "table", "blockquote", "pre", "hr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.parts.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in ("td", "th"):
            self.parts.append(" | ")
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6", "p", "div", "table", "ul", "ol"):
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(" ".join(data.split()) if data.strip() else (" " if data else ""))


def html_to_markdown(text: str) -> str:
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    lines = [line.strip() for line in "".join(parser.parts).split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()

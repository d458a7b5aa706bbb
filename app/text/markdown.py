"""Markdown for chat messages: fenced code is split out (to get its own highlighted widget
with a copy button); everything else is rendered by Qt's own Markdown reader (GitHub
dialect: paragraphs, lists, tables, links, quotes), with TeX math as Unicode (math_text),
then touched up for the theme. Citations of documents (``[report.pdf, page 3]``) become
``cite:`` links, which the window opens in the document's preview (``attachments``).
"""

from __future__ import annotations

import functools
import html
import logging
import re
from dataclasses import dataclass
from urllib.parse import quote

from PySide6.QtGui import (
    QColor,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextLength,
    QTextTable,
)

from inglenook.app.text.math_text import math_to_markdown

CITE_SCHEME = "cite"
# "[name.ext]" or "[name.ext, where]", not already a Markdown link's text.
_CITATION = re.compile(r"(?<![\\!\]])\[(?P<name>[^\[\]\n,]{1,160}\.[A-Za-z0-9]{1,8})(?:,\s*(?P<where>[^\[\]\n]{1,120}))?\](?![(\[])")


def link_citations(markdown: str) -> str:
    """``markdown`` with each citation a ``cite:`` link (its text unchanged)."""
    def link(match: re.Match[str]) -> str:
        where = match.group("where") or ""
        url = f"{CITE_SCHEME}:{quote(match.group('name'), safe='')}" + (f"#{quote(where, safe='')}" if where else "")
        return f"[\\[{match.group(0)[1:-1]}\\]]({url})"  # the brackets stay in the link's text

    return _CITATION.sub(link, markdown)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$")


@dataclass
class Segment:
    kind: str  # "text" | "code"
    content: str
    language: str = ""
    closed: bool = True  # False for a code block still streaming in


def split_segments(text: str) -> list[Segment]:
    """Split Markdown into prose and fenced code blocks, in order.

    An unclosed fence (an answer still streaming) yields an open code segment, so code
    appears in its code block from its first line instead of flashing as prose.
    """
    segments: list[Segment] = []
    prose: list[str] = []
    code: list[str] = []
    fence = ""
    language = ""
    for line in text.split("\n"):
        if not fence:
            match = _FENCE.match(line)
            if match:
                if prose:
                    segments.append(Segment("text", "\n".join(prose)))
                    prose = []
                fence, language, code = match.group(1), match.group(2), []
            else:
                prose.append(line)
            continue
        stripped = line.strip()
        if stripped and stripped[0] == fence[0] and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            segments.append(Segment("code", "\n".join(code), language, closed=True))
            fence = ""
            continue
        code.append(line)
    if fence:
        segments.append(Segment("code", "\n".join(code), language, closed=False))
    elif prose:
        joined = "\n".join(prose)
        if joined.strip() or not segments:
            segments.append(Segment("text", joined))
    return [s for s in segments if s.kind == "code" or s.content.strip()] or [Segment("text", "")]


_LIST_MARKER = re.compile(r"^(?:[-*+]|\d{1,9}[.)])(?:\s|$)")


def split_prose(text: str) -> list[str]:
    """Prose cut into runs of paragraphs that render the same apart as together, so a
    streaming answer re-renders only its last run: each update costs what the new text
    costs, not what the whole answer (or the whole conversation) holds.

    A cut falls only at a blank line followed by a line at the margin, and not between two
    items of one list (a list whose items are separated by blank lines is one list, numbered
    on), nor inside a ``$$`` display formula (fences are split out before this). What lies between cuts is rendered as
    its own document, so nothing on one side of a cut can change how the other side reads.
    """
    runs: list[str] = []
    current: list[str] = []
    blank = False
    in_list = False  # the block before the blank line belongs to a list
    dollars = 0
    for line in text.split("\n"):
        at_margin = line[:1] not in ("", " ", "\t")
        item = bool(_LIST_MARKER.match(line))
        if blank and current and at_margin and not (item and in_list) and dollars % 2 == 0:
            runs.append("\n".join(current).rstrip("\n"))
            current = []
        if blank and line.strip():
            in_list = item or (in_list and not at_margin)  # an indented block goes on with the list
        elif not current or (not blank and item):
            in_list = in_list or item
        current.append(line)
        blank = not line.strip()
        dollars += line.count("$$")
    if current:
        runs.append("\n".join(current))
    return [run for run in runs if run.strip()] or [text]


def render_markdown(document: QTextDocument, text: str, palette: dict[str, str]) -> None:
    """Fill ``document`` from Markdown and style what Qt leaves plain (tables, quotes, inline code)."""
    # Citations after math: their escaped brackets would read as TeX display math (\[ … \]).
    document.setMarkdown(link_citations(math_to_markdown(text)), QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
    _style_document(document, palette)


def _style_document(document: QTextDocument, palette: dict[str, str]) -> None:
    border = QColor(palette["border"])
    muted = QColor(palette["muted"])
    code_bg = QColor(palette["code_header"])
    for frame in document.rootFrame().childFrames():
        if isinstance(frame, QTextTable):
            fmt = frame.format()
            fmt.setBorder(1)
            fmt.setBorderBrush(border)
            fmt.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
            fmt.setBorderCollapse(True)
            fmt.setCellPadding(6)
            fmt.setCellSpacing(0)
            fmt.setTopMargin(6)
            fmt.setBottomMargin(10)
            fmt.setWidth(QTextLength(QTextLength.Type.PercentageLength, 100))
            frame.setFormat(fmt)
    # The fragments to restyle are found first, then changed in one edit block: a change made
    # outside one lays the document out again, so styling each of an answer's inline code
    # spans on its own cost time in the square of their number (seconds per update for a
    # streamed answer with a few thousand spans, during which the window did not respond).
    changes: list[tuple[int, int, QTextCharFormat]] = []
    block = document.begin()
    while block.isValid():
        quote_level = block.blockFormat().intProperty(QTextFormat.Property.BlockQuoteLevel)
        preformatted = block.blockFormat().nonBreakableLines()
        iterator = block.begin()
        while not iterator.atEnd():
            fragment = iterator.fragment()
            if fragment.isValid():
                change = QTextCharFormat()
                changed = False
                if fragment.charFormat().fontFixedPitch() and not preformatted:
                    change.setBackground(code_bg)
                    changed = True
                if quote_level > 0:
                    change.setForeground(muted)
                    changed = True
                if changed:
                    changes.append((fragment.position(), fragment.position() + fragment.length(), change))
            iterator += 1
        block = block.next()
    if not changes:
        return
    cursor = QTextCursor(document)
    cursor.beginEditBlock()
    for start, end, change in changes:
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(change)
    cursor.endEditBlock()


@functools.cache
def _say_no_highlighting(reason: str) -> None:
    # Pygments is a declared dependency: without it the install is damaged. Code still shows,
    # plain; the log says why once instead of on every repaint of a streaming answer.
    logging.getLogger(__name__).warning("code is shown without highlighting: %s", reason)


def highlight_code(code: str, language: str, style: str) -> str:
    """HTML (inline styles, for Qt's rich text) of syntax-highlighted code."""
    try:
        from pygments import highlight  # noqa: PLC0415 — loaded the first time code is shown
        from pygments.formatters import HtmlFormatter  # noqa: PLC0415
        from pygments.lexers import get_lexer_by_name  # noqa: PLC0415
        from pygments.util import ClassNotFound  # noqa: PLC0415
    except ImportError as exc:
        _say_no_highlighting(str(exc))
        return f"<pre>{html.escape(code)}</pre>"
    # Never guess a language: guessing tries every lexer, and a streaming answer would
    # pay for it on each repaint. A fence without a language is shown as plain text.
    try:
        lexer = get_lexer_by_name(language or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    formatter = HtmlFormatter(nowrap=True, noclasses=True, style=style)
    body = highlight(code, lexer, formatter)
    # Pygments paints a page background in some styles; the code block has its own.
    return f"<pre style='margin:0'>{body.rstrip(chr(10))}</pre>"


def warm_up() -> None:
    """Import Pygments and common lexers ahead of time (on a worker), not during the first answer."""
    for language in ("python", "javascript", "bash", "json", "text"):
        highlight_code("x = 1", language, "friendly")

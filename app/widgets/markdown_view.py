"""Markdown on screen: prose as rich text that sizes to its content, code blocks with
highlighting and a Copy button, and the body that holds an answer's segments (re-rendering
only the segment, and within prose only the run of paragraphs, that grew while an answer
streams)."""

from __future__ import annotations

import math

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication, QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.app.widgets import theme
from inglenook.app.text.markdown import Segment, highlight_code, render_markdown, split_prose, split_segments


class RichText(QTextBrowser):
    """A read-only text area exactly as tall as its text; wheel events go to the page."""

    def __init__(self, parent: QWidget | None = None, wrap: bool = True) -> None:
        super().__init__(parent)
        self.setObjectName("MessageBody")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(
            Qt.ScrollBarPolicy.ScrollBarAlwaysOff if wrap else Qt.ScrollBarPolicy.ScrollBarAsNeeded
        )
        self.setLineWrapMode(QTextBrowser.LineWrapMode.WidgetWidth if wrap else QTextBrowser.LineWrapMode.NoWrap)
        self.setOpenExternalLinks(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.viewport().setAutoFillBackground(False)
        self.document().setDocumentMargin(0)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.DefaultContextMenu)
        self._wrap = wrap
        self.preferred_width = 400  # what the layout is asked for; a bubble sets its text's width
        self.document().documentLayout().documentSizeChanged.connect(self._fit)

    def _fit(self, *_args: object) -> None:
        height = math.ceil(self.document().size().height())
        if not self._wrap and self.horizontalScrollBar().isVisible():
            height += self.horizontalScrollBar().height()
        if height != self.height():
            self.setFixedHeight(max(height, 1))

    def resizeEvent(self, event) -> None:  # noqa: ANN001, N802
        super().resizeEvent(event)
        # setTextWidth lays out the whole document again, even at the width it has: only
        # when the width changed (this widget's height follows its text on every update).
        if self._wrap and self.document().textWidth() != self.viewport().width():
            self.document().setTextWidth(self.viewport().width())
        self._fit()

    def ideal_width(self) -> int:
        return math.ceil(self.document().idealWidth()) + 4

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(self.preferred_width, self.height())

    def wheelEvent(self, event) -> None:  # noqa: ANN001, N802
        if self._wrap:
            event.ignore()  # let the conversation scroll
        else:
            super().wheelEvent(event)


class CodeBlock(QFrame):
    """A fenced code block: language, a copy button, highlighted code that scrolls sideways."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CodeBlock")
        self._code = ""
        self._language = ""
        self._mode = ""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        header = QWidget(self)
        header.setObjectName("CodeHeader")
        header.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        row = QHBoxLayout(header)
        row.setContentsMargins(12, 4, 6, 4)
        self.language_label = QLabel("", header)
        self.language_label.setObjectName("CodeLanguage")
        self.copy_button = QToolButton(header)
        self.copy_button.setObjectName("CodeCopy")
        self.copy_button.setText("Copy")
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.copy_button.clicked.connect(self.copy)
        self._reset_timer = QTimer(self)  # a child: it dies with the block, never fires on a deleted button
        self._reset_timer.setSingleShot(True)
        self._reset_timer.timeout.connect(lambda: self.copy_button.setText("Copy"))
        row.addWidget(self.language_label)
        row.addStretch(1)
        row.addWidget(self.copy_button)
        self.text = RichText(self, wrap=False)
        self.text.setObjectName("CodeText")
        self.text.document().setDocumentMargin(12)
        self.text.document().setDefaultFont(theme.mono_font())
        self.text.setWordWrapMode(QTextOption.WrapMode.NoWrap)
        layout.addWidget(header)
        layout.addWidget(self.text)

    @property
    def code(self) -> str:
        return self._code

    def set_code(self, code: str, language: str) -> None:
        mode = theme.current_mode()
        if code == self._code and language == self._language and mode == self._mode:
            return
        self._code, self._language, self._mode = code, language, mode
        self.language_label.setText(language or "code")
        self.text.setHtml(highlight_code(code, language, theme.CODE_STYLES[mode]))

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self._code)
        self.copy_button.setText("Copied")
        self._reset_timer.start(1500)


PARAGRAPH_GAP = 6  # what Qt's Markdown reader leaves between two paragraphs of one document


class Prose(QWidget):
    """A run of prose as a column of documents, one per ``split_prose`` run: while an answer
    streams, only the run that grew is rendered and laid out again, so an update costs what
    the new text costs however long the answer already is."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(PARAGRAPH_GAP)
        self._runs: list[tuple[str, RichText]] = []

    def set_text(self, text: str, palette: dict[str, str]) -> None:
        runs = split_prose(text)
        for index, run in enumerate(runs):
            if index < len(self._runs):
                if self._runs[index][0] == run:
                    continue
                widget = self._runs[index][1]
            else:
                widget = RichText(self)
                self._layout.addWidget(widget)
            render_markdown(widget.document(), run, palette)
            if index < len(self._runs):
                self._runs[index] = (run, widget)
            else:
                self._runs.append((run, widget))
        while len(self._runs) > len(runs):
            _, widget = self._runs.pop()
            widget.hide()
            widget.deleteLater()

    def documents(self) -> list[RichText]:
        return [widget for _, widget in self._runs]


class MarkdownBody(QWidget):
    """A message's text as a column of prose and code widgets, updated in place."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(10)
        self._widgets: list[tuple[Segment, QWidget]] = []
        self._mode = ""

    def set_markdown(self, text: str) -> None:
        segments = split_segments(text)
        mode = theme.current_mode()
        if mode != self._mode:
            self._mode = mode
            self._clear()  # colours are baked into rendered text; redo it for the new theme
        for index, segment in enumerate(segments):
            if index < len(self._widgets):
                old, widget = self._widgets[index]
                if old.kind != segment.kind:
                    self._truncate(index)
                elif old == segment:
                    continue
                else:
                    self._update(widget, segment)
                    self._widgets[index] = (segment, widget)
                    continue
            widget = self._make(segment)
            self._layout.addWidget(widget)
            self._widgets.append((segment, widget))
        self._truncate(len(segments))

    def code_blocks(self) -> list[CodeBlock]:
        return [w for _, w in self._widgets if isinstance(w, CodeBlock)]

    def _make(self, segment: Segment) -> QWidget:
        widget: QWidget = CodeBlock(self) if segment.kind == "code" else Prose(self)
        self._update(widget, segment)
        return widget

    def _update(self, widget: QWidget, segment: Segment) -> None:
        if isinstance(widget, CodeBlock):
            widget.set_code(segment.content, segment.language)
        elif isinstance(widget, Prose):
            widget.set_text(segment.content, theme.colors(self._mode))

    def _truncate(self, count: int) -> None:
        while len(self._widgets) > count:
            _, widget = self._widgets.pop()
            widget.hide()
            widget.deleteLater()

    def _clear(self) -> None:
        self._truncate(0)

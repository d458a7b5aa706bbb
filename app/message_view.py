"""The conversation view: message cards, Markdown with highlighted code, streaming, auto-scroll.

Streaming never rebuilds what is already on screen: an answer is split into prose and
code segments and only the segment that grew is re-rendered, so earlier text does not
flicker. The view follows the answer while the user is at the bottom and stops following
the moment they scroll up; scrolling back to the bottom resumes it.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QIcon, QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import Message

from . import theme
from .markdown import Segment, highlight_code, render_markdown, split_segments
from .resources import resource_path

COLUMN_WIDTH = 800  # the reading column; wider lines are hard to read


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
        self.document().documentLayout().documentSizeChanged.connect(self._fit)

    def _fit(self, *_args: object) -> None:
        height = math.ceil(self.document().size().height())
        if not self._wrap and self.horizontalScrollBar().isVisible():
            height += self.horizontalScrollBar().height()
        if height != self.height():
            self.setFixedHeight(max(height, 1))

    def resizeEvent(self, event) -> None:  # noqa: ANN001, N802
        super().resizeEvent(event)
        if self._wrap:
            self.document().setTextWidth(self.viewport().width())
        self._fit()

    def ideal_width(self) -> int:
        return math.ceil(self.document().idealWidth()) + 4

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(400, self.height())

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
        widget: QWidget = CodeBlock(self) if segment.kind == "code" else RichText(self)
        self._update(widget, segment)
        return widget

    def _update(self, widget: QWidget, segment: Segment) -> None:
        if isinstance(widget, CodeBlock):
            widget.set_code(segment.content, segment.language)
        elif isinstance(widget, RichText):
            render_markdown(widget.document(), segment.content, theme.colors(self._mode))

    def _truncate(self, count: int) -> None:
        while len(self._widgets) > count:
            _, widget = self._widgets.pop()
            widget.hide()
            widget.deleteLater()

    def _clear(self) -> None:
        self._truncate(0)


def _action(text: str, parent: QWidget, tip: str) -> QToolButton:
    button = QToolButton(parent)
    button.setObjectName("MessageAction")
    button.setText(text)
    button.setToolTip(tip)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


def stats_text(message: Message) -> str:
    parts: list[str] = []
    if message.completion_tokens:
        parts.append(f"{message.completion_tokens} tokens")
    if message.tokens_per_s:
        parts.append(f"{message.tokens_per_s:.1f} tok/s")
    if message.ttft_ms is not None and message.completion_tokens:
        parts.append(f"first token {message.ttft_ms:.0f} ms")
    if message.cached_tokens:
        parts.append(f"{message.cached_tokens} prompt tokens from cache")
    return "  ·  ".join(parts)


class MessageWidget(QWidget):
    """One message. User messages are bubbles on the right; answers are cards on the left."""

    regenerate_requested = Signal()
    edit_submitted = Signal(int, str)  # (message id, new text)

    def __init__(self, role: str, parent: QWidget | None = None, author: str = "") -> None:
        super().__init__(parent)
        self.role = role
        self.message: Message | None = None
        self._text = ""
        self.streaming = False
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(4)
        if role == "user":
            self._build_user(outer)
        else:
            self._build_assistant(outer, author)

    # -- construction -----------------------------------------------------------------

    def _build_user(self, outer: QVBoxLayout) -> None:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.bubble = QFrame(self)
        self.bubble.setObjectName("UserBubble")
        bubble_layout = QVBoxLayout(self.bubble)
        bubble_layout.setContentsMargins(16, 10, 16, 10)
        self.body_text = RichText(self.bubble)
        self.body_text.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        bubble_layout.addWidget(self.body_text)
        self.editor = QPlainTextEdit(self.bubble)
        self.editor.setObjectName("EditInput")
        self.editor.setMinimumHeight(80)
        self.editor.hide()
        bubble_layout.addWidget(self.editor)
        self.edit_buttons = QWidget(self.bubble)
        edit_row = QHBoxLayout(self.edit_buttons)
        edit_row.setContentsMargins(0, 4, 0, 0)
        edit_row.addStretch(1)
        cancel = QPushButton("Cancel", self.edit_buttons)
        cancel.clicked.connect(self.cancel_edit)
        self.resend_button = QPushButton("Save && send", self.edit_buttons)
        self.resend_button.setObjectName("PrimaryButton")
        self.resend_button.clicked.connect(self._submit_edit)
        edit_row.addWidget(cancel)
        edit_row.addWidget(self.resend_button)
        self.edit_buttons.hide()
        bubble_layout.addWidget(self.edit_buttons)
        row.addWidget(self.bubble)
        outer.addLayout(row)
        actions = QHBoxLayout()
        actions.setContentsMargins(0, 0, 4, 0)
        actions.addStretch(1)
        self.copy_button = _action("Copy", self, "Copy this message")
        self.edit_button = _action("Edit", self, "Edit this message and answer again")
        self.copy_button.clicked.connect(self.copy)
        self.edit_button.clicked.connect(self.begin_edit)
        actions.addWidget(self.copy_button)
        actions.addWidget(self.edit_button)
        outer.addLayout(actions)

    def _build_assistant(self, outer: QVBoxLayout, author: str) -> None:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(12)
        avatar = QLabel(self)
        avatar.setFixedSize(28, 28)
        avatar.setAlignment(Qt.AlignmentFlag.AlignCenter)
        icon_path = resource_path("inglenook.svg")
        if icon_path is not None:
            avatar.setPixmap(QIcon(str(icon_path)).pixmap(26, 26))
        else:
            avatar.setText("AI")
            avatar.setObjectName("Avatar")
        column = QVBoxLayout()
        column.setContentsMargins(0, 3, 0, 0)
        column.setSpacing(6)
        self.author_label = QLabel(author or "Assistant", self)
        self.author_label.setObjectName("Author")
        self.body = MarkdownBody(self)
        self.typing = QLabel("Thinking…", self)
        self.typing.setObjectName("StatusNote")
        self.typing.hide()
        self.note = QLabel("", self)
        self.note.setObjectName("StatusNote")
        self.note.hide()
        column.addWidget(self.author_label)
        column.addWidget(self.typing)
        column.addWidget(self.body)
        column.addWidget(self.note)
        footer = QHBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.setSpacing(2)
        self.copy_button = _action("Copy", self, "Copy this answer")
        self.regenerate_button = _action("Regenerate", self, "Answer again")
        self.copy_button.clicked.connect(self.copy)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.stats = QLabel("", self)
        self.stats.setObjectName("Stats")
        footer.addWidget(self.copy_button)
        footer.addWidget(self.regenerate_button)
        footer.addSpacing(8)
        footer.addWidget(self.stats)
        footer.addStretch(1)
        self.footer = QWidget(self)
        self.footer.setLayout(footer)
        column.addWidget(self.footer)
        row.addWidget(avatar, 0, Qt.AlignmentFlag.AlignTop)
        row.addLayout(column, 1)
        outer.addLayout(row)

    # -- content ----------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self._text

    def set_message(self, message: Message) -> None:
        self.message = message
        self.streaming = False
        self.set_text(message.content)
        if self.role != "user":
            self.typing.hide()
            self.footer.show()
            self.stats.setText(stats_text(message))
            if message.model_id:
                self.author_label.setText(message.model_id)
            notes = {"partial": "Stopped", "error": "The answer was cut short by an error"}
            self.note.setText(notes.get(message.status, ""))
            self.note.setVisible(message.status in notes)

    def begin_streaming(self) -> None:
        self.streaming = True
        self.typing.show()
        self.footer.hide()

    def set_text(self, text: str) -> None:
        if text == self._text and (self.role != "user" or self.body_text.document().toPlainText()):
            return
        self._text = text
        if self.role == "user":
            self.body_text.setPlainText(text)
            self._fit_bubble()
        else:
            if text:
                self.typing.hide()
            self.body.set_markdown(text)

    def set_last_answer(self, last: bool) -> None:
        if self.role != "user":
            self.regenerate_button.setVisible(last)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self._text)

    # -- editing (user messages) ------------------------------------------------------

    def begin_edit(self) -> None:
        self.editor.setPlainText(self._text)
        self.body_text.hide()
        self.editor.show()
        self.edit_buttons.show()
        self.bubble.setMaximumWidth(16777215)
        self.bubble.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.editor.setFocus()

    def cancel_edit(self) -> None:
        self.editor.hide()
        self.edit_buttons.hide()
        self.body_text.show()
        self.bubble.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self._fit_bubble()

    def _submit_edit(self) -> None:
        text = self.editor.toPlainText().strip()
        if not text or self.message is None:
            return
        self.cancel_edit()
        self.edit_submitted.emit(self.message.id, text)

    def _fit_bubble(self) -> None:
        if self.role != "user" or self.editor.isVisible():
            return
        limit = max(120, int(self.width() * 0.78) - 32)
        self.body_text.document().setTextWidth(limit)
        width = min(limit, self.body_text.ideal_width())
        self.body_text.setFixedWidth(width)
        self.body_text.document().setTextWidth(width)
        self.body_text._fit()

    def resizeEvent(self, event) -> None:  # noqa: ANN001, N802
        super().resizeEvent(event)
        self._fit_bubble()


class EmptyState(QWidget):
    """What a new chat shows: a greeting and a few prompts to try."""

    suggestion_chosen = Signal(str)

    SUGGESTIONS = (
        "Explain how a hash map works, with a short Python example",
        "Write a haiku about a warm fireplace",
        "Summarize the main ideas of stoicism in five bullet points",
        "What are good questions to ask in a job interview?",
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("EmptyState")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 80, 0, 0)
        layout.setSpacing(10)
        title = QLabel("How can I help?", self)
        title.setObjectName("EmptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = QLabel("Everything runs on this computer. Nothing you type leaves it.", self)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(title)
        layout.addWidget(hint)
        layout.addSpacing(18)
        grid = QVBoxLayout()
        grid.setSpacing(8)
        for text in self.SUGGESTIONS:
            button = QPushButton(text, self)
            button.setObjectName("Suggestion")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _=False, t=text: self.suggestion_chosen.emit(t))
            grid.addWidget(button)
        holder = QHBoxLayout()
        holder.addStretch(1)
        holder.addLayout(grid, 4)
        holder.addStretch(1)
        layout.addLayout(holder)
        layout.addStretch(1)


class ConversationView(QScrollArea):
    """The scrolling column of messages."""

    regenerate_requested = Signal()
    edit_submitted = Signal(int, str)
    suggestion_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ConversationScroll")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        page = QWidget(self)
        page.setObjectName("MessageColumn")
        centering = QHBoxLayout(page)
        centering.setContentsMargins(24, 24, 24, 24)
        self.column = QWidget(page)
        self.column.setMaximumWidth(COLUMN_WIDTH)
        self._layout = QVBoxLayout(self.column)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(22)
        self._layout.addStretch(1)
        centering.addStretch(0)
        centering.addWidget(self.column, 1)
        centering.addStretch(0)
        self.setWidget(page)
        self.empty = EmptyState(self.column)
        self.empty.suggestion_chosen.connect(self.suggestion_chosen)
        self._layout.insertWidget(0, self.empty)
        self.widgets: list[MessageWidget] = []
        self.follow = True
        self._moving = False
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    # -- scrolling --------------------------------------------------------------------

    def _on_scrolled(self, value: int) -> None:
        if not self._moving:
            self.follow = value >= self.verticalScrollBar().maximum() - 24

    def _on_range(self, _low: int, high: int) -> None:
        if self.follow:
            self._moving = True
            self.verticalScrollBar().setValue(high)
            self._moving = False

    def scroll_to_bottom(self) -> None:
        self.follow = True
        self._on_range(0, self.verticalScrollBar().maximum())

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.PaletteChange:
            self.refresh_theme()
        return super().event(event)

    # -- content ----------------------------------------------------------------------

    def clear(self) -> None:
        for widget in self.widgets:
            widget.hide()
            widget.deleteLater()
        self.widgets = []
        self.empty.show()

    def set_messages(self, messages: list[Message]) -> None:
        self.setUpdatesEnabled(False)
        try:
            self.clear()
            for message in messages:
                if message.role in ("user", "assistant"):
                    self.add_message(message)
        finally:
            self.setUpdatesEnabled(True)
        self.scroll_to_bottom()

    def add_message(self, message: Message) -> MessageWidget:
        widget = self._append(message.role, message.model_id or "")
        widget.set_message(message)
        self._mark_last()
        return widget

    def add_pending_user(self, text: str) -> MessageWidget:
        """Show the user's message at once; its id arrives when the engine has saved it."""
        widget = self._append("user")
        widget.set_text(text)
        self.scroll_to_bottom()
        return widget

    def begin_answer(self, author: str) -> MessageWidget:
        widget = self._append("assistant", author)
        widget.begin_streaming()
        self._mark_last()
        self.scroll_to_bottom()
        return widget

    def streaming_widget(self) -> MessageWidget | None:
        if self.widgets and self.widgets[-1].streaming:
            return self.widgets[-1]
        return None

    def update_answer(self, text: str) -> None:
        widget = self.streaming_widget()
        if widget is not None:
            widget.set_text(text)

    def finish_answer(self, message: Message | None) -> None:
        widget = self.streaming_widget()
        if widget is None:
            if message is not None:
                self.add_message(message)
            return
        if message is None:
            self.remove_from(len(self.widgets) - 1)
        else:
            widget.set_message(message)
        self._mark_last()

    def sync_saved(self, messages: list[Message]) -> None:
        """Attach saved messages (with ids) to the widgets showing them, in order."""
        shown = [w for w in self.widgets if not w.streaming]
        saved = [m for m in messages if m.role in ("user", "assistant")]
        for widget, message in zip(shown, saved):
            if widget.role == message.role:
                widget.message = message

    def remove_from(self, index: int) -> None:
        for widget in self.widgets[index:]:
            widget.hide()
            widget.deleteLater()
        self.widgets = self.widgets[:index]
        self.empty.setVisible(not self.widgets)
        self._mark_last()

    def index_of_message(self, message_id: int) -> int | None:
        for index, widget in enumerate(self.widgets):
            if widget.message is not None and widget.message.id == message_id:
                return index
        return None

    def last_answer_text(self) -> str:
        for widget in reversed(self.widgets):
            if widget.role == "assistant" and widget.text:
                return widget.text
        return ""

    def refresh_theme(self) -> None:
        for widget in self.widgets:
            if widget.role == "assistant":
                widget.body.set_markdown(widget.text)

    def _append(self, role: str, author: str = "") -> MessageWidget:
        self.empty.hide()
        widget = MessageWidget(role, self.column, author)
        widget.regenerate_requested.connect(self.regenerate_requested)
        widget.edit_submitted.connect(self.edit_submitted)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.widgets.append(widget)
        return widget

    def _mark_last(self) -> None:
        answers = [w for w in self.widgets if w.role == "assistant"]
        for widget in answers:
            widget.set_last_answer(widget is answers[-1] and widget is self.widgets[-1])


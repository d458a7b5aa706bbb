"""One message card: who wrote it, its text, its stats (tokens, speed, cache), and the actions
(copy, edit and resend, regenerate)."""

from __future__ import annotations

from inglenook.engine import Message, PromptProgress
from PySide6.QtCore import Qt, QTimer, Signal, SignalInstance
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import split_whole

from inglenook.app.text.formatting import human_duration
from inglenook.app.widgets.image_viewer import Picture, ThumbnailRow
from inglenook.app.widgets.markdown_view import MarkdownBody, RichText
from inglenook.app.pages.chat.message_actions import MoreMenu, ReadAloudButton, VersionPager
from inglenook.app.pages.chat.reasoning_view import ReasoningView
from inglenook.app.services.resources import resource_path


STARTING = "Starting the answer…"  # before the first text (then the prompt's reading progress)
COPIED_MS = 1500  # how long Copy says "Copied"


def _action(text: str, parent: QWidget, tip: str) -> QToolButton:
    button = QToolButton(parent)
    button.setObjectName("MessageAction")
    button.setText(text)
    button.setToolTip(tip)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


def first_token_text(ms: float) -> str:
    """Seconds with one decimal, whatever the wait (answers side by side compare at a glance:
    "0.4 s" beside "17.7 s", never "9102 ms"); minutes past a minute."""
    if ms < 50:
        return "< 0.1 s"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return human_duration(ms / 1000)


def stats_text(message: Message) -> str:
    parts: list[str] = []
    if message.completion_tokens:
        parts.append(f"{message.completion_tokens} tokens")
    if message.tokens_per_s:
        parts.append(f"{message.tokens_per_s:.1f} tok/s")
    if message.ttft_ms is not None and message.completion_tokens:
        parts.append(f"first token {first_token_text(message.ttft_ms)}")
    if message.cached_tokens:
        parts.append(f"{message.cached_tokens} prompt tokens from cache")
    return "  ·  ".join(parts)


class MessageWidget(QWidget):
    """One message. User messages are bubbles on the right; answers are cards on the left."""

    regenerate_requested = Signal()
    edit_submitted = Signal(int, str)  # (message id, new text)
    version_chosen = Signal(int)  # the id of another version of this message, to show instead
    continue_requested = Signal()
    edit_text_requested = Signal(int)  # (message id): rewrite an answer in place
    branch_requested = Signal(int)  # (message id): a new chat holding this one up to here
    delete_requested = Signal(int)  # (message id)
    picture_clicked = Signal(object)  # a Picture of the message's images, to see larger
    read_aloud_toggled = Signal(object)  # the answer's ReadAloudButton, checked or unchecked
    picture_row: ThumbnailRow | None = None  # a user message's images (set_pictures)

    def __init__(self, role: str, parent: QWidget | None = None, author: str = "") -> None:
        super().__init__(parent)
        self.role = role
        self.message: Message | None = None
        self._text = ""
        self._answer = ""
        self.streaming = False
        self.stream_start = ""  # the text a continued answer had before this stream
        self._copied_timer: QTimer | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(4)
        if role == "user":
            self._build_user(outer)
        else:
            self._build_assistant(outer, author)

    # -- construction -----------------------------------------------------------------

    def set_pictures(self, pictures: list[Picture]) -> None:
        """Thumbnails of the images sent with this (user) message, above its text."""
        if self.role != "user":
            return
        if self.picture_row is not None:
            self.picture_row.deleteLater()
            self.picture_row = None
        if pictures:
            self.picture_row = ThumbnailRow(pictures, self.bubble)
            self.picture_row.picture_clicked.connect(self.picture_clicked)
            layout = self.bubble.layout()
            assert isinstance(layout, QVBoxLayout)
            layout.insertWidget(0, self.picture_row)

    def _build_user(self, outer: QVBoxLayout) -> None:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        self.bubble = QFrame(self)
        self.bubble.setObjectName("UserBubble")
        bubble_layout = QVBoxLayout(self.bubble)
        bubble_layout.setContentsMargins(16, 10, 16, 10)
        self.body_text = RichText(self.bubble)
        self.body_text.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
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
        actions.addWidget(self._versions_and_more())
        actions.addWidget(self.copy_button)
        actions.addWidget(self.edit_button)
        actions.addWidget(self.more)
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
        self.reasoning = ReasoningView(self)
        # Not "Thinking…": most models do not reason, and one that does shows its reasoning.
        self.typing = QLabel(STARTING, self)
        self.typing.setObjectName("StatusNote")
        self.typing.hide()
        self.note = QLabel("", self)
        self.note.setObjectName("StatusNote")
        self.note.hide()
        column.addWidget(self.author_label)
        column.addWidget(self.typing)
        column.addWidget(self.reasoning)
        column.addWidget(self.body)
        column.addWidget(self.note)
        footer = QHBoxLayout()
        footer.setContentsMargins(0, 0, 0, 0)
        footer.setSpacing(2)
        self.copy_button = _action("Copy", self, "Copy this answer")
        self.regenerate_button = _action("Regenerate", self, "Answer again")
        self.copy_button.clicked.connect(self.copy)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.read_button = ReadAloudButton(lambda: self._answer, self)
        self.read_button.toggled_reading.connect(self.read_aloud_toggled)
        self.stats = QLabel("", self)
        self.stats.setObjectName("Stats")
        # The figures wrap in a narrow window: a label that does not wrap is as wide as its
        # text at least, and one long line under an answer held every message wider than the
        # view (cut off on the right, the questions' Copy/Edit row out of sight).
        self.stats.setWordWrap(True)
        footer.addWidget(self._versions_and_more())
        footer.addWidget(self.copy_button)
        footer.addWidget(self.regenerate_button)
        footer.addWidget(self.read_button)
        footer.addWidget(self.more)
        footer.addSpacing(8)
        footer.addWidget(self.stats, 1)  # all the room left: it wraps only when the row runs out
        self.footer = QWidget(self)
        self.footer.setLayout(footer)
        column.addWidget(self.footer)
        row.addWidget(avatar, 0, Qt.AlignmentFlag.AlignTop)
        row.addLayout(column, 1)
        outer.addLayout(row)

    def _versions_and_more(self) -> VersionPager:
        """The pager (returned, for the caller's row) and the "⋯" menu (``self.more``)."""
        self.pager = VersionPager(self)
        self.pager.version_chosen.connect(self.version_chosen)
        self.more = MoreMenu(self.role, self)
        self.more.continue_requested.connect(self.continue_requested)
        self.more.edit_text_requested.connect(lambda: self._emit_with_id(self.edit_text_requested))
        self.more.branch_requested.connect(lambda: self._emit_with_id(self.branch_requested))
        self.more.delete_requested.connect(lambda: self._emit_with_id(self.delete_requested))
        self.more.setEnabled(False)  # until the message is saved and has an id
        return self.pager

    def _emit_with_id(self, signal: SignalInstance) -> None:
        if self.message is not None:
            signal.emit(self.message.id)

    def set_versions(self, ids: list[int]) -> None:
        """Every version of this message (regenerated answers, edited questions), or []."""
        if self.message is not None:
            self.pager.set_versions(ids, self.message.id)

    # -- content ----------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self._text

    def set_message(self, message: Message) -> None:
        self.message = message
        self.streaming = False
        self.more.setEnabled(True)
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
        self.reasoning.start()

    def set_progress(self, progress: PromptProgress) -> None:
        """Before the first text: how far the prompt's reading has come, in place of ``STARTING``."""
        if self.role != "user" and self.streaming and not self._text and progress.worth_showing:
            self.typing.setText(progress.describe())

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
            split = split_whole(text)
            answer_begun = bool(split.answer) or not self.streaming
            self.reasoning.update(split.reasoning, answer_begun, self._reasoning_estimate(split.reasoning, text))
            self._answer = split.answer
            self.body.set_markdown(split.answer)

    def _reasoning_estimate(self, reasoning: str, text: str) -> float | None:
        """For a saved answer: its reasoning's share of the generation time."""
        message = self.message
        if not reasoning or message is None or not message.tokens_per_s or not message.completion_tokens:
            return None
        return message.completion_tokens / message.tokens_per_s * len(reasoning) / max(1, len(text))

    def set_last_answer(self, last: bool) -> None:
        if self.role != "user":
            self.regenerate_button.setVisible(last)
            message = self.message
            cut_off = message is not None and (message.status == "partial" or message.finish_reason == "length")
            self.more.set_can_continue(last and cut_off and not self.streaming)

    def copy(self) -> None:
        # An answer is copied without its reasoning.
        QGuiApplication.clipboard().setText(self._text if self.role == "user" else self._answer)
        # A sign it worked, as a code block's Copy gives (a child timer: it dies with the message).
        self.copy_button.setText("Copied")
        if self._copied_timer is None:
            self._copied_timer = QTimer(self)
            self._copied_timer.setSingleShot(True)
            self._copied_timer.timeout.connect(lambda: self.copy_button.setText("Copy"))
        self._copied_timer.start(COPIED_MS)

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
        # The width the text would like, but never a minimum: a fixed width, fitted while the
        # window was wide, kept the bubble (and so the whole conversation) that wide after
        # the window narrowed, since the message could not shrink to be fitted again.
        self.body_text.setMinimumWidth(min(width, 120))
        self.body_text.setMaximumWidth(width)
        self.body_text.preferred_width = width
        self.body_text.updateGeometry()
        self.body_text.document().setTextWidth(width)
        self.body_text._fit()

    def resizeEvent(self, event) -> None:  # noqa: ANN001, N802
        super().resizeEvent(event)
        # Only a new width changes where the bubble's lines wrap. Fitting lays out its whole
        # text (milliseconds for a long paste), and while an answer grows below it the
        # conversation's layout briefly squeezes and restores every message's height, on
        # each update: the cost grew with what the chat held.
        if event.size().width() != event.oldSize().width():
            self._fit_bubble()

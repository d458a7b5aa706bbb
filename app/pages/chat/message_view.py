"""The conversation view: message cards, Markdown with highlighted code, streaming, auto-scroll.

Streaming never rebuilds what is already on screen: an answer is split into prose and
code segments, prose into runs of paragraphs, and only the piece that grew is re-rendered,
so earlier text does not flicker and an update costs what the new text costs. The view follows the answer while the user is at the bottom and stops following
the moment they scroll up; scrolling back to the bottom resumes it.
"""

from __future__ import annotations

from collections.abc import Callable

from inglenook.engine import Message, PromptProgress
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from inglenook.app.widgets.image_viewer import Picture
from inglenook.app.pages.chat.message_widget import MessageWidget

COLUMN_WIDTH = 800  # the reading column; wider lines are hard to read


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
        # Said before the first message when the chat's model has no chat template.
        self.model_note = QLabel("", self)
        self.model_note.setObjectName("Notice")
        self.model_note.setWordWrap(True)
        self.model_note.hide()
        layout.addSpacing(8)
        layout.addWidget(self.model_note)
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


    def set_model_note(self, text: str) -> None:
        self.model_note.setText(text)
        self.model_note.setVisible(bool(text))


class ConversationView(QScrollArea):
    """The scrolling column of messages."""

    regenerate_requested = Signal()
    edit_submitted = Signal(int, str)
    suggestion_chosen = Signal(str)
    version_chosen = Signal(int)  # message id
    continue_requested = Signal()
    edit_text_requested = Signal(int)  # message id
    branch_requested = Signal(int)  # message id
    delete_requested = Signal(int)  # message id
    picture_clicked = Signal(object)  # a Picture in a message, to see larger
    read_aloud_toggled = Signal(object)  # an answer's ReadAloudButton

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
        self.tool_calls: list[QWidget] = []  # tool call blocks between the messages (tool_call_widget.py)
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
        for widget in [*self.widgets, *self.tool_calls]:
            widget.hide()
            widget.deleteLater()
        self.widgets = []
        self.tool_calls = []
        self.empty.show()

    def add_tool_call(self, widget: QWidget) -> None:
        """A tool call block, after what is shown so far (it is not a message: editing and
        regenerating count messages only)."""
        self.empty.hide()
        widget.setParent(self.column)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.tool_calls.append(widget)
        self.scroll_to_bottom()

    def set_messages(self, messages: list[Message], versions: dict[int, list[int]] | None = None,
                     tool_block: Callable[[Message], QWidget | None] | None = None) -> None:
        """Show ``messages``; ``versions`` gives, for a message with several, all their ids;
        ``tool_block`` makes the block of a ``tool`` message's call."""
        self.setUpdatesEnabled(False)
        try:
            self.clear()
            for index, message in enumerate(messages):
                if message.role in ("user", "assistant"):
                    widget = self.add_message(message)
                    widget.set_versions((versions or {}).get(message.id, []))
                    following = messages[index + 1] if index + 1 < len(messages) else None
                    if message.role == "assistant" and not message.content.strip() and following is not None \
                            and following.role == "tool":
                        widget.hide()  # a round that only called: its block shows it (finish_round)
                elif message.role == "tool" and tool_block is not None:
                    block = tool_block(message)
                    if block is not None:
                        self.add_tool_call(block)
        finally:
            self.setUpdatesEnabled(True)
        self.scroll_to_bottom()

    def add_message(self, message: Message) -> MessageWidget:
        widget = self._append(message.role, message.model_id or "")
        widget.set_message(message)
        self._mark_last()
        return widget

    def show_pictures(self, pictures: dict[int, list[Picture]]) -> None:
        """Thumbnails of the images sent with messages (message id → its pictures)."""
        for widget in self.widgets:
            if widget.message is not None and widget.message.id in pictures:
                widget.set_pictures(pictures[widget.message.id])

    def add_pending_user(self, text: str) -> MessageWidget:
        """Show the user's message at once; its id arrives when the engine has saved it."""
        widget = self._append("user")
        widget.set_text(text)
        self.scroll_to_bottom()
        return widget

    def begin_answer(self, author: str, start: str = "") -> MessageWidget:
        """A streaming answer; ``start`` is the text it continues (its stream adds to it)."""
        widget = self._append("assistant", author)
        widget.stream_start = start
        widget.begin_streaming()
        if start:
            widget.set_text(start)
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
            widget.set_text(widget.stream_start + text)

    def update_progress(self, progress: PromptProgress) -> None:
        widget = self.streaming_widget()
        if widget is not None:
            widget.set_progress(progress)

    def finish_answer(self, message: Message | None) -> None:
        widget = self.streaming_widget()
        if widget is None:
            if message is not None:
                self.add_message(message)
            return
        if message is None:
            self.remove_from(len(self.widgets) - 1, blocks=False)  # a call's block stays
        else:
            widget.set_message(message)
        self._mark_last()

    def finish_round(self, message: Message | None) -> None:
        """A tool round that called ended: its answer is kept; one with no words (only the
        call, shown as its block) takes no row of its own, whose figures the next round's
        answer would repeat."""
        widget = self.streaming_widget()
        self.finish_answer(message)
        if widget is not None and message is not None and not message.content.strip():
            widget.hide()

    def sync_saved(self, messages: list[Message]) -> None:
        """Attach saved messages (with ids) to the widgets showing them, in order."""
        shown = [w for w in self.widgets if not w.streaming]
        saved = [m for m in messages if m.role in ("user", "assistant")]
        for widget, message in zip(shown, saved):
            if widget.role == message.role:
                widget.message = message
                widget.more.setEnabled(True)

    def remove_from(self, index: int, blocks: bool = True) -> None:
        """Remove the messages from ``index`` on, and (``blocks``) the tool call blocks among or
        after them (a regenerated or edited question's earlier calls are another version's)."""
        if blocks and index < len(self.widgets):
            cut = self._layout.indexOf(self.widgets[index])
            later = [block for block in self.tool_calls if self._layout.indexOf(block) > cut]
            for block in later:
                block.hide()
                block.deleteLater()
            self.tool_calls = [block for block in self.tool_calls if block not in later]
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

    def last_question_text(self) -> str:
        for widget in reversed(self.widgets):
            if widget.role == "user" and widget.text:
                return widget.text
        return ""

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
        widget.version_chosen.connect(self.version_chosen)
        widget.continue_requested.connect(self.continue_requested)
        widget.edit_text_requested.connect(self.edit_text_requested)
        widget.branch_requested.connect(self.branch_requested)
        widget.delete_requested.connect(self.delete_requested)
        widget.picture_clicked.connect(self.picture_clicked)
        if role == "assistant":
            widget.read_aloud_toggled.connect(self.read_aloud_toggled)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        self.widgets.append(widget)
        return widget

    def _mark_last(self) -> None:
        answers = [w for w in self.widgets if w.role == "assistant"]
        for widget in answers:
            widget.set_last_answer(widget is answers[-1] and widget is self.widgets[-1])


"""A message's versions pager (‹ 2/3 ›), its "more" menu (continue, edit, branch, delete) and
an answer's Read aloud.

Regenerating an answer or editing a question keeps what was there as another version of
that message (engine: the message tree); the pager pages through them, and the menu holds
the actions a person needs less often than Copy and Regenerate.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QMenu, QPlainTextEdit, QToolButton, QVBoxLayout, QWidget,
)

NEXT, PREVIOUS = 1, -1


class VersionPager(QWidget):
    """‹ n/m ›: hidden while a message has one version."""

    version_chosen = Signal(int)  # the id of the version to show

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("VersionPager")
        self.ids: list[int] = []
        self.position = 0
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        self.previous = self._arrow("‹", "Previous version", PREVIOUS)
        self.label = QLabel("", self)
        self.label.setObjectName("Stats")
        self.next = self._arrow("›", "Next version", NEXT)
        row.addWidget(self.previous)
        row.addWidget(self.label)
        row.addWidget(self.next)
        self.hide()

    def _arrow(self, text: str, tip: str, step: int) -> QToolButton:
        button = QToolButton(self)
        button.setObjectName("MessageAction")
        button.setText(text)
        button.setToolTip(tip)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(lambda: self._step(step))
        return button

    def set_versions(self, ids: list[int], current: int) -> None:
        """Show ``current``'s place among ``ids`` (every version of the message)."""
        self.ids = list(ids)
        self.position = self.ids.index(current) if current in self.ids else 0
        many = len(self.ids) > 1
        self.setVisible(many)
        if many:
            self.label.setText(f"{self.position + 1}/{len(self.ids)}")
            self.previous.setEnabled(self.position > 0)
            self.next.setEnabled(self.position < len(self.ids) - 1)

    def _step(self, step: int) -> None:
        target = self.position + step
        if 0 <= target < len(self.ids):
            self.version_chosen.emit(self.ids[target])


class MoreMenu(QToolButton):
    """"⋯": the actions on one message that are not buttons of their own."""

    continue_requested = Signal()
    edit_text_requested = Signal()
    branch_requested = Signal()
    delete_requested = Signal()

    def __init__(self, role: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MessageAction")
        self.setText("⋯")
        self.setToolTip("More actions")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self)
        self.continue_action = menu.addAction("Continue", self.continue_requested.emit)
        self.continue_action.setToolTip("Write more of this answer, from where it stopped")
        self.continue_action.setVisible(False)
        if role != "user":
            # A question is edited in its bubble, and answered again. A branch ends with an
            # answer, so the new chat is ready for the next question.
            menu.addAction("Edit text…", self.edit_text_requested.emit)
            menu.addAction("Branch from here", self.branch_requested.emit)
        menu.addSeparator()
        menu.addAction("Delete this message", self.delete_requested.emit)
        self.setMenu(menu)

    def set_can_continue(self, can: bool) -> None:
        self.continue_action.setVisible(can)


class AnswerEditor(QDialog):
    """Edit text… on an answer: the whole answer, wrapped, in a dialog sized for reading it
    (640×440, never larger than the window it opens over)."""

    edited = Signal(str)  # the new text, when it was changed and saved

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit answer")
        self.original = text
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("The answer as the chat keeps it (the model's figures go with the old text):", self))
        self.editor = QPlainTextEdit(self)
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.editor.setPlainText(text)
        layout.addWidget(self.editor, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        bound = parent.window().size() if parent is not None else None
        self.resize(min(640, bound.width()) if bound else 640, min(440, bound.height()) if bound else 440)

    def accept(self) -> None:
        text = self.editor.toPlainText()
        super().accept()
        if text.strip() and text != self.original:
            self.edited.emit(text)


class ReadAloudButton(QToolButton):
    """Read aloud / Stop reading, on every answer. It only asks: the chat page tells the voice
    controller, and unchecks it when the reading ends (``reading_ended``)."""

    toggled_reading = Signal(object)  # this button: checked to start reading, unchecked to stop

    def __init__(self, answer: Callable[[], str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.answer = answer  # the answer's text as shown (without its reasoning)
        self.setObjectName("MessageAction")
        self.setCheckable(True)
        self.setText("Read aloud")
        self.setToolTip("Hear this answer")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.toggled.connect(self._toggled)

    def _toggled(self, reading: bool) -> None:
        self.setText("Stop reading" if reading else "Read aloud")
        self.toggled_reading.emit(self)

    def reading_ended(self) -> None:
        """The voice finished or was stopped elsewhere: back to Read aloud, without asking again."""
        self.blockSignals(True)
        self.setChecked(False)
        self.setText("Read aloud")
        self.blockSignals(False)

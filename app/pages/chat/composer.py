"""The message input: grows with its text; Enter sends, Shift+Enter adds a line.

Beside it, the microphone (dictation: the words appear in the box as they are recognised,
and stay editable) with its level meter, and the button into hands-free voice mode.
"""

from __future__ import annotations

import math
import time

from PySide6.QtCore import QBuffer, QEvent, QIODevice, QMimeData, QObject, Qt, Signal
from PySide6.QtGui import QImage, QKeyEvent, QTextCursor
from PySide6.QtWidgets import (
    QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QToolButton, QVBoxLayout, QWidget,
)

from inglenook.app.widgets import icons
from inglenook.app.pages.chat.attachment_bar import AttachmentBar
from inglenook.app.pages.chat.voice_widgets import LevelMeter

MAX_LINES = 8
HOLD_S = 0.6  # the microphone held this long is push-to-talk: letting go stops it


def png_of(image: QImage) -> bytes:
    """A pasted image as PNG bytes (what the engine decodes and checks like any file)."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stub says bytes; the binding takes str only
    return bytes(buffer.data().data())


class ComposerInput(QPlainTextEdit):
    submitted = Signal()
    recall_requested = Signal()  # Up in an empty box: the last question again, to edit or resend
    image_pasted = Signal(bytes)  # a pasted image (a screenshot), as PNG bytes

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ComposerInput")
        self.setPlaceholderText("Message Inglenook…")
        self.setTabChangesFocus(True)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.document().setDocumentMargin(4)
        self.textChanged.connect(self._grow)
        self._grow()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        if event.key() == Qt.Key.Key_Up and not self.toPlainText() and not event.modifiers():
            self.recall_requested.emit()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
                return
            if not event.modifiers() & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier):
                self.submitted.emit()
                return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802
        return source.hasImage() or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802
        """A pasted image becomes a chip above the box, never text."""
        if source.hasImage() and not source.hasText():
            image = source.imageData()
            if isinstance(image, QImage) and not image.isNull():
                self.image_pasted.emit(png_of(image))
            return
        super().insertFromMimeData(source)

    def _grow(self) -> None:
        line = self.fontMetrics().lineSpacing()
        lines = max(1, self.document().size().height())  # in lines for a plain text layout
        wanted = math.ceil(lines)
        self.setVerticalScrollBarPolicy(
            Qt.ScrollBarPolicy.ScrollBarAsNeeded if wanted > MAX_LINES else Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )
        lines = min(MAX_LINES, wanted)
        self.setFixedHeight(int(lines * line + 2 * self.document().documentMargin() + 4))


class Composer(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()
    dictation_toggled = Signal()  # the microphone button (or its shortcut)
    voice_mode_requested = Signal()  # the voice mode button

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 6, 24, 10)
        outer.setSpacing(4)
        self.frame = QFrame(self)
        self.frame.setObjectName("Composer")
        self.frame.setMaximumWidth(800)
        row = QHBoxLayout(self.frame)
        row.setContentsMargins(14, 8, 8, 8)
        row.setSpacing(8)
        self.input = ComposerInput(self.frame)
        self.input.submitted.connect(self.submit)
        self.input.installEventFilter(self)
        self.send_button = QPushButton(self.frame)
        icons.set_icon(self.send_button, "send", "on_accent", 18)
        self.send_button.setObjectName("SendButton")
        self.send_button.setFixedSize(32, 32)
        self.send_button.setToolTip("Send (Enter)")
        self.send_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.send_button.clicked.connect(self.submit)
        self.stop_button = QPushButton(self.frame)
        icons.set_icon(self.stop_button, "stop", "bg", 16)
        self.stop_button.setObjectName("StopButton")
        self.stop_button.setFixedSize(32, 32)
        self.stop_button.setToolTip("Stop the answer (Esc)")
        self.stop_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.stop_button.clicked.connect(self.stop_requested)
        self.stop_button.hide()
        # Documents attached to the chat: chips above the box, the paperclip at its left (attachments.py).
        self.attachments = AttachmentBar(self)
        row.addWidget(self.attachments.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.input, 1, Qt.AlignmentFlag.AlignVCenter)
        self._voice_buttons(row)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.stop_button, 0, Qt.AlignmentFlag.AlignBottom)
        centering = QHBoxLayout()
        centering.addStretch(0)
        centering.addWidget(self.frame, 1)
        centering.addStretch(0)
        # The chips and the notes under them line up with the message box (centred, as wide as it).
        self.voice_note = QLabel("", self)  # no microphone, access refused: said here, in words
        self.voice_note.setObjectName("StatusNote")
        self.voice_note.setWordWrap(True)
        self.voice_note.hide()
        for above in (self.attachments, self.attachments.vision_note, self.attachments.encoder_note, self.voice_note):
            above.setMaximumWidth(800)
            line = QHBoxLayout()
            line.addStretch(0)
            line.addWidget(above, 1)
            line.addStretch(0)
            outer.addLayout(line)
        outer.addLayout(centering)
        self.hint = QLabel("Enter to send  ·  Shift+Enter for a new line  ·  Esc to stop", self)
        self.hint.setObjectName("ComposerHint")
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)  # a narrow window wraps it rather than cutting it
        outer.addWidget(self.hint)
        self.input.textChanged.connect(self._update_send)
        self._update_send()

    def _voice_buttons(self, row: QHBoxLayout) -> None:
        self._listening = False
        self._before_dictation = ""
        self.meter = LevelMeter(self.frame)
        self.meter.hide()
        self.mic_button = QToolButton(self.frame)
        self.mic_button.setObjectName("MicButton")
        icons.set_icon(self.mic_button, "mic", "muted", 18)
        self.mic_button.setCheckable(True)
        self.mic_button.setFixedSize(32, 32)
        self.mic_button.setToolTip("Dictate: click to start and stop, or hold while you speak (Ctrl+Shift+M)")
        self.mic_button.setCursor(Qt.CursorShape.PointingHandCursor)
        # Press starts at once (no word lost to a click's length); a release after a hold stops,
        # a quick click leaves it on until the next. The controller says whether it listens
        # (set_listening): the button only asks.
        self._pressed_at = 0.0
        self._stop_on_release = False
        self.mic_button.pressed.connect(self._mic_pressed)
        self.mic_button.released.connect(self._mic_released)
        self.mic_button.clicked.connect(lambda: self.mic_button.setChecked(self._listening))
        self.voice_button = QToolButton(self.frame)
        self.voice_button.setObjectName("MicButton")
        icons.set_icon(self.voice_button, "voice", "muted", 18)
        self.voice_button.setFixedSize(32, 32)
        self.voice_button.setToolTip("Voice mode: talk and hear the answers, hands-free (Ctrl+Shift+V)")
        self.voice_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.voice_button.clicked.connect(self.voice_mode_requested)
        row.addWidget(self.meter, 0, Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.mic_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.voice_button, 0, Qt.AlignmentFlag.AlignBottom)

    def _mic_pressed(self) -> None:
        self._pressed_at = time.monotonic()
        self._stop_on_release = self._listening  # a click on a listening microphone stops it
        if not self._listening:
            self.dictation_toggled.emit()

    def _mic_released(self) -> None:
        held = time.monotonic() - self._pressed_at >= HOLD_S
        if self._listening and (self._stop_on_release or held):
            self.dictation_toggled.emit()

    # -- dictation: what the voice controller shows here -------------------------------------

    def set_listening(self, listening: bool) -> None:
        """The microphone is on (the meter shows) or off; words dictated go after what the box held."""
        self._listening = listening
        self.mic_button.setChecked(listening)
        self.meter.setVisible(listening)
        self.meter.set_level(0.0)
        if listening:
            self.voice_note.hide()
            before = self.input.toPlainText().rstrip()
            self._before_dictation = before + " " if before else ""
            self.input.setPlaceholderText("Listening… speak, then click the microphone again")
        else:
            self.input.setPlaceholderText("Message Inglenook…")

    def set_level(self, level: float) -> None:
        self.meter.set_level(level)

    def show_dictated(self, words: str) -> None:
        """The words recognised so far, after what the box held when dictation began."""
        self.input.setPlainText(self._before_dictation + words)
        self.input.moveCursor(QTextCursor.MoveOperation.End)

    def show_voice_problem(self, text: str) -> None:
        self.voice_note.setText(text)
        self.voice_note.setVisible(bool(text))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self.input and event.type() in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            self.frame.setProperty("focused", event.type() == QEvent.Type.FocusIn)
            self.frame.style().unpolish(self.frame)
            self.frame.style().polish(self.frame)
        return super().eventFilter(watched, event)

    def text(self) -> str:
        return self.input.toPlainText()

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)

    def submit(self) -> None:
        text = self.input.toPlainText().strip()
        if not text or self.stop_button.isVisible():
            return
        self.input.clear()
        self.send_requested.emit(text)

    def set_streaming(self, streaming: bool) -> None:
        self.send_button.setVisible(not streaming)
        self.stop_button.setVisible(streaming)

    def _update_send(self) -> None:
        self.send_button.setEnabled(bool(self.input.toPlainText().strip()))

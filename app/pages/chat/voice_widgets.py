"""The chat page's voice pieces: the microphone's level meter and the hands-free voice mode bar.

They show what the voice controllers say (``controllers/voice_input``, ``voice_mode``) and say
what the person asks; they run nothing themselves.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from inglenook.app.widgets import icons, theme

# What voice mode shows in each state, and the hint under it.
STATES = {
    "listening": ("Listening…", "Speak; a pause sends what you said."),
    "hearing": ("Hearing you…", "A pause sends what you said."),
    "thinking": ("Thinking…", "Writing the answer."),
    "speaking": ("Speaking…", "Talk over it to stop it and say something else."),
}
BARS = 5


class LevelMeter(QWidget):
    """Five bars that light up with the microphone's loudness (0..1)."""

    def __init__(self, parent: QWidget | None = None, height: int = 18) -> None:
        super().__init__(parent)
        self.setObjectName("LevelMeter")
        self.value = 0.0
        self.setFixedSize(BARS * 5 + 2, height)
        self.setToolTip("Microphone level")

    def set_level(self, value: float) -> None:
        # Falls back slowly, rises at once: a meter that is readable, not flickering.
        self.value = max(float(value), self.value * 0.7)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        colors = theme.colors(theme.current_mode())
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        lit = round(self.value * BARS)
        height = self.height()
        for i in range(BARS):
            bar = height * (0.35 + 0.65 * (i + 1) / BARS)
            color = QColor(colors["accent"] if i < lit else colors["border"])
            painter.setBrush(color)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.drawRoundedRect(QRectF(1 + i * 5, (height - bar) / 2, 3, bar), 1.5, 1.5)
        painter.end()


class VoiceModeBar(QFrame):
    """Hands-free voice mode: its state in words, the level, and Leave (Esc)."""

    leave_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("VoiceModeBar")
        self.setMaximumWidth(800)
        row = QHBoxLayout(self)
        row.setContentsMargins(16, 10, 10, 10)
        row.setSpacing(12)
        self.meter = LevelMeter(self, height=26)
        self.state_label = QLabel("", self)
        self.state_label.setObjectName("VoiceState")
        self.hint = QLabel("", self)
        self.hint.setObjectName("ComposerHint")
        self.hint.setWordWrap(True)
        self.leave = QPushButton("Leave voice mode (Esc)", self)
        icons.set_icon(self.leave, "voice", "muted", 16)
        self.leave.setCursor(Qt.CursorShape.PointingHandCursor)
        self.leave.clicked.connect(self.leave_requested)
        row.addWidget(self.meter)
        row.addWidget(self.state_label)
        row.addWidget(self.hint, 1)
        row.addWidget(self.leave)
        self.state = ""
        self.hide()

    def show_state(self, state: str) -> None:
        """One of ``STATES``, or "off"."""
        self.state = state
        if state not in STATES:
            self.hide()
            return
        words, hint = STATES[state]
        self.state_label.setText(words)
        self.hint.setText(hint)
        self.show()

    def show_problem(self, text: str) -> None:
        self.hint.setText(text)

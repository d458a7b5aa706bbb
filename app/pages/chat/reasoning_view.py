"""A reasoning model's thinking, shown collapsed above its answer, with how long it took."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget


class ReasoningView(QWidget):
    """"Thought for 4.2 s ▸": click to show the reasoning text; hidden when there is none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Reasoning")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("ReasoningToggle")
        self.toggle.setCheckable(True)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.toggle.toggled.connect(self._show_text)
        self.body = QLabel(self)
        self.body.setObjectName("ReasoningText")
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.hide()
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body)
        self._started: float | None = None
        self.seconds: float | None = None
        self.hide()

    def start(self) -> None:
        """The answer started streaming: the clock for its reasoning starts now."""
        self._started = time.monotonic()
        self.seconds = None

    def update(self, reasoning: str, done: bool, estimate_s: float | None = None) -> None:  # type: ignore[override]
        """Show ``reasoning``; ``done`` once the answer proper has begun (or ended)."""
        if not reasoning:
            self.hide()
            return
        if done and self.seconds is None:
            self.seconds = time.monotonic() - self._started if self._started is not None else estimate_s
        self.body.setText(reasoning.strip())
        if not done:
            self.toggle.setText("Thinking…  ▸" if not self.toggle.isChecked() else "Thinking…  ▾")
        else:
            took = f"Thought for {_duration(self.seconds)}" if self.seconds is not None else "Reasoning"
            self.toggle.setText(f"{took}  {'▾' if self.toggle.isChecked() else '▸'}")
        self.show()

    def _show_text(self, shown: bool) -> None:
        self.body.setVisible(shown)
        text = self.toggle.text().rstrip("▸▾ ")
        self.toggle.setText(f"{text}  {'▾' if shown else '▸'}")


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {int(seconds % 60)} s"

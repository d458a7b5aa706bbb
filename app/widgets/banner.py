"""An in-place notice for errors a person can act on: a title, a sentence, action buttons."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from inglenook.app.services.errors import DISMISS, Explanation


class Banner(QFrame):
    action = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Banner")
        self.setMaximumWidth(800)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 12, 12)
        layout.setSpacing(4)
        self.title = QLabel("", self)
        self.title.setObjectName("BannerTitle")
        self.text = QLabel("", self)
        self.text.setWordWrap(True)
        self.buttons = QHBoxLayout()
        self.buttons.setSpacing(6)
        layout.addWidget(self.title)
        layout.addWidget(self.text)
        layout.addLayout(self.buttons)
        self.explanation: Explanation | None = None
        self.hide()

    def show_explanation(self, explanation: Explanation) -> None:
        self.explanation = explanation
        self.title.setText(explanation.title)
        self.text.setText(explanation.text)
        self.setToolTip(explanation.detail)
        while self.buttons.count():
            item = self.buttons.takeAt(0)
            if item is not None and (widget := item.widget()) is not None:
                widget.deleteLater()
        actions = list(explanation.actions)
        if not any(a == DISMISS for a, _ in actions):
            actions.append((DISMISS, "Dismiss"))
        for action_id, label in actions:
            button = QPushButton(label, self)
            button.setObjectName("BannerButton")
            button.setProperty("action", action_id)
            button.clicked.connect(lambda _=False, a=action_id: self._clicked(a))
            self.buttons.addWidget(button)
        self.buttons.addStretch(1)
        self.show()

    def action_ids(self) -> list[str]:
        items = (self.buttons.itemAt(i) for i in range(self.buttons.count()))
        return [widget.property("action") for item in items if item is not None and (widget := item.widget()) is not None]

    def _clicked(self, action_id: str) -> None:
        self.hide()
        self.explanation = None
        self.action.emit(action_id)

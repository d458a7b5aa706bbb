"""The General page's "Background work" card: which small model writes titles and summaries
and embeds messages for search, and which of those it does.

That work runs only while nothing else does and gives way to every person's answer
(engine/chat/background.py); switching it off here stops new work at once.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QFrame, QLabel, QVBoxLayout, QWidget

from inglenook.engine import ModelRecord, Settings


class BackgroundCard(QFrame):
    def __init__(self, parent: QWidget, settings: Settings, models: list[ModelRecord]) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        form = QFormLayout(self)
        form.setContentsMargins(18, 16, 18, 16)
        form.setHorizontalSpacing(18)
        form.setVerticalSpacing(12)
        self.model = QComboBox(self)
        self.model.addItem("Automatic (the smallest installed model)", None)
        for record in models:
            self.model.addItem(record.id, record.id)
        self.model.setCurrentIndex(max(0, self.model.findData(settings.background_model)))
        form.addRow("Background model", self.model)
        self.titles = QCheckBox("Name new chats from their first message", self)
        self.titles.setChecked(settings.background_titles)
        self.summaries = QCheckBox("Summarise long chats for the sidebar", self)
        self.summaries.setChecked(settings.background_summaries)
        self.search = QCheckBox("Let search find chats by meaning, not only by their words", self)
        self.search.setChecked(settings.background_search)
        boxes = QVBoxLayout()
        for box in (self.titles, self.summaries, self.search):
            boxes.addWidget(box)
        hint = QLabel("Runs only while nothing else does, and gives way the moment you send a message.", self)
        hint.setObjectName("PageHint")
        hint.setWordWrap(True)
        boxes.addWidget(hint)
        form.addRow("Background work", boxes)

    def changes(self) -> dict[str, Any]:
        """These fields as Settings names them (the dialog keeps only the changed ones)."""
        return {
            "background_model": self.model.currentData(),
            "background_titles": self.titles.isChecked(),
            "background_summaries": self.summaries.isChecked(),
            "background_search": self.search.isChecked(),
        }

"""Settings → Models & context: aliases (names clients send, mapped to installed models) and
each model's own context size.

A coding agent asks for ``claude-sonnet-4-5`` or ``gpt-5-codex``; an alias answers it from a
local model. A model's context size here overrides the one on the Performance page for that
model only ("Same as all models" leaves it to that page, whose "Automatic" sizes each model
from its training context and free memory).
"""

from __future__ import annotations

import logging

from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import InglenookError, ModelRecord, Settings, validated_name

log = logging.getLogger(__name__)

MAX_CONTEXT = 1_048_576


class ModelNamesPage(QWidget):
    def __init__(self, settings: Settings, models: list[ModelRecord], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.models = models
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)

        layout.addWidget(QLabel("Aliases: a request for the name is answered by the model.", self))
        self.aliases = QTableWidget(0, 2, self)
        self.aliases.setObjectName("AliasTable")
        self.aliases.setHorizontalHeaderLabels(["Name clients send", "Answered by"])
        self.aliases.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.aliases.verticalHeader().setVisible(False)
        self.aliases.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.aliases.setFixedHeight(160)
        for name, target in sorted(settings.model_aliases.items()):
            self.add_alias(name, target)
        layout.addWidget(self.aliases)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add alias", self)
        self.add_button.clicked.connect(lambda: self.add_alias("", None))
        self.remove_button = QPushButton("Remove", self)
        self.remove_button.clicked.connect(self._remove_selected)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.problem = QLabel("", self)
        self.problem.setObjectName("PageHint")
        self.problem.setWordWrap(True)
        layout.addWidget(self.problem)

        layout.addSpacing(8)
        layout.addWidget(QLabel("Context size per model (tokens each answer gets):", self))
        self.contexts = QTableWidget(len(models), 2, self)
        self.contexts.setObjectName("ContextTable")
        self.contexts.setHorizontalHeaderLabels(["Model", "Context size"])
        self.contexts.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        # As wide as its spin boxes: a narrower column scrolled "Same as all models" to "ıs all models".
        self.contexts.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.contexts.verticalHeader().setVisible(False)
        self.context_boxes: dict[str, QSpinBox] = {}
        for row, record in enumerate(models):
            item = QTableWidgetItem(record.id)
            item.setToolTip(f"trained for {record.context_length} tokens" if record.context_length else record.id)
            self.contexts.setItem(row, 0, item)
            box = QSpinBox(self.contexts)
            box.setRange(0, MAX_CONTEXT)
            box.setSingleStep(1024)
            box.setSpecialValueText("Same as all models")
            box.setSuffix(" tokens")
            box.setValue(int(settings.model_context.get(record.id, 0)))
            self.contexts.setCellWidget(row, 1, box)
            self.context_boxes[record.id] = box
        layout.addWidget(self.contexts)

    def add_alias(self, name: str, target: str | None) -> None:
        row = self.aliases.rowCount()
        self.aliases.insertRow(row)
        name_item = QTableWidgetItem(name)
        self.aliases.setItem(row, 0, name_item)
        combo = QComboBox(self.aliases)
        for record in self.models:
            combo.addItem(record.id, record.id)
        if target is not None and combo.findData(target) < 0:
            combo.addItem(f"{target} (not installed)", target)  # kept, so saving loses nothing
        combo.setCurrentIndex(max(0, combo.findData(target)))
        self.aliases.setCellWidget(row, 1, combo)
        if not name:
            self.aliases.editItem(name_item)

    def _remove_selected(self) -> None:
        for row in sorted({i.row() for i in self.aliases.selectedIndexes()}, reverse=True):
            self.aliases.removeRow(row)

    def alias_map(self) -> dict[str, str]:
        """The aliases as entered; rows with a name that cannot be an alias are left out and named."""
        found: dict[str, str] = {}
        problems: list[str] = []
        for row in range(self.aliases.rowCount()):
            item = self.aliases.item(row, 0)
            name = item.text() if item is not None else ""
            combo = self.aliases.cellWidget(row, 1)
            target = combo.currentData() if isinstance(combo, QComboBox) else None
            if not name.strip() or target is None:
                continue
            try:
                found[validated_name(name)] = target
            except InglenookError as exc:
                problems.append(str(exc))
        self.problem.setText("\n".join(problems))
        return found

    def context_map(self) -> dict[str, int]:
        """Per-model contexts; models not listed here (not installed now) keep their setting."""
        kept = {k: v for k, v in self.settings.model_context.items() if k not in self.context_boxes}
        return kept | {model_id: box.value() for model_id, box in self.context_boxes.items() if box.value() > 0}

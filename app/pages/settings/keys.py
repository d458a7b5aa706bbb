"""Settings → Team keys: named API keys for a shared server (create, list, revoke).

Changes take effect at once (the running server reads keys per request), so this page
acts directly instead of waiting for the dialog's Save. A new key is shown once, here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import ApiKeyRecord, ApiKeys, InglenookError, KeyLimits

log = logging.getLogger(__name__)

COLUMNS = ("Name", "Key", "Req/min", "Streams", "Models", "Requests", "Last used", "Active now")


def _limit_box(parent: QWidget) -> QSpinBox:
    box = QSpinBox(parent)
    box.setRange(0, 1_000_000)
    box.setSpecialValueText("no limit")  # 0 shows as "no limit"
    return box


class KeysPage(QWidget):
    def __init__(self, keys: ApiKeys, active_streams: Callable[[], dict[str, int]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.keys = keys
        self.active_streams = active_streams
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setMinimumHeight(160)
        layout.addWidget(self.table)

        form = QFormLayout()
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("who it is for, e.g. alice")
        self.rpm = _limit_box(self)
        self.streams = _limit_box(self)
        self.models = QLineEdit(self)
        self.models.setPlaceholderText("every model; or names separated by commas")
        form.addRow("Name", self.name)
        form.addRow("Requests per minute", self.rpm)
        form.addRow("Generations at once", self.streams)
        form.addRow("Models", self.models)
        layout.addLayout(form)

        buttons = QHBoxLayout()
        self.create_button = QPushButton("Create key", self)
        self.create_button.clicked.connect(self.create_key)
        self.revoke_button = QPushButton("Revoke selected", self)
        self.revoke_button.clicked.connect(self.revoke_selected)
        buttons.addWidget(self.create_button)
        buttons.addWidget(self.revoke_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)

        self.new_key = QLineEdit(self)
        self.new_key.setReadOnly(True)
        self.new_key.hide()
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.hide()
        self.copy_button.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.new_key.text()))
        shown = QHBoxLayout()
        shown.addWidget(self.new_key, 1)
        shown.addWidget(self.copy_button)
        layout.addLayout(shown)
        self.message = QLabel("", self)
        self.message.setObjectName("PageHint")
        self.message.setWordWrap(True)
        layout.addWidget(self.message)
        self.refresh()

    def refresh(self) -> None:
        try:
            records = self.keys.list()
        except InglenookError as exc:
            self.message.setText(str(exc))
            return
        active = self.active_streams()
        self.table.setRowCount(len(records))
        for row, record in enumerate(records):
            for column, text in enumerate(_cells(record, active.get(record.name, 0))):
                self.table.setItem(row, column, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()

    def create_key(self) -> None:
        models = tuple(m.strip() for m in self.models.text().split(",") if m.strip())
        limits = KeyLimits(self.rpm.value() or None, self.streams.value() or None, models)
        try:
            record, key = self.keys.create(self.name.text(), limits)
        except InglenookError as exc:
            self.message.setText(str(exc))
            return
        self.new_key.setText(key)
        self.new_key.show()
        self.copy_button.show()
        self.message.setText(f"The key for {record.name} is shown only now: copy it and give it to them.")
        self.name.clear()
        self.refresh()

    def revoke_selected(self) -> None:
        rows = sorted({index.row() for index in self.table.selectedIndexes()})
        names = [item.text() for row in rows if (item := self.table.item(row, 0)) is not None]
        try:
            for name in names:
                self.keys.revoke(name)
        except InglenookError as exc:
            self.message.setText(str(exc))
        else:
            if names:
                self.message.setText(f"Revoked {', '.join(names)}: their open streams end now.")
        self.refresh()


def _cells(record: ApiKeyRecord, active: int) -> list[str]:
    limits = record.limits
    used = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.last_used_at)) if record.last_used_at else "never"
    return [
        record.name, record.prefix + "…", str(limits.requests_per_minute or "—"), str(limits.max_streams or "—"),
        ", ".join(limits.models) or "all", str(record.requests), used, str(active),
    ]

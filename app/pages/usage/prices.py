"""The Usage page's editors: the price table (metered APIs, editable, with their dates) and the
machine's own cost (power draw, electricity price, hardware over months), plus how long usage
is kept. Saving checks every field with the engine's rules first; a bad one is marked (a red
cell or field, with the reason as its tooltip) and nothing is saved."""

from __future__ import annotations

import re
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import DEFAULT_PRICES, InvalidRequest, MachineCost, Price, Settings, validated_prices

from inglenook.app.widgets import theme

COLUMNS = [("name", "API"), ("input", "Input $/M"), ("cached_input", "Cached input $/M"),
           ("output", "Output $/M"), ("read_on", "Prices read")]
MACHINE_FIELDS = [("watts", "Power draw while generating (W)"), ("price_per_kwh", "Electricity ($ per kWh)"),
                  ("hardware_price", "Hardware price ($, 0 to leave out)"), ("hardware_months", "Spread over (months)")]
_PRICE_PARAM = re.compile(r"^prices\[(\d+)\]\.(\w+)$")


class CostEditor(QWidget):
    """Edits the settings that price usage; ``save_requested`` carries checked settings changes."""

    save_requested = Signal(dict)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels([title for _, title in COLUMNS])
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.table.setMinimumHeight(150)
        layout.addWidget(self.table)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add API", self)
        self.remove_button = QPushButton("Remove", self)
        self.defaults_button = QPushButton("Default prices", self)
        for button in (self.add_button, self.remove_button, self.defaults_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        form = QFormLayout()
        self.machine_fields: dict[str, QLineEdit] = {}
        for key, label in MACHINE_FIELDS:
            self.machine_fields[key] = QLineEdit(self)
            form.addRow(label, self.machine_fields[key])
        self.retention = QSpinBox(self)
        self.retention.setRange(0, 3650)
        self.retention.setSpecialValueText("forever")
        self.retention.setSuffix(" days")
        form.addRow("Keep usage for", self.retention)
        layout.addLayout(form)
        row = QHBoxLayout()
        self.problem = QLabel("", self)
        self.problem.setObjectName("UsageProblem")
        self.problem.setWordWrap(True)
        self.save_button = QPushButton("Save prices and costs", self)
        row.addWidget(self.problem, 1)
        row.addWidget(self.save_button)
        layout.addLayout(row)
        self.add_button.clicked.connect(lambda: self._add_row(Price("", 0.0, 0.0, 0.0)))
        self.remove_button.clicked.connect(self._remove_selected)
        self.defaults_button.clicked.connect(lambda: self._fill_prices(list(DEFAULT_PRICES)))
        self.save_button.clicked.connect(self.save)

    # -- filling ----------------------------------------------------------------------

    def load(self, settings: Settings, prices: list[Price]) -> None:
        self._fill_prices(prices)
        values = {"watts": settings.machine_watts, "price_per_kwh": settings.electricity_price_per_kwh,
                  "hardware_price": settings.hardware_price, "hardware_months": settings.hardware_months}
        for key, field in self.machine_fields.items():
            field.setText(f"{values[key]:g}")
        self.retention.setValue(settings.usage_retention_days)
        self._clear_marks()

    def _fill_prices(self, prices: list[Price]) -> None:
        self.table.setRowCount(0)
        for price in prices:
            self._add_row(price)

    def _add_row(self, price: Price) -> None:
        row = self.table.rowCount()
        self.table.insertRow(row)
        values = [price.name, f"{price.input:g}", f"{price.cached_input:g}", f"{price.output:g}", price.read_on]
        for column, value in enumerate(values):
            self.table.setItem(row, column, QTableWidgetItem(value))

    def _remove_selected(self) -> None:
        for row in sorted({index.row() for index in self.table.selectedIndexes()}, reverse=True):
            self.table.removeRow(row)

    # -- saving -----------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        rows = []
        for row in range(self.table.rowCount()):
            items = [self.table.item(row, c) for c in range(len(COLUMNS))]
            rows.append({key: item.text() if item is not None else "" for (key, _), item in zip(COLUMNS, items, strict=True)})
        return rows

    def save(self) -> bool:
        """Check everything; mark the first bad field and return False, or emit the changes."""
        self._clear_marks()
        try:
            prices = validated_prices(self.entries())
            fields = {key: field.text() for key, field in self.machine_fields.items()}
            machine = MachineCost.validated(fields["watts"], fields["price_per_kwh"], fields["hardware_price"],
                                            fields["hardware_months"])
        except InvalidRequest as exc:
            self._mark(exc)
            return False
        self.save_requested.emit({
            "usage_prices": [p.as_dict() for p in prices],
            "machine_watts": machine.watts, "electricity_price_per_kwh": machine.price_per_kwh,
            "hardware_price": machine.hardware_price, "hardware_months": machine.hardware_months,
            "usage_retention_days": self.retention.value(),
        })
        return True

    def _mark(self, exc: InvalidRequest) -> None:
        danger = QColor(theme.colors(theme.current_mode())["danger"])
        self.problem.setText(str(exc))
        self.problem.setStyleSheet(f"color: {danger.name()};")
        match = _PRICE_PARAM.match(exc.param or "")
        if match:
            row, key = int(match.group(1)), match.group(2)
            column = [k for k, _ in COLUMNS].index(key)
            item = self.table.item(row, column) or QTableWidgetItem("")
            self.table.setItem(row, column, item)
            item.setBackground(QBrush(danger.lighter(170)))
            item.setToolTip(str(exc))
            self.table.setCurrentCell(row, column)
        elif exc.param in self.machine_fields:
            field = self.machine_fields[exc.param]
            field.setStyleSheet(f"border: 1px solid {danger.name()};")
            field.setToolTip(str(exc))
            field.setFocus()

    def _clear_marks(self) -> None:
        self.problem.setText("")
        for row in range(self.table.rowCount()):
            for column in range(self.table.columnCount()):
                item = self.table.item(row, column)
                if item is not None:
                    item.setBackground(QBrush())
                    item.setToolTip("")
        for field in self.machine_fields.values():
            field.setStyleSheet("")
            field.setToolTip("")

    def marked_cells(self) -> list[tuple[int, int]]:
        """The table cells marked as bad (for tests and screenshots)."""
        return [(r, c) for r in range(self.table.rowCount()) for c in range(self.table.columnCount())
                if (item := self.table.item(r, c)) is not None and item.toolTip()]

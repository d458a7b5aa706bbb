"""The Usage page: tokens per day and what they would have cost, stacked by model; the
period's totals per model and per client, priced on every API in the price table beside
this machine's own cost; and the editors for those prices and costs (usage_prices.py).

Everything is read and saved on the disk lane; the page refreshes whenever it is shown.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import Engine, Price, TokenCounts, UsageSummary, human_count

from inglenook.app.pages.usage.chart import Bars, StackedBars
from inglenook.app.pages.usage.prices import CostEditor
from inglenook.app.services.errors import Explanation
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

PERIODS = [(7, "Last 7 days"), (30, "Last 30 days"), (90, "Last 90 days"), (365, "Last year")]
COUNT_COLUMNS = ["Requests", "In", "Cached", "Out", "Reasoning"]


def dollars(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"


def totals_text(counts: TokenCounts) -> str:
    return (f"{counts.requests} generations · {human_count(counts.prompt_tokens)} tokens in "
            f"({human_count(counts.cached_tokens)} from the cache) · {human_count(counts.completion_tokens)} out "
            f"({human_count(counts.reasoning_tokens)} reasoning) · {counts.duration_s:,.1f} s generating")


def _count_cells(counts: TokenCounts) -> list[str]:
    return [str(counts.requests), human_count(counts.prompt_tokens), human_count(counts.cached_tokens),
            human_count(counts.completion_tokens), human_count(counts.reasoning_tokens)]


class UsagePage(QWidget):
    refreshed = Signal(object)  # the UsageSummary now shown

    def __init__(self, engine: Engine, operations: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.operations = operations
        self.summary: UsageSummary | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        outer.addWidget(scroll)
        body = QWidget(scroll)
        scroll.setWidget(body)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(28, 20, 28, 20)
        layout.setSpacing(12)
        layout.addLayout(self._header())
        self.totals = QLabel("", body)
        self.totals.setObjectName("UsageTotals")
        self.totals.setWordWrap(True)
        layout.addWidget(self.totals)
        charts = QHBoxLayout()
        self.tokens_chart = StackedBars("Tokens per day", lambda v: human_count(int(v)), body)
        self.cost_chart = StackedBars("Equivalent cost per day", dollars, body)
        charts.addWidget(self.tokens_chart)
        charts.addWidget(self.cost_chart)
        layout.addLayout(charts)
        layout.addLayout(self._tables(body))
        layout.addWidget(self._section("Prices and this machine's costs", body))
        self.editor = CostEditor(body)
        layout.addWidget(self.editor)
        layout.addStretch(1)
        self.editor.save_requested.connect(self._save)
        self.period.currentIndexChanged.connect(lambda _: self.refresh())
        self.compare.currentIndexChanged.connect(lambda _: self._draw_charts())
        self.refresh_button.clicked.connect(self.refresh)

    def _header(self) -> QHBoxLayout:
        row = QHBoxLayout()
        title = QLabel("Usage", self)
        title.setObjectName("PageTitle")
        self.period = QComboBox(self)
        for days, label in PERIODS:
            self.period.addItem(label, days)
        self.compare = QComboBox(self)
        self.compare.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.compare.setToolTip("The API whose prices the cost chart uses")
        self.refresh_button = QPushButton("Refresh", self)
        row.addWidget(title)
        row.addStretch(1)
        row.addWidget(QLabel("Cost as on", self))
        row.addWidget(self.compare)
        row.addWidget(self.period)
        row.addWidget(self.refresh_button)
        return row

    def _section(self, text: str, parent: QWidget) -> QLabel:
        label = QLabel(text, parent)
        label.setObjectName("SectionTitle")
        return label

    def _tables(self, parent: QWidget) -> QGridLayout:
        grid = QGridLayout()
        self.model_table = self._table(["Model", *COUNT_COLUMNS], parent)
        self.client_table = self._table(["Client", *COUNT_COLUMNS], parent)
        self.cost_table = self._table(["On", "Would have cost", "Prices read"], parent)
        # Two tables a row, so names and numbers fit without scrolling sideways.
        places = (("Per model", self.model_table, 0, 0), ("Per client", self.client_table, 0, 1),
                  ("What it would have cost", self.cost_table, 2, 0))
        for title, table, row, column in places:
            grid.addWidget(self._section(title, parent), row, column)
            grid.addWidget(table, row + 1, column)
        return grid

    @staticmethod
    def _table(headers: list[str], parent: QWidget) -> QTableWidget:
        table = QTableWidget(0, len(headers), parent)
        table.setHorizontalHeaderLabels(headers)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        table.verticalHeader().hide()
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table.setMinimumHeight(150)
        return table

    # -- reading ----------------------------------------------------------------------

    @property
    def days(self) -> int:
        return int(self.period.currentData() or 7)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 — Qt's name
        super().showEvent(event)
        self.refresh()

    def refresh(self) -> None:
        engine, days = self.engine, self.days
        self.operations.run("disk", lambda: engine.usage_summary(days), self.show_summary,
                            self._show_failure)

    def show_summary(self, summary: UsageSummary) -> None:
        self.summary = summary
        self.totals.setText(totals_text(summary.report.total()))
        self._fill_counts(self.model_table, summary.report.by_model())
        self._fill_counts(self.client_table, summary.report.by_client())
        self._fill_costs(summary)
        chosen = self.compare.currentText()
        self.compare.blockSignals(True)
        self.compare.clear()
        for price in summary.prices:
            self.compare.addItem(price.name)
        if chosen:
            self.compare.setCurrentText(chosen)
        self.compare.blockSignals(False)
        self._draw_charts()
        self.editor.load(self.engine.settings, summary.prices)
        self.refreshed.emit(summary)

    def _fill_counts(self, table: QTableWidget, rows: dict[str, TokenCounts]) -> None:
        table.setRowCount(0)
        for name, counts in rows.items():
            self._append(table, [name or "(unknown)", *_count_cells(counts)])

    def _fill_costs(self, summary: UsageSummary) -> None:
        cost = summary.cost()
        self.cost_table.setRowCount(0)
        for api in cost["apis"]:
            self._append(self.cost_table, [api["name"], dollars(api["cost"]), api["read_on"] or "yours"])
        machine = cost["machine"]
        detail = f"{machine['energy_kwh']:.3f} kWh"
        if machine["hardware_price"]:
            detail += f" + hardware {dollars(machine['hardware_cost'])}"
        self._append(self.cost_table, ["This machine", dollars(machine["total"]), detail])

    @staticmethod
    def _append(table: QTableWidget, cells: list[str]) -> None:
        row = table.rowCount()
        table.insertRow(row)
        for column, text in enumerate(cells):
            table.setItem(row, column, QTableWidgetItem(text))

    def chosen_price(self) -> Price | None:
        if self.summary is None or not self.summary.prices:
            return None
        name = self.compare.currentText()
        return next((p for p in self.summary.prices if p.name == name), self.summary.prices[0])

    def _draw_charts(self) -> None:
        if self.summary is None:
            return
        table = self.summary.report.day_by_model()
        models = list(self.summary.report.by_model())
        tokens: Bars = [(day, [(m, float(c.total_tokens)) for m, c in row.items()]) for day, row in table.items()]
        self.tokens_chart.set_bars(tokens, models)
        price = self.chosen_price()
        if price is None:
            self.cost_chart.set_bars([], models, "Equivalent cost per day (no prices)")
            return
        costs: Bars = [(day, [(m, price.cost(c)) for m, c in row.items()]) for day, row in table.items()]
        self.cost_chart.set_bars(costs, models, f"Equivalent cost per day on {price.name}")

    # -- saving -----------------------------------------------------------------------

    def _save(self, changes: dict[str, Any]) -> None:
        engine = self.engine
        self.operations.run("disk", lambda: engine.update_settings(**changes), lambda _: self.refresh(), self._show_failure)

    def _show_failure(self, explanation: Explanation) -> None:
        log.warning("the Usage page could not read or save: %s", explanation.detail)
        self.totals.setText(f"{explanation.title}: {explanation.text}")

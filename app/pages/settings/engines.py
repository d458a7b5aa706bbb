"""Settings → Engines: remote OpenAI-compatible engines, and llama.cpp RPC workers.

Remote engines are added and removed at once (their keys go to the system keyring, which
must not wait for the dialog's Save); asking a remote for its models runs on the network
lane. The RPC workers list is a setting like the others, saved with the dialog.
"""

from __future__ import annotations

import logging

from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import (
    RPC_NO_AUTH_WARNING,
    InglenookError,
    ModelRecord,
    RemoteCatalogue,
    Settings,
    keyring_available,
    parse_workers,
    worker_reachable,
)

from inglenook.app.services.errors import Explanation
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

KEY_PLACES = {"keyring": "system keyring", "store": "settings database", "": "no key"}


class EnginesPage(QWidget):
    def __init__(self, catalogue: RemoteCatalogue, settings: Settings, operations: Operations,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.catalogue = catalogue
        self.operations = operations
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, 4, self)
        self.table.setHorizontalHeaderLabels(["Name", "Base URL", "Key kept in", "Models"])
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setMinimumHeight(120)
        layout.addWidget(self.table)
        form = QFormLayout()
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("e.g. office")
        self.base_url = QLineEdit(self)
        self.base_url.setPlaceholderText("http://office-box:8484/v1")
        self.key = QLineEdit(self)
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional")
        form.addRow("Name", self.name)
        form.addRow("Base URL", self.base_url)
        form.addRow("API key", self.key)
        layout.addLayout(form)
        self.key_note = QLabel(
            "Keys are kept in the system keyring." if keyring_available() else
            "This machine has no system keyring: keys are kept in Inglenook's settings database.", self)
        self.key_note.setObjectName("PageHint")
        self.key_note.setWordWrap(True)
        layout.addWidget(self.key_note)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add engine", self)
        self.add_button.clicked.connect(self.add_engine)
        self.remove_button = QPushButton("Remove selected", self)
        self.remove_button.clicked.connect(self.remove_selected)
        self.check_button = QPushButton("Check all", self)
        self.check_button.clicked.connect(self.refresh_models)
        for button in (self.add_button, self.remove_button, self.check_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.message = QLabel("", self)
        self.message.setObjectName("PageHint")
        self.message.setWordWrap(True)
        layout.addWidget(self.message)

        workers_title = QLabel("RPC workers (one model over several machines)", self)
        workers_title.setObjectName("SectionLabel")
        layout.addWidget(workers_title)
        self.rpc_workers = QPlainTextEdit("\n".join(settings.rpc_workers), self)
        self.rpc_workers.setPlaceholderText("HOST:PORT per line, each running `inglenook worker`")
        self.rpc_workers.setFixedHeight(70)
        layout.addWidget(self.rpc_workers)
        warning = QLabel(f"⚠ {RPC_NO_AUTH_WARNING} Models split over the workers appear as rpc/<model>.", self)
        warning.setObjectName("PageHint")
        warning.setWordWrap(True)
        layout.addWidget(warning)
        check_workers = QPushButton("Check workers", self)
        check_workers.clicked.connect(self.check_workers)
        layout.addWidget(check_workers)
        self.workers_status = QLabel("", self)
        self.workers_status.setObjectName("PageHint")
        self.workers_status.setWordWrap(True)
        layout.addWidget(self.workers_status)
        self._models: dict[str, int] = {}
        self.show_engines()

    # -- remote engines ----------------------------------------------------------------

    def show_engines(self) -> None:
        entries = Settings.load(self.catalogue.store).remote_engines
        self.table.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            name = str(entry.get("name", ""))
            problem = self.catalogue.problems.get(name)
            models = problem or (str(self._models[name]) if name in self._models else "…")
            cells = [name, str(entry.get("base_url", "")), KEY_PLACES.get(str(entry.get("key_in", "")), "?"), models]
            for column, text in enumerate(cells):
                self.table.setItem(row, column, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()

    def add_engine(self) -> None:
        try:
            where = self.catalogue.add(self.name.text(), self.base_url.text(), self.key.text() or None)
        except InglenookError as exc:
            self.operations.report(exc, self._show_failure)
            return
        self.message.setText(f"Added {self.name.text().strip()} (key: {KEY_PLACES[where]}); asking it for its models…")
        self.name.clear()
        self.base_url.clear()
        self.key.clear()
        self.show_engines()
        self.refresh_models()

    def remove_selected(self) -> None:
        rows = sorted({index.row() for index in self.table.selectedIndexes()})
        names = [item.text() for row in rows if (item := self.table.item(row, 0)) is not None]
        for name in names:
            self.catalogue.remove(name)
        if names:
            self.message.setText(f"Removed {', '.join(names)}.")
        self.show_engines()

    def refresh_models(self) -> None:
        self.operations.run("network", self.catalogue.records, self._listed, self._show_failure)

    def _listed(self, records: list[ModelRecord]) -> None:
        self._models = {}
        for record in records:
            engine = record.source.partition(":")[2]
            self._models[engine] = self._models.get(engine, 0) + 1
        problems = "; ".join(f"{name}: {why}" for name, why in self.catalogue.problems.items())
        self.message.setText(problems or f"{len(records)} remote model(s); choose them in the model picker.")
        self.show_engines()

    def _show_failure(self, explained: Explanation) -> None:
        self.message.setText(explained.text)

    # -- RPC workers -------------------------------------------------------------------

    def worker_list(self) -> list[str]:
        """The workers as typed (validated by ``changes``)."""
        return [line.strip() for line in self.rpc_workers.toPlainText().splitlines() if line.strip()]

    def check_workers(self) -> None:
        try:
            workers = parse_workers(self.worker_list())
        except InglenookError as exc:
            self.operations.report(exc, lambda explained: self.workers_status.setText(explained.text))
            return

        def check() -> str:
            states = [f"{w.endpoint}: {'reachable' if worker_reachable(w) else 'not reachable'}" for w in workers]
            return "; ".join(states) or "No workers listed."

        self.operations.run("network", check, self.workers_status.setText, self._show_failure)

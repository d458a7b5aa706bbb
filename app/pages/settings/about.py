"""Settings → About: the same report as ``inglenook doctor``, readable and copyable."""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from inglenook.engine import DoctorReport, Engine, collect

from inglenook.app.widgets.welcome import NETWORK_PROMISE
from inglenook.app.services.errors import Explanation
from inglenook.app.services.operations import Operations


class AboutPage(QWidget):
    """Versions, CPU variant, backends, GPUs; a self-test on request. Collected off the GUI thread."""

    def __init__(self, engine: Engine, operations: Operations, parent: QWidget | None = None) -> None:
        """The report runs on the answers lane, as the self-test runs a generation through the scheduler."""
        super().__init__(parent)
        self.engine = engine
        self.operations = operations
        layout = QVBoxLayout(self)
        layout.setContentsMargins(28, 24, 28, 24)
        layout.setSpacing(10)
        heading = QLabel("About", self)
        heading.setObjectName("PageTitle")
        hint = QLabel("What this installation runs. Paste it into a bug report; "
                      "`inglenook doctor` in a terminal prints the same.", self)
        # The network promise, where people look for it (README and the welcome say it too).
        network = QLabel(NETWORK_PROMISE, self)
        network.setObjectName("AboutNetwork")
        network.setWordWrap(True)
        hint.setObjectName("PageHint")
        hint.setWordWrap(True)
        self.text = QPlainTextEdit(self)
        self.text.setObjectName("AboutReport")
        self.text.setReadOnly(True)
        # Rows stay rows (as in a terminal): a wrapped row would break the key: value columns.
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlainText("Collecting…")
        buttons = QHBoxLayout()
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.clicked.connect(self.copy)
        self.self_test_button = QPushButton("Run self-test (2 s)", self)
        self.self_test_button.clicked.connect(lambda: self.refresh(self_test=True))
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.self_test_button)
        buttons.addStretch(1)
        layout.addWidget(heading)
        layout.addWidget(hint)
        layout.addWidget(network)
        layout.addWidget(self.text, 1)
        layout.addLayout(buttons)
        self.report: DoctorReport | None = None

    def refresh(self, self_test: bool = False) -> None:
        engine = self.engine
        self.self_test_button.setEnabled(False)
        if self_test:
            self.text.appendPlainText("\nRunning the self-test…")
        self.operations.run("answers", lambda: collect(engine, self_test_s=2.0 if self_test else 0.0), self._show,
                            self._show_failure)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text.toPlainText())

    def _show(self, report: DoctorReport) -> None:
        self.report = report
        self.text.setPlainText(report.as_text())
        self.self_test_button.setEnabled(True)

    def _show_failure(self, explained: Explanation) -> None:
        self.text.setPlainText(f"Could not collect the report: {explained.text}")
        self.self_test_button.setEnabled(True)

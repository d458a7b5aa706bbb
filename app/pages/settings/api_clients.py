"""Settings → API server → Coding agents: what Codex CLI, Claude Code and opencode need to
use this server, each with a Copy button (the same text `inglenook launch CLIENT --print`
shows), following the port and key as they are edited on the page."""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from inglenook.engine import CLIENTS, Endpoint, client_setup


class ApiClientsCard(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Card")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(18, 16, 18, 16)
        layout.setSpacing(8)
        intro = QLabel("Coding agents. `inglenook launch codex|claude|opencode` writes these settings "
                       "(keeping a backup) and starts the agent; or copy them:", self)
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.texts: dict[str, QPlainTextEdit] = {}
        self.places: dict[str, QLabel] = {}
        self.copy_buttons: dict[str, QPushButton] = {}
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        for client in CLIENTS:
            header = QHBoxLayout()
            place = QLabel("", self)
            place.setObjectName("PageHint")
            copy = QPushButton("Copy", self)
            copy.setObjectName(f"Copy-{client}")
            copy.clicked.connect(lambda _checked=False, c=client: QGuiApplication.clipboard().setText(self.texts[c].toPlainText()))
            header.addWidget(place, 1)
            header.addWidget(copy)
            layout.addLayout(header)
            text = QPlainTextEdit(self)
            text.setReadOnly(True)
            text.setFont(mono)
            text.setFixedHeight(120)
            layout.addWidget(text)
            self.texts[client], self.places[client], self.copy_buttons[client] = text, place, copy

    def show_endpoint(self, endpoint: Endpoint) -> None:
        for client in CLIENTS:
            setup = client_setup(client, endpoint)
            self.places[client].setText(f"{setup.title} — {setup.path}")
            self.texts[client].setPlainText(setup.copy_text())

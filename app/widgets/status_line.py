"""The status bar: which model is loaded (and the load bar above the chat), the memory in
use, and the API server's state with its Start/Stop button."""

from __future__ import annotations

import psutil
from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar, QToolButton

from inglenook.app.text.formatting import human_size
from inglenook.app.services.server_control import ServerController

MEMORY_EVERY_MS = 2000
API_TEXTS = {"starting": "API starting…", "stopped": "API off", "failed": "API failed to start"}


class StatusLine(QObject):
    def __init__(self, bar: QStatusBar, load_bar: QProgressBar, server: ServerController) -> None:
        super().__init__(bar)
        self.load_bar = load_bar
        self.server = server
        self._api_text = "API off"
        bar.setSizeGripEnabled(False)
        self.model_status = QLabel("No model loaded", bar)
        self.memory_status = QLabel("", bar)
        self.api_toggle = QToolButton(bar)
        self.api_toggle.setObjectName("MessageAction")
        self.api_toggle.setCheckable(True)
        self.api_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.api_toggle.setToolTip("Start or stop the local API server")
        self.api_toggle.clicked.connect(server.toggle)
        self.api_status = QLabel("API off", bar)
        bar.addWidget(self.model_status)
        bar.addWidget(self.memory_status)
        bar.addPermanentWidget(self.api_status)
        bar.addPermanentWidget(self.api_toggle)
        server.state_changed.connect(self.show_api_state)
        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(MEMORY_EVERY_MS)
        self._memory_timer.timeout.connect(self.update_memory)
        self._memory_timer.start()
        self.update_memory()
        self.show_api_state(server.state, server.url, server.error)

    def show_model_state(self, model_id: str, state: str, detail: object) -> None:
        if state == "loading":
            percent = int(detail * 100) if isinstance(detail, float) else 0  # detail: the fraction loaded
            self.load_bar.show()
            self.load_bar.setValue(percent)
            self.model_status.setText(f"Loading {model_id}… {percent}%")
        elif state == "loaded":
            self.load_bar.hide()
            ctx = f" · {detail} ctx" if detail else ""  # detail: the context size
            self.model_status.setText(f"● {model_id}{ctx}")
        elif state == "unloaded":
            self.model_status.setText("No model loaded")
        elif state == "failed":
            self.load_bar.hide()
            self.model_status.setText(f"{model_id} failed to load")

    def update_memory(self) -> None:
        try:
            rss = psutil.Process().memory_info().rss
            available = psutil.virtual_memory().available
        except psutil.Error:
            return
        self.memory_status.setText(f"Memory {human_size(rss)} in use  ·  {human_size(available)} free")
        self._show_api_users()

    def _show_api_users(self) -> None:
        """Who is using the box now: open generations per named API key, after the API state."""
        streams = self.server.streams_by_key()
        users = ", ".join(f"{name} {count}" for name, count in sorted(streams.items()))
        self.api_status.setText(f"{self._api_text}  ·  in use: {users}" if users else self._api_text)
        self.api_status.setToolTip("Generations in flight per API key" if users else "")

    def show_api_state(self, state: str, url: str, _error: object = None) -> None:
        on = state in ("running", "starting")
        self._api_text = f"API ● {url}" if state == "running" else API_TEXTS.get(state, state)
        self._show_api_users()
        self.api_toggle.setChecked(on)
        self.api_toggle.setText("Stop API" if on else "Start API")

    def stop(self) -> None:
        self._memory_timer.stop()

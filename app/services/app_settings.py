"""Saving the app's settings (the Settings dialog, the chat panel's context size) off the GUI
thread; ``saved`` tells the window which fields changed once they are durable."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject, Signal

from inglenook.engine import Engine

from inglenook.app.services.workers import Workers

log = logging.getLogger(__name__)

API_FIELDS = {"api_enabled", "api_port", "api_key", "cors_origins", "allowed_hosts", "api_host", "strict_model_names"}


class SettingsSaver(QObject):
    saved = Signal(dict)  # the fields that changed, after they are stored
    failed = Signal(object)  # an exception, for the banner

    def __init__(self, engine: Engine, workers: Workers, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.workers = workers

    def apply(self, changes: dict[str, Any]) -> None:
        if not changes:
            return
        engine = self.engine

        def stored(_settings: object) -> None:
            if "models_dirs" in changes:
                self._rescan(changes)
            else:
                self.saved.emit(changes)

        self.workers.disk.run(lambda: engine.update_settings(**changes), stored, self.failed.emit)

    def _rescan(self, changes: dict[str, Any]) -> None:
        """New folders to scan: registering their models may hash large files (the models lane)."""
        # The engine reads the folders from the settings just saved.
        self.workers.models.run(self.engine.rescan_models, lambda _: self.saved.emit(changes), self.failed.emit)

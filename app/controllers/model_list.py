"""The installed models and the default one, as the window knows them: read on the disk lane,
refreshed after downloads, imports, removals and settings changes."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from inglenook.engine import REMOTE_SOURCE, LoadPlan, ModelNotFound, ModelRecord

from inglenook.app.services.app_engine import AppEngine
from inglenook.app.services.workers import Workers

log = logging.getLogger(__name__)


class ModelList(QObject):
    changed = Signal()  # ``models`` and ``default_model`` were read again
    # The installed models and the default were read from disk (``changed`` also fires when
    # only the remote engines' list arrives, which can come first).
    local_read = Signal()
    failed = Signal(object)  # an exception, for the banner

    def __init__(self, engine: AppEngine, workers: Workers, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.workers = workers
        self.models: list[ModelRecord] = []  # installed ones first, then remote engines' models
        self.remote_models: list[ModelRecord] = []
        self.default_model: str | None = None
        # What loading each installed model would take (context, cache, memory), shown
        # before it loads: read with the list, off the GUI thread (it reads headers).
        self.plans: dict[str, LoadPlan] = {}
        # Installed models without a chat template (base models): marked in the picker and on
        # the Models page, and a new chat with one says what will happen.
        self.base_models: set[str] = set()
        self.local_loaded = False  # the installed models have been read at least once

    def refresh(self) -> None:
        engine = self.engine

        def read() -> tuple[list[ModelRecord], str | None, dict[str, LoadPlan], set[str]]:
            try:
                default = engine.default_model_id()
            except ModelNotFound:
                default = None  # nothing installed yet: the picker says so
            return engine.models(), default, engine.load_plans(), engine.base_models()

        self.workers.disk.run(read, self._read, self.failed.emit)
        # Remote engines answer over the network, which must not hold up the local list.
        self.workers.network.run(engine.remote_models, self._remote_read,
                                 lambda exc: log.warning("remote engines: %s", exc))

    def _read(self, result: tuple[list[ModelRecord], str | None, dict[str, LoadPlan], set[str]]) -> None:
        local, self.default_model, self.plans, self.base_models = result
        self.models = [*local, *self.remote_models]
        self.local_loaded = True
        self.changed.emit()
        self.local_read.emit()

    def _remote_read(self, records: list[ModelRecord]) -> None:
        self.remote_models = records
        self.models = [*(m for m in self.models if not self.is_remote(m)), *records]
        self.changed.emit()

    @staticmethod
    def is_remote(record: ModelRecord) -> bool:
        return record.source.startswith(REMOTE_SOURCE)

    def is_installed(self, model_id: str) -> bool:
        return any(m.id == model_id for m in self.models)

    def remove(self, model_id: str) -> None:
        engine = self.engine
        self.workers.disk.run(lambda: engine.remove_model(model_id), lambda _: self.refresh(), self.failed.emit)

    def load(self, model_id: str) -> None:
        """Load ``model_id`` ahead of the first message (the scheduler's thread does the work)."""
        if any(m.id == model_id and self.is_remote(m) for m in self.models):
            return  # a remote engine loads its own models
        try:
            self.engine.load_model(model_id)  # only queues the load
        except Exception as exc:  # noqa: BLE001 — shown in the banner, never raised into Qt
            self.failed.emit(exc)

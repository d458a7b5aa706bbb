"""Model load state for the GUI, fed by the engine's model listener.

The scheduler calls listeners on its own worker thread; this hub re-emits each event as a
Qt signal over a queued connection, so every handler runs on the GUI thread.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from inglenook.engine import Engine


class ModelStateHub(QObject):
    changed = Signal(str, str, object)  # (model id, state, detail) on the GUI thread
    _from_worker = Signal(str, str, object)

    def __init__(self, engine: Engine, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._engine = engine
        self.loaded: str | None = None
        self.loading: str | None = None
        self.progress: float = 0.0
        self.failed: dict[str, str] = {}
        self._from_worker.connect(self._apply, Qt.ConnectionType.QueuedConnection)
        engine.add_model_listener(self._listener)
        for model_id in engine.loaded_model_ids():
            self.loaded = model_id

    def _listener(self, model_id: str, state: str, detail: Any) -> None:
        # Runs on the scheduler thread: hand over plain values only, never the model object.
        if state == "loaded":
            detail = int(detail.n_ctx)  # the scheduler reports "loaded" with the model itself
        elif state == "loading":
            detail = float(detail or 0.0)
        elif state == "failed":
            detail = str(detail)
        else:
            detail = None
        self._from_worker.emit(model_id, state, detail)

    def _apply(self, model_id: str, state: str, detail: object) -> None:
        if state == "loading":
            self.loading, self.progress = model_id, detail if isinstance(detail, float) else 0.0  # the listener's float
            self.failed.pop(model_id, None)
        elif state == "loaded":
            self.loaded, self.loading, self.progress = model_id, None, 1.0
        elif state == "unloaded":
            if self.loaded == model_id:
                self.loaded = None
        elif state == "failed":
            self.loading = None
            self.failed[model_id] = str(detail)
        self.changed.emit(model_id, state, detail)

    def close(self) -> None:
        self._engine.remove_model_listener(self._listener)

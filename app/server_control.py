"""The local API server beside the window: started, stopped and restarted off the GUI thread."""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import QObject, Signal

from inglenook.engine.core import Engine

from .tasks import TaskRunner

log = logging.getLogger(__name__)


class ServerController(QObject):
    # (state, url, error): state is "starting", "running", "stopped", "failed" or "unavailable"
    state_changed = Signal(str, str, object)

    def __init__(self, engine: Engine, tasks: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.tasks = tasks
        self.server: Any = None
        self.state = "stopped"
        self.url = ""
        self.error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    def start(self) -> None:
        if self.state in ("starting", "running"):
            return
        self._set("starting", self._planned_url(), None)
        self.tasks.run(self._start_blocking, self._on_started, self._on_failed)

    def stop(self) -> None:
        server = self.server
        self.server = None
        if server is None:
            self._set("stopped", "", None)
            return
        self.tasks.run(lambda: server.stop(timeout=5.0), lambda _: self._set("stopped", "", None), self._on_failed)

    def restart(self) -> None:
        server = self.server
        self.server = None
        if server is None:
            self.start()
            return
        self._set("starting", self._planned_url(), None)

        def restart() -> Any:
            server.stop(timeout=5.0)
            return self._start_blocking()

        self.tasks.run(restart, self._on_started, self._on_failed)

    def shutdown(self) -> None:
        """Stop at once, on the calling thread (the window is closing)."""
        server, self.server = self.server, None
        if server is not None:
            try:
                server.stop(timeout=5.0)
            except Exception:
                log.exception("stopping the API server failed")

    def _planned_url(self) -> str:
        s = self.engine.settings
        return f"http://{s.api_host}:{s.api_port}/v1"

    def _start_blocking(self) -> Any:
        try:
            from inglenook.engine.server import ApiServer  # noqa: PLC0415 — FastAPI loads only when serving
        except ImportError as exc:
            raise ModuleNotFoundError("the API server is not part of this build") from exc
        server = ApiServer.from_settings(self.engine)
        server.start()
        return server

    def _on_started(self, server: Any) -> None:
        self.server = server
        url = str(getattr(server, "url", self._planned_url()))
        if not url.rstrip("/").endswith("/v1"):
            url = url.rstrip("/") + "/v1"
        self._set("running", url, None)

    def _on_failed(self, exc: BaseException) -> None:
        if isinstance(exc, ModuleNotFoundError):
            self._set("unavailable", "", exc)
        else:
            log.warning("API server: %s", exc)
            self._set("failed", self._planned_url(), exc)

    def _set(self, state: str, url: str, error: BaseException | None) -> None:
        self.state, self.url, self.error = state, url, error
        self.state_changed.emit(state, url, error)

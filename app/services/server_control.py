"""The local API server beside the window: started, stopped and restarted on the server lane."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from inglenook.engine import Engine

from inglenook.app.services.workers import Lane

if TYPE_CHECKING:
    from inglenook.engine import ApiServer  # FastAPI loads only when the server starts

log = logging.getLogger(__name__)


class ServerController(QObject):
    # (state, url, error): state is "starting", "running", "stopped" or "failed"
    state_changed = Signal(str, str, object)

    def __init__(self, engine: Engine, lane: Lane, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.lane = lane
        self.server: ApiServer | None = None
        self.state = "stopped"
        self.url = ""
        self.error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    def streams_by_key(self) -> dict[str, int]:
        """Generations in flight per named API key ({} while the server is off)."""
        server = self.server
        return server.active_streams_by_key() if server is not None else {}

    def start(self) -> None:
        if self.state in ("starting", "running"):
            return
        self._set("starting", self._planned_url(), None)
        self.lane.run(self._start_blocking, self._on_started, self._on_failed)

    def stop(self) -> None:
        server = self.server
        self.server = None
        if server is None:
            self._set("stopped", "", None)
            return
        self.lane.run(lambda: server.stop(timeout=5.0), lambda _: self._set("stopped", "", None), self._on_failed)

    def restart(self) -> None:
        server = self.server
        self.server = None
        if server is None:
            self.start()
            return
        self._set("starting", self._planned_url(), None)

        def restart() -> ApiServer:
            server.stop(timeout=5.0)
            return self._start_blocking()

        self.lane.run(restart, self._on_started, self._on_failed)

    def toggle(self) -> None:
        """The status bar's Start/Stop API button."""
        if self.state in ("running", "starting"):
            self.stop()
        else:
            self.start()

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

    def _start_blocking(self) -> ApiServer:
        from inglenook.engine import ApiServer  # noqa: PLC0415 — FastAPI loads only when serving

        server = ApiServer.from_settings(self.engine)
        server.start()
        return server

    def _on_started(self, server: ApiServer) -> None:
        self.server = server
        url = server.url.rstrip("/")
        self._set("running", url if url.endswith("/v1") else url + "/v1", None)

    def _on_failed(self, exc: BaseException) -> None:
        log.warning("API server: %s", exc)
        self._set("failed", self._planned_url(), exc)

    def _set(self, state: str, url: str, error: BaseException | None) -> None:
        self.state, self.url, self.error = state, url, error
        self.state_changed.emit(state, url, error)

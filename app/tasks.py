"""Background work for the GUI: one small task runner, results delivered as queued signals.

The GUI thread never waits on inference, disk or network (DESIGN rule 2). Slow calls run
on a ``QThreadPool``; their results come back through a ``QObject`` that lives on the GUI
thread, over queued connections, so callbacks always run on the GUI thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal


log = logging.getLogger(__name__)

Callback = Callable[[Any], None]


class _Relay(QObject):
    """Lives on the GUI thread; the worker emits, the GUI thread runs the callbacks."""

    done = Signal(object, object)  # (callback, result)

    def __init__(self) -> None:
        super().__init__()
        self.done.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def _deliver(self, callback: Callback | None, value: object) -> None:
        if callback is not None:
            callback(value)


class _Job(QRunnable):
    def __init__(self, relay: _Relay, fn: Callable[[], Any], on_done: Callback | None, on_error: Callback | None) -> None:
        super().__init__()
        self.setAutoDelete(True)
        self._relay = relay
        self._fn = fn
        self._on_done = on_done
        self._on_error = on_error

    def run(self) -> None:
        try:
            value = self._fn()
        except Exception as exc:  # every failure is handed back to the GUI, never swallowed
            if self._on_error is None:
                log.exception("background task failed")
            self._relay.done.emit(self._on_error, exc)
            return
        self._relay.done.emit(self._on_done, value)


class TaskRunner(QObject):
    """Runs callables off the GUI thread; ``on_done``/``on_error`` run back on the GUI thread."""

    def __init__(self, parent: QObject | None = None, max_threads: int = 8) -> None:
        super().__init__(parent)
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(max_threads)
        self._relay = _Relay()
        self._relay.setParent(self)

    def run(self, fn: Callable[[], Any], on_done: Callback | None = None, on_error: Callback | None = None) -> None:
        self._pool.start(_Job(self._relay, fn, on_done, on_error))

    def start_thread(self, runnable: QRunnable) -> None:
        """Run a long-lived runnable (a streaming answer) on the same pool."""
        self._pool.start(runnable)

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Wait for running tasks (shutdown and tests only; never while the GUI is live)."""
        return self._pool.waitForDone(timeout_ms)

"""The prefix cache's writer thread: saved states go to disk off the scheduler's thread.

A save copies the state out (that blocks the turn); checksumming, writing, fsync and the
rename do not, so they run here, one file at a time. A state dropped or replaced before its
turn is not written; one forgotten while it was written is deleted after (``landed``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .cache_keys import CacheEntry
from .statefile import write_state_file

log = logging.getLogger(__name__)

Payload = bytearray | np.ndarray


class StateWriter:
    """Queued writes of saved states, on a thread of its own started with the first."""

    def __init__(self, lock: threading.RLock, path_of: Callable[[str], Path],
                 landed: Callable[[str, CacheEntry, Path], None], written: Callable[[float], None]) -> None:
        """``lock``: the cache's; ``path_of(name)``: an entry's file; ``landed(name, entry,
        path)``, under the lock, once ``entry`` is on disk (no longer pending);
        ``written(seconds)``, after each write, outside the lock."""
        self._lock = lock
        self._path_of = path_of
        self._landed = landed
        self._written = written
        self.pending: dict[str, tuple[CacheEntry, Payload]] = {}  # guarded by the lock
        self._writes: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def put(self, entry: CacheEntry, payload: Payload) -> None:
        """Queue ``entry`` for disk (with the lock held)."""
        self.pending[entry.name] = (entry, payload)
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="inglenook-cache-writer", daemon=True)
            self._thread.start()
        self._writes.put(entry.name)

    def idle(self) -> bool:
        """Nothing is waiting to be written or being written (with the lock held)."""
        return not self.pending and self._writes.unfinished_tasks == 0

    def close(self) -> None:
        if self._thread is not None:
            self._writes.put(None)
            self._thread.join(10)

    def _loop(self) -> None:
        while True:
            name = self._writes.get()
            try:
                if name is None:
                    return
                self._write_one(name)
            except Exception:  # a failed write costs a prefill later, never the engine
                log.exception("writing a prompt-cache state failed")
            finally:
                self._writes.task_done()

    def _write_one(self, name: str) -> None:
        with self._lock:
            pending = self.pending.get(name)
        if pending is None:
            return  # dropped or replaced before we got to it
        entry, payload = pending
        started = time.perf_counter()
        path = self._path_of(name)
        try:
            write_state_file(path, entry.header, payload)
        except OSError as exc:
            log.warning("could not save a prompt-cache state: %s", exc.strerror or exc)
            with self._lock:
                if self.pending.get(name) is pending:
                    del self.pending[name]
            return
        with self._lock:
            if self.pending.get(name) is pending:
                del self.pending[name]
            self._landed(name, entry, path)
        self._written(time.perf_counter() - started)

"""Run pure-Python work on the calling thread with a deadline and a cancel event.

A chat template is a small program from a downloaded file, and it runs on the scheduler's
thread: a loop that never ends there would stall every answer. Python cannot kill a
thread, but it can ask one to raise an exception at its next bytecode
(``PyThreadState_SetAsyncExc``). A watchdog thread does that when the deadline passes or the
cancel event is set. It cannot stop one long C call (a huge string repetition), so callers
bound those themselves; it does stop any Python-level loop.

The arming is race-free: the watchdog fires only while the work is still running (both
sides take one lock), and disarming clears an exception that was fired but not yet raised,
so nothing is ever raised after ``run_interruptible`` returns.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_POLL_S = 0.02


class _Interrupt(BaseException):
    """Raised inside the work; a BaseException so ``except Exception`` in it cannot swallow it."""


class Interrupted(Exception):
    """The work was stopped: ``reason`` is "deadline" or "cancelled"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class _Watchdog:
    def __init__(self, thread_id: int, seconds: float, cancel: threading.Event | None) -> None:
        self._thread_id = thread_id
        self._deadline = time.monotonic() + seconds
        self._cancel = cancel
        self._lock = threading.Lock()
        self._armed = True
        self._done = threading.Event()
        self.fired: str | None = None

    def watch(self) -> None:
        while not self._done.wait(_POLL_S):
            reason = "cancelled" if self._cancel is not None and self._cancel.is_set() else None
            if reason is None and time.monotonic() >= self._deadline:
                reason = "deadline"
            if reason is None:
                continue
            with self._lock:
                if self._armed:
                    self.fired = reason
                    _set_async_exc(self._thread_id, _Interrupt)
            return

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
            if self.fired is not None:
                _set_async_exc(self._thread_id, None)  # not raised yet: never raise it later
        self._done.set()


def run_interruptible(work: Callable[[], T], seconds: float, cancel: threading.Event | None = None) -> T:
    """``work()``, stopped with ``Interrupted`` after ``seconds`` or once ``cancel`` is set."""
    if cancel is not None and cancel.is_set():
        raise Interrupted("cancelled")
    watchdog = _Watchdog(threading.get_ident(), seconds, cancel)
    thread = threading.Thread(target=watchdog.watch, name="inglenook-watchdog", daemon=True)
    try:
        thread.start()
        try:
            return work()
        finally:
            watchdog.disarm()
    except _Interrupt:
        raise Interrupted(watchdog.fired or "deadline") from None

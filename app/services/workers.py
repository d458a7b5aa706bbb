"""Background work for the GUI: one lane per kind of work, each on its own long-lived threads.

The GUI thread never waits on inference, disk or network (rule 2 of docs/ARCHITECTURE.md). Every slow call
goes to the ``Lane`` of its kind; the lane's threads take calls in order from its queue, and
results come back over a queued signal, so callbacks always run on the GUI thread (the shape
of GPT4All's chat client: work in on a queue, results out as signals).

Kinds never share threads, so long work of one kind cannot starve another: a multi-gigabyte
download or a lab run does not hold up opening a conversation. ``Workers`` holds the lanes:

- ``answers``: starting and saving chat answers (a store write and a submission each: the
  streaming between them parks no thread, see ``Wakeups``), remote engines' answers (read
  from the network, so each holds a thread while it streams), the doctor's self-test.
- ``downloads``: model downloads (a few side by side, as the Models page shows them).
- ``models``: imports, scans of folders and other apps' models (hashing large files).
- ``disk``: SQLite reads and writes, exports, settings, the cache's size: short, in order.
- ``network``: Hugging Face searches and repository listings.
- ``server``: starting and stopping the API server.
- ``lab``: the quantization lab's listings and measurement runs.
- ``voice``: speech for the window: a transcription handed to the engine's speech lane and
  waited for, and an answer read aloud sentence by sentence (two threads: hearing the person
  never waits behind a voice that is speaking).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Qt, Signal

log = logging.getLogger(__name__)

T = TypeVar("T")
Callback = Callable[[Any], None]


@dataclass(frozen=True)
class _Call:
    fn: Callable[[], Any]
    on_done: Callback | None
    on_error: Callback | None


class Lane(QObject):
    """A queue of calls for one kind of work and the threads that run them."""

    _deliver = Signal(object, object)  # (callback, value), emitted on a worker thread

    def __init__(self, name: str, threads: int = 1, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self._queue: queue.Queue[_Call | None] = queue.Queue()
        self._busy = 0  # calls queued or running
        self._idle = threading.Condition()
        self._closed = False
        self._deliver.connect(self._call_back, Qt.ConnectionType.QueuedConnection)
        # Daemon threads: a call stuck in a network read must not keep a closed app alive.
        self._threads = [
            threading.Thread(target=self._loop, name=f"inglenook-{name}-{i}", daemon=True) for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def threads(self) -> int:
        """How many calls this lane runs at once."""
        return len(self._threads)

    def run(self, fn: Callable[[], Any], on_done: Callback | None = None, on_error: Callback | None = None) -> None:
        """Queue ``fn``; ``on_done(result)`` or ``on_error(exception)`` then runs on the GUI thread."""
        if self._closed:
            log.debug("%s lane is closed; dropped a call", self.name)
            return
        with self._idle:
            self._busy += 1
        self._queue.put(_Call(fn, on_done, on_error))

    def relay(self, callback: Callable[[T], None]) -> Callable[[T], None]:
        """A function any thread may call: ``callback`` gets its argument on the GUI thread
        (progress reports, streamed chunks)."""
        return lambda value: self._post(callback, value)

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Wait until every queued call has run (shutdown and tests; never while the GUI is live)."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._idle:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout_ms: int = 5_000) -> None:
        """Let the threads finish what is queued, then end them; later calls are dropped."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        deadline = time.monotonic() + timeout_ms / 1000
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("%s is still busy at shutdown", thread.name)

    def _loop(self) -> None:
        while (call := self._queue.get()) is not None:
            try:
                value = call.fn()
            except Exception as exc:  # every failure is handed back to the GUI, never swallowed
                if call.on_error is None:
                    log.exception("%s task failed", self.name)
                self._post(call.on_error, exc)
            else:
                self._post(call.on_done, value)
            finally:
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _post(self, callback: Callback | None, value: object) -> None:
        if callback is None:
            return
        try:
            self._deliver.emit(callback, value)
        except RuntimeError:  # the window (and this lane's Qt half) is already gone
            log.debug("%s lane: a result arrived after the window closed", self.name)

    def _call_back(self, callback: Callback, value: object) -> None:
        callback(value)


class Wakeups(QObject):
    """Wake-ups from the scheduler's thread, delivered on the GUI thread; no thread waits.

    A job's events are read on the GUI thread with ``poll`` as its waker announces them, so
    an answer holds no thread while it streams and the window runs as many at once as the
    engine has sequences. ``waker_for(key)`` is the function to hand the job (called on the
    scheduler's thread, so it only notes the key); the first wake-up of a burst posts one
    queued signal, the others join it, so a step that feeds every stream wakes the GUI once,
    and ``on_wake`` gets the keys woken since (the GUI-thread twin of the API's ``LoopWaker``).
    """

    _woken = Signal()  # emitted on the scheduler's thread, delivered queued

    def __init__(self, on_wake: Callable[[list[Any]], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._on_wake = on_wake
        self._pending: list[Any] = []
        self._lock = threading.Lock()
        self._woken.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def waker_for(self, key: object) -> Callable[[], None]:
        def wake() -> None:
            with self._lock:
                first = not self._pending
                if key not in self._pending:
                    self._pending.append(key)
            if not first:
                return  # a delivery is already on its way
            try:
                self._woken.emit()
            except RuntimeError:  # the window (and this object's Qt half) is already gone
                log.debug("a wake-up arrived after the window closed")

        return wake

    def _deliver(self) -> None:
        with self._lock:
            keys, self._pending = self._pending, []
        self._on_wake(keys)


class Workers(QObject):
    """The window's lanes, one per kind of work; each starts its threads when first used."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._lanes: list[Lane] = []

    def _lane(self, name: str, threads: int = 1) -> Lane:
        lane = Lane(name, threads, self)
        self._lanes.append(lane)
        return lane

    @cached_property
    def answers(self) -> Lane:
        return self._lane("answers", threads=4)

    @cached_property
    def downloads(self) -> Lane:
        return self._lane("downloads", threads=3)

    @cached_property
    def models(self) -> Lane:
        return self._lane("models")

    @cached_property
    def disk(self) -> Lane:
        return self._lane("disk")

    @cached_property
    def network(self) -> Lane:
        return self._lane("network")

    @cached_property
    def server(self) -> Lane:
        return self._lane("server")

    @cached_property
    def lab(self) -> Lane:
        return self._lane("lab")

    @cached_property
    def voice(self) -> Lane:
        return self._lane("voice", threads=2)

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Wait for every lane to run what it has queued, within one shared deadline."""
        deadline = time.monotonic() + timeout_ms / 1000
        done = True
        for lane in list(self._lanes):
            done = lane.wait(max(0, int((deadline - time.monotonic()) * 1000))) and done
        return done

    def close(self, timeout_ms: int = 5_000) -> None:
        """End every lane's threads, within one shared deadline."""
        deadline = time.monotonic() + timeout_ms / 1000
        for lane in list(self._lanes):
            lane.close(max(0, int((deadline - time.monotonic()) * 1000)))

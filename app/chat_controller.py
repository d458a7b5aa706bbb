"""Chat turns off the GUI thread: each answer streams on a worker, chunks come back as signals.

Iterating a ``Turn`` blocks until the next token, so it runs on a pool thread. Chunks are
collected as they arrive and handed to the view at most every ``FLUSH_MS`` milliseconds:
one repaint per batch instead of one per token keeps the window smooth and flicker-free.
Each conversation can have one answer in flight; the scheduler queues them in order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QRunnable, Qt, QTimer, Signal

from inglenook.engine.chat import Turn
from inglenook.engine.core import Engine

from .tasks import TaskRunner

log = logging.getLogger(__name__)

FLUSH_MS = 40


class _StreamSignals(QObject):
    started = Signal(int, object)  # (conversation id, saved messages before the answer)
    chunk = Signal(int, str)
    finished = Signal(int, object)  # (conversation id, saved answer Message or None)
    failed = Signal(int, object)  # (conversation id, exception)


class AnswerControl:
    """What the GUI holds of an answer in flight: a way to stop it from any thread."""

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._turn: Turn | None = None

    def cancel(self) -> None:
        with self._lock:
            self._cancel.set()
            if self._turn is not None:
                self._turn.cancel()

    def attach(self, turn: Turn) -> None:
        with self._lock:
            self._turn = turn
            if self._cancel.is_set():
                turn.cancel()


class _AnswerRunnable(QRunnable):
    def __init__(
        self, conversation_id: int, start: Callable[[], Turn], engine: Engine, signals: _StreamSignals, control: AnswerControl
    ) -> None:
        super().__init__()
        self.conversation_id = conversation_id
        self._start = start
        self._engine = engine
        self._signals = signals
        self._control = control

    def run(self) -> None:
        cid = self.conversation_id
        try:
            turn = self._start()
            self._control.attach(turn)
            self._signals.started.emit(cid, self._engine.store.messages(cid))
            for chunk in turn:
                if chunk.text:
                    self._signals.chunk.emit(cid, chunk.text)
        except Exception as exc:  # every failure reaches the person, as a message they can act on
            log.info("answer in conversation %d failed: %s", cid, exc)
            self._signals.failed.emit(cid, exc)
            return
        self._signals.finished.emit(cid, turn.message)


@dataclass
class StreamState:
    control: AnswerControl
    text: str = ""
    dirty: bool = False
    started: bool = False
    parts: list[str] = field(default_factory=list)


class ChatController(QObject):
    """Starts, streams, stops answers; reports through GUI-thread signals."""

    answer_started = Signal(int, object)  # (conversation id, saved messages)
    answer_text = Signal(int, str)  # (conversation id, the whole answer so far)
    answer_finished = Signal(int, object)  # (conversation id, Message | None)
    answer_failed = Signal(int, object)  # (conversation id, exception)

    def __init__(self, engine: Engine, tasks: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.tasks = tasks
        self.streams: dict[int, StreamState] = {}
        self._signals = _StreamSignals(self)
        queued = Qt.ConnectionType.QueuedConnection
        self._signals.started.connect(self._on_started, queued)
        self._signals.chunk.connect(self._on_chunk, queued)
        self._signals.finished.connect(self._on_finished, queued)
        self._signals.failed.connect(self._on_failed, queued)
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)

    # -- commands ---------------------------------------------------------------------

    def send(self, conversation_id: int, text: str) -> bool:
        chats = self.engine.chats
        return self._start(conversation_id, lambda: chats.send(conversation_id, text))

    def regenerate(self, conversation_id: int) -> bool:
        chats = self.engine.chats
        return self._start(conversation_id, lambda: chats.regenerate(conversation_id))

    def edit_and_resend(self, conversation_id: int, message_id: int, text: str) -> bool:
        chats = self.engine.chats
        return self._start(conversation_id, lambda: chats.edit_and_resend(message_id, text))

    def stop(self, conversation_id: int) -> bool:
        state = self.streams.get(conversation_id)
        if state is None:
            return False
        state.control.cancel()
        return True

    def stop_all(self) -> None:
        for state in list(self.streams.values()):
            state.control.cancel()

    def is_streaming(self, conversation_id: int) -> bool:
        return conversation_id in self.streams

    def text_of(self, conversation_id: int) -> str:
        state = self.streams.get(conversation_id)
        if state is None:
            return ""
        self._collect(state)
        return state.text

    # -- plumbing ---------------------------------------------------------------------

    def _start(self, conversation_id: int, start: Callable[[], Turn]) -> bool:
        if conversation_id in self.streams:
            return False  # one answer at a time per conversation
        control = AnswerControl()
        self.streams[conversation_id] = StreamState(control)
        self.tasks.start_thread(_AnswerRunnable(conversation_id, start, self.engine, self._signals, control))
        return True

    def _on_started(self, conversation_id: int, messages: object) -> None:
        state = self.streams.get(conversation_id)
        if state is not None:
            state.started = True
        self.answer_started.emit(conversation_id, messages)

    def _on_chunk(self, conversation_id: int, text: str) -> None:
        state = self.streams.get(conversation_id)
        if state is None:
            return
        state.parts.append(text)
        state.dirty = True
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    @staticmethod
    def _collect(state: StreamState) -> None:
        if state.parts:
            state.text += "".join(state.parts)
            state.parts.clear()

    def _flush(self) -> None:
        for conversation_id, state in list(self.streams.items()):
            if state.dirty:
                state.dirty = False
                self._collect(state)
                self.answer_text.emit(conversation_id, state.text)

    def _on_finished(self, conversation_id: int, message: object) -> None:
        state = self.streams.pop(conversation_id, None)
        if state is not None:
            self._collect(state)
        self.answer_finished.emit(conversation_id, message)

    def _on_failed(self, conversation_id: int, exc: object) -> None:
        self.streams.pop(conversation_id, None)
        self.answer_failed.emit(conversation_id, exc)

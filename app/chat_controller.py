"""Chat turns off the GUI thread: each answer streams on the answers lane, chunks come back as signals.

Iterating a ``Turn`` blocks until the next token, so it runs on a worker thread. Chunks are
collected as they arrive and handed to the view at most every ``FLUSH_MS`` milliseconds:
one repaint per batch instead of one per token keeps the window smooth and flicker-free.
Before the first chunk, the prompt's reading progress comes back the same way (the latest
one per flush), so a long prompt shows "Reading 3,200 of 6,159 prompt tokens" instead of
minutes of "Thinking…". Each conversation can have one answer in flight; the scheduler
queues them in order.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QTimer, Signal

from inglenook.engine import Engine, Message, PromptProgress, Turn

from .workers import Lane

log = logging.getLogger(__name__)

FLUSH_MS = 40


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


@dataclass
class StreamState:
    control: AnswerControl
    text: str = ""
    dirty: bool = False
    started: bool = False
    parts: list[str] = field(default_factory=list)
    progress: PromptProgress | None = None  # the latest, not yet shown


class ChatController(QObject):
    """Starts, streams, stops answers; reports through GUI-thread signals."""

    answer_started = Signal(int, object)  # (conversation id, saved messages)
    answer_text = Signal(int, str)  # (conversation id, the whole answer so far)
    answer_progress = Signal(int, object)  # (conversation id, PromptProgress) before the first text
    answer_finished = Signal(int, object)  # (conversation id, Message | None)
    answer_failed = Signal(int, object)  # (conversation id, exception)
    streams_changed = Signal()  # an answer started or ended: ``streams`` changed

    def __init__(self, engine: Engine, lane: Lane, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.lane = lane
        self.streams: dict[int, StreamState] = {}
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
        self.streams_changed.emit()
        cid = conversation_id
        started = self.lane.relay(functools.partial(self._on_started, cid))
        chunk = self.lane.relay(functools.partial(self._on_chunk, cid))
        progress = self.lane.relay(functools.partial(self._on_progress, cid))
        store = self.engine.store

        def stream() -> Message | None:
            """On the answers lane: commit the message, start the job, forward its progress and chunks."""
            turn = start()
            turn.on_progress = progress
            control.attach(turn)
            started(store.messages(cid))
            for piece in turn:
                if piece.text:
                    chunk(piece.text)
            return turn.message

        self.lane.run(stream, lambda message: self._on_finished(cid, message), lambda exc: self._on_failed(cid, exc))
        return True

    def _on_started(self, conversation_id: int, messages: list[Message]) -> None:
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

    def _on_progress(self, conversation_id: int, progress: PromptProgress) -> None:
        state = self.streams.get(conversation_id)
        if state is None or state.text or state.parts:
            return  # the answer has begun: its text replaces the progress
        state.progress = progress
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    @staticmethod
    def _collect(state: StreamState) -> None:
        if state.parts:
            state.text += "".join(state.parts)
            state.parts.clear()

    def _flush(self) -> None:
        for conversation_id, state in list(self.streams.items()):
            if state.progress is not None and not state.dirty:
                self.answer_progress.emit(conversation_id, state.progress)
            state.progress = None
            if state.dirty:
                state.dirty = False
                self._collect(state)
                self.answer_text.emit(conversation_id, state.text)

    def _on_finished(self, conversation_id: int, message: Message | None) -> None:
        state = self.streams.pop(conversation_id, None)
        if state is not None:
            self._collect(state)
        self.streams_changed.emit()
        self.answer_finished.emit(conversation_id, message)

    def _on_failed(self, conversation_id: int, exc: BaseException) -> None:
        # Every failure reaches the person, as a message they can act on.
        log.info("answer in conversation %d failed: %s", conversation_id, exc)
        self.streams.pop(conversation_id, None)
        self.streams_changed.emit()
        self.answer_failed.emit(conversation_id, exc)

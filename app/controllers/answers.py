"""Chat answers streaming into the window, with no thread parked per answer.

Starting an answer (committing the message, submitting the job) and saving it at the end
write the store, so they run on the answers lane. In between, the job's waker
(``workers.Wakeups``) posts a queued signal from the scheduler's thread and the GUI thread
reads the events that arrived with ``Turn.poll``, which never waits: the window runs as
many answers at once as the engine has sequences, and the GUI thread never blocks on
inference. (A remote engine's answer is read from the network, so it streams on a lane
thread as it always did.)

Chunks are collected as they arrive and handed to the view at most every ``FLUSH_MS``
milliseconds: one repaint per batch instead of one per token keeps the window smooth and
flicker-free. An update that costs more (a long table or list is laid out again as it grows)
spaces the next one out to twice its cost, so the window always has time for the person:
Esc and typing stay prompt however heavy the answer gets. Before the first chunk, the
prompt's reading progress comes back the same way (the latest one per flush), so a long
prompt shows "Reading 3,200 of 6,159 prompt tokens" instead of minutes of "Starting the
answer…". Each conversation can have one answer in flight; the scheduler queues them in
order.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QTimer, Signal

from inglenook.engine import (
    CallFinished, CallRequest, Decision, ImageInput, Message, PromptProgress, RoundFinished, ToolTurn, ToolTurnEvent,
    Turn,
)

from inglenook.app.services.app_engine import AppEngine
from inglenook.app.controllers.approvals import ApprovalBridge, refusal
from inglenook.app.services.workers import Lane, Wakeups

log = logging.getLogger(__name__)

FLUSH_MS = 40
MAX_FLUSH_MS = 10_000  # however slow an update, the answer still shows at least this often


class AnswerControl:
    """What the GUI holds of an answer in flight: a way to stop it from any thread."""

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._turn: Turn | ToolTurn | None = None

    def cancel(self) -> Turn | ToolTurn | None:
        """Stop the answer; returns its turn when one was attached before (else the lane
        thread that attaches it sees the stop, and ends the turn itself)."""
        with self._lock:
            self._cancel.set()
            if self._turn is not None:
                self._turn.cancel()
            return self._turn

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def attach(self, turn: Turn | ToolTurn) -> bool:
        """Hold ``turn``; True when the answer was stopped before it (it is cancelled now)."""
        with self._lock:
            self._turn = turn
            if self._cancel.is_set():
                turn.cancel()
                return True
            return False


class Phase(enum.Enum):
    STARTING = "starting"  # on the answers lane: message committed, job submitted
    POLLING = "polling"  # streaming: the GUI thread reads the job's events when woken
    HANDED_OFF = "handed off"  # stopped by stop_all: a lane thread reads the rest and saves
    SAVING = "saving"  # the job ended: the answers lane saves it


@dataclass(eq=False)  # a key of the wake-ups: compared by identity
class StreamState:
    conversation_id: int
    control: AnswerControl
    text: str = ""
    dirty: bool = False
    started: bool = False
    parts: list[str] = field(default_factory=list)
    progress: PromptProgress | None = None  # the latest, not yet shown
    phase: Phase = Phase.STARTING
    turn: Turn | None = None  # set once the GUI thread reads it (POLLING)


class ChatController(QObject):
    """Starts, streams, stops answers; reports through GUI-thread signals."""

    answer_started = Signal(int, object)  # (conversation id, saved messages)
    answer_text = Signal(int, str)  # (conversation id, the whole answer so far)
    answer_progress = Signal(int, object)  # (conversation id, PromptProgress) before the first text
    answer_finished = Signal(int, object)  # (conversation id, Message | None)
    answer_failed = Signal(int, object)  # (conversation id, exception)
    streams_changed = Signal()  # an answer started or ended: ``streams`` changed
    # A chat with tools (tool_turn.py): a call waits for the person, a call ended, a round
    # that called ended (its answer is saved; the next round's text is a new answer).
    tool_call_asked = Signal(int, object, object)  # (conversation id, CallRequest, pending: .answer(Decision))
    tool_call_done = Signal(int, object)  # (conversation id, CallRecord)
    tool_round_done = Signal(int, object)  # (conversation id, Message | None)

    def __init__(self, engine: AppEngine, lane: Lane, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.lane = lane
        self.streams: dict[int, StreamState] = {}
        self._wakeups = Wakeups(self._woken, self)
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)
        self.approvals = ApprovalBridge(self)
        # For a chat with tools: a first-round choice ("required" or a tool's name forces a
        # call; None lets the model choose) and the rounds per answer (None: the engine's).
        self.tool_choice: str | None = None
        self.tool_rounds: int | None = None
        self.approvals.asked.connect(lambda request, pending: self.tool_call_asked.emit(
            request.conversation_id, request, pending))

    # -- commands ---------------------------------------------------------------------

    def send(self, conversation_id: int, text: str, images: list[ImageInput] | None = None) -> bool:
        chats, cid = self.engine.chats, conversation_id
        if images:  # a tool turn takes text only: a message with images is answered without tools
            return self._start(cid, lambda: chats.send(cid, text, images=images))
        return self._ask(cid, lambda: chats.send(cid, text),
                         lambda approver, choice, rounds: chats.send_with_tools(
                             cid, text, approver, tool_choice=choice, max_rounds=rounds))

    def regenerate(self, conversation_id: int) -> bool:
        chats, cid = self.engine.chats, conversation_id
        return self._ask(cid, lambda: chats.regenerate(cid),
                         lambda approver, choice, rounds: chats.regenerate_with_tools(
                             cid, approver, tool_choice=choice, max_rounds=rounds))

    def continue_answer(self, conversation_id: int) -> bool:
        chats = self.engine.chats
        return self._start(conversation_id, lambda: chats.continue_answer(conversation_id))

    def edit_and_resend(self, conversation_id: int, message_id: int, text: str) -> bool:
        chats = self.engine.chats
        return self._ask(conversation_id, lambda: chats.edit_and_resend(message_id, text),
                         lambda approver, choice, rounds: chats.edit_and_resend_with_tools(
                             message_id, text, approver, tool_choice=choice, max_rounds=rounds))

    def _ask(self, conversation_id: int, plain: Callable[[], Turn],
             with_tools: Callable[[Callable[[CallRequest], Decision], str | None, int | None], ToolTurn]) -> bool:
        """The one way a question is answered, whether sent, regenerated or edited and resent:
        in tool rounds when the chat has tools switched on (read on the lane: a store read),
        else as a plain answer."""
        chats = self.engine.chats
        choice, rounds = self.tool_choice, self.tool_rounds

        def start() -> Turn | ToolTurn:
            if chats.chat_tools(conversation_id):
                # The turn is driven by ``advance`` (_tools_on_lane), which asks the bridge; the
                # blocking approver is asked only by ``run``, i.e. a turn stopped before it began.
                return with_tools(_refuse_in_place, choice, rounds)
            return plain()

        return self._start(conversation_id, start)

    def stop(self, conversation_id: int) -> bool:
        state = self.streams.get(conversation_id)
        if state is None:
            return False
        log.info("answer in conversation %d: stop asked (%s)", conversation_id, state.phase.value)
        state.control.cancel()  # the job ends within a step; its end arrives as usual
        self.approvals.cancel(conversation_id)  # a call waiting for the person is not run
        return True

    def stop_all(self) -> None:
        """Stop every answer, and have lane threads read what is left of each and save it:
        at shutdown the GUI thread waits for the lanes and reads no more events itself. A tool
        turn waiting for the person is denied and so resumed on a lane, stopped: it saves its
        calls and ends there."""
        for state in list(self.streams.values()):
            turn = state.control.cancel()
            if turn is None or isinstance(turn, ToolTurn) or state.phase not in (Phase.STARTING, Phase.POLLING):
                continue  # not attached yet (its lane thread ends it), or already ending
            state.phase = Phase.HANDED_OFF
            cid = state.conversation_id
            self.lane.run(turn.wait, functools.partial(self._on_finished, cid),
                          functools.partial(self._on_failed, cid))
        self.approvals.cancel()  # after the turns are stopped: a denied turn resumes only to end

    def is_streaming(self, conversation_id: int) -> bool:
        return conversation_id in self.streams

    def text_of(self, conversation_id: int) -> str:
        state = self.streams.get(conversation_id)
        if state is None:
            return ""
        self._collect(state)
        return state.text

    # -- plumbing ---------------------------------------------------------------------

    def _start(self, conversation_id: int, start: Callable[[], Turn | ToolTurn]) -> bool:
        if conversation_id in self.streams:
            return False  # one answer at a time per conversation
        cid = conversation_id
        control = AnswerControl()
        state = self.streams[cid] = StreamState(cid, control)
        self.streams_changed.emit()
        messages_of = self.engine.messages

        def begin() -> tuple[Turn | ToolTurn, list[Message]] | _Ended:
            """On the answers lane: commit the message and submit the job (both quick)."""
            turn = start()
            if control.attach(turn):
                return _Ended(turn.wait())  # stopped before it began: end and save it here
            return turn, messages_of(cid)

        self.lane.run(begin, functools.partial(self._begun, state), functools.partial(self._on_failed, cid))
        return True

    def _begun(self, state: StreamState, begun: tuple[Turn | ToolTurn, list[Message]] | _Ended) -> None:
        cid = state.conversation_id
        if isinstance(begun, _Ended):
            self._on_finished(cid, begun.message)
            return
        if self.streams.get(cid) is not state:
            return  # stop_all handed it to a lane thread, which has already saved it
        turn, messages = begun
        log.info("answer in conversation %d started (%s)", cid, "with tools" if isinstance(turn, ToolTurn) else
                 "local" if turn.pollable else "remote")
        self._on_started(cid, messages)
        if state.phase is not Phase.STARTING:
            return  # stop_all handed it to a lane thread meanwhile
        if isinstance(turn, ToolTurn):
            self._tools_on_lane(state, turn)
            return
        if not turn.pollable:
            self._stream_on_lane(state, turn)
            return
        state.phase = Phase.POLLING
        state.turn = turn
        turn.on_progress = functools.partial(self._on_progress, cid)
        turn.set_waker(self._wakeups.waker_for(state))
        self._read(state)  # events that came before the waker was set

    def _stream_on_lane(self, state: StreamState, turn: Turn) -> None:
        """A remote answer: its events come from the network, read on a lane thread."""
        cid = state.conversation_id
        chunk = self.lane.relay(functools.partial(self._on_chunk, cid))
        turn.on_progress = self.lane.relay(functools.partial(self._on_progress, cid))

        def stream() -> Message | None:
            for piece in turn:
                if piece.text:
                    chunk(piece.text)
            return turn.message

        state.phase = Phase.HANDED_OFF  # stop_all has nothing to hand off: it streams on the lane
        self.lane.run(stream, functools.partial(self._on_finished, cid), functools.partial(self._on_failed, cid))

    def _tools_on_lane(self, state: StreamState, turn: ToolTurn) -> None:
        """A turn with tools runs its rounds on a lane thread up to each call put to the person,
        and ends that lane job there: no thread waits for the decision, which resumes the turn
        on the lane (``_advance``). Its events come back to the GUI thread as queued calls."""
        turn.on_event = self.lane.relay(functools.partial(self._on_tool_event, state.conversation_id))
        state.phase = Phase.HANDED_OFF
        self._advance(state, turn, None)

    def _advance(self, state: StreamState, turn: ToolTurn, decision: Decision | None) -> None:
        """Queue the turn's next stretch on the lane (from any thread: ``Lane.run`` is safe)."""
        cid = state.conversation_id

        def stretch() -> CallRequest | None:
            request = turn.advance(decision)
            if request is not None:
                pending = self.approvals.ask(request, functools.partial(self._advance, state, turn))
                if turn.cancelled:  # Stop came between the turn's question and the bridge's keeping it
                    pending.answer(refusal())
            return request

        def done(request: CallRequest | None) -> None:
            if request is None:
                self._on_finished(cid, turn.message)

        self.lane.run(stretch, done, functools.partial(self._on_failed, cid))

    def _on_tool_event(self, conversation_id: int, event: ToolTurnEvent) -> None:
        state = self.streams.get(conversation_id)
        if isinstance(event, CallFinished):
            self.tool_call_done.emit(conversation_id, event.record)
        elif isinstance(event, RoundFinished) and event.stats.calls and state is not None:
            # The round's answer is saved; what the model writes next is a new answer.
            state.parts.clear()
            state.text, state.dirty = "", False
            self.tool_round_done.emit(conversation_id, event.message)
        elif hasattr(event, "text"):
            self._on_chunk(conversation_id, event.text)

    def _woken(self, states: list[StreamState]) -> None:
        for state in states:
            self._read(state)

    def _read(self, state: StreamState) -> None:
        """Read what arrived for one answer, without waiting; once it ended, save it on the lane."""
        turn, cid = state.turn, state.conversation_id
        if state.phase is not Phase.POLLING or turn is None:
            return  # a late wake-up: the answer is ending elsewhere
        try:
            chunks, ended = turn.poll()
        except Exception as exc:  # noqa: BLE001 — saved, then handed to _on_failed like any failure
            state.phase = Phase.SAVING
            self.lane.run(functools.partial(_save_then_raise, turn, exc), None,
                          functools.partial(self._on_failed, cid))
            return
        for piece in chunks:
            if piece.text:
                self._on_chunk(cid, piece.text)
        if ended:
            state.phase = Phase.SAVING
            self.lane.run(turn.save, functools.partial(self._on_finished, cid),
                          functools.partial(self._on_failed, cid))

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
        started = time.perf_counter()
        self._hand_over()
        cost_ms = (time.perf_counter() - started) * 1000
        self._flush_timer.setInterval(int(min(MAX_FLUSH_MS, max(FLUSH_MS, 2 * cost_ms))))

    def _hand_over(self) -> None:
        """Give the view what arrived since the last update (it renders as the signals land)."""
        for conversation_id, state in list(self.streams.items()):
            if state.progress is not None and not state.dirty:
                self.answer_progress.emit(conversation_id, state.progress)
            state.progress = None
            if state.dirty:
                state.dirty = False
                self._collect(state)
                self.answer_text.emit(conversation_id, state.text)

    def _on_finished(self, conversation_id: int, message: Message | None) -> None:
        # One line per answer in the log: a person's report of "it never answered" can then
        # be told apart from an answer that was saved but not shown.
        if message is None:
            log.info("answer in conversation %d ended with nothing to keep", conversation_id)
        else:
            log.info("answer in conversation %d saved: %s (%s), %s tokens, first after %s ms, %s tokens/s",
                     conversation_id, message.status, message.finish_reason, message.completion_tokens,
                     _rounded(message.ttft_ms), _rounded(message.tokens_per_s))
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


def _rounded(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"


def _refuse_in_place(request: CallRequest) -> Decision:
    """The approver of a window's tool turn run to its end in place (stopped before it began:
    it puts no call to anyone, so this is not asked in practice)."""
    log.debug("tool call %s refused: the answer was stopped", request.call_id)
    return refusal()


@dataclass(frozen=True)
class _Ended:
    """An answer stopped before it began, already saved on the lane."""

    message: Message | None


def _save_then_raise(turn: Turn, exc: Exception) -> None:
    """Keep what a failed answer had produced (as iterating a turn does), then report the
    failure itself."""
    if turn.error is not None:
        turn.save()
    raise exc

"""Tool calls waiting for the person's decision, with no thread waiting with them.

A tool turn stops at each call it must put to the person (``ToolTurn.advance`` returns it).
``ApprovalBridge.ask`` keeps that call as a ``Pending`` and tells the view (``asked``); the
person's answer, or Stop, settles it once and hands the decision to the turn's
``on_answer``, which resumes the turn on a lane. The bridge keeps the calls still waiting, so
a chat reopened later shows its block again and the sidebar can mark the chats that wait.

``ask`` may be called on a lane thread: ``asked`` and ``waiting_changed`` are signals, queued
to the GUI thread's slots.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from inglenook.engine import CallRequest, Decision

STOPPED = "the person stopped the answer"


class Pending:
    """One call waiting for the person: answered once, by its block or by Stop."""

    def __init__(self, request: CallRequest, on_answer: Callable[[Decision], None],
                 on_settled: Callable[[Pending], None]) -> None:
        self.request = request
        self.conversation_id = request.conversation_id
        self.decision: Decision | None = None
        self.draft = ""  # the arguments as the person edited them, kept when the block leaves the view
        self._on_answer = on_answer
        self._on_settled = on_settled
        self._lock = threading.Lock()

    @property
    def answered(self) -> bool:
        return self.decision is not None

    def answer(self, decision: Decision) -> None:
        """Settle the call (the first answer counts: a late Stop after Approve does nothing)."""
        with self._lock:
            if self.decision is not None:
                return
            self.decision = decision
        self._on_settled(self)
        self._on_answer(decision)


class ApprovalBridge(QObject):
    """The calls of every chat that wait for the person, and the signals the view reads."""

    asked = Signal(object, object)  # (CallRequest, Pending): show it, then call pending.answer
    waiting_changed = Signal(object)  # the set of conversation ids with a call waiting

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pending: list[Pending] = []
        self._lock = threading.Lock()

    def ask(self, request: CallRequest, on_answer: Callable[[Decision], None]) -> Pending:
        """Put ``request`` to the person; ``on_answer(decision)`` runs once it is decided (on
        the thread that decides: the GUI thread, or the caller of ``cancel``)."""
        pending = Pending(request, on_answer, self._settled)
        with self._lock:
            self._pending.append(pending)
        self.asked.emit(request, pending)
        self.waiting_changed.emit(self.waiting_conversations())
        return pending

    def waiting(self, conversation_id: int) -> list[Pending]:
        """The calls of one conversation still waiting for the person, oldest first."""
        with self._lock:
            return [p for p in self._pending if p.conversation_id == conversation_id and not p.answered]

    def waiting_conversations(self) -> set[int]:
        with self._lock:
            return {p.conversation_id for p in self._pending if not p.answered}

    def cancel(self, conversation_id: int | None = None) -> None:
        """Stop: the calls still waiting (in one conversation, or all) are denied."""
        with self._lock:
            waiting = [p for p in self._pending if conversation_id in (None, p.conversation_id)]
        for pending in waiting:
            pending.answer(refusal())

    def _settled(self, pending: Pending) -> None:
        with self._lock:
            if pending in self._pending:
                self._pending.remove(pending)
        self.waiting_changed.emit(self.waiting_conversations())


def refusal() -> Decision:
    """What Stop answers a call that waits."""
    return Decision(verdict="deny", reason=STOPPED)

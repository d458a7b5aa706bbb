"""The soak's window chats: a real MainWindow under offscreen Qt, driven by pytest-qt's QtBot.

The soak's main thread runs the window (Qt wants its widgets on the thread that made the
application). Each turn is what a person does: open a chat from the sidebar's list, type
into the composer and press Return, watch the answer stream in, and now and then press Esc
after its first words or pick the other model in the chat's picker. What the window showed
(the message sent, an answer with text) is recorded, so the soak can check at the end that
the database holds every one of them.
"""

from __future__ import annotations

import os
import random
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.exceptions import TimeoutError as WaitTimedOut
from pytestqt.qt_compat import qt_api
from pytestqt.qtbot import QtBot

if TYPE_CHECKING:
    from inglenook.app.window import MainWindow
    from inglenook.engine.core.engine import Engine
    from soak import Tally

# A busy two-core machine at idle priority answers slowly: waits are generous.
ANSWER_TIMEOUT_MS = 300_000
STOP_SHARE = 0.25  # answers stopped with Esc once their first words show
SWITCH_SHARE = 0.05  # turns whose chat is switched to the other model first


def qt_bot() -> QtBot:
    """pytest-qt's QtBot outside pytest: its key clicks and waits need no test request,
    only the one ini value it reads (whether waits raise on timeout by default) and the Qt
    binding, which its pytest plugin would choose at start."""
    if not hasattr(qt_api, "QtCore"):
        qt_api.set_qt_api("pyside6")
    request = SimpleNamespace(config=SimpleNamespace(getini=lambda _name: ""))
    return QtBot(request)  # type: ignore[arg-type]


def open_window(engine: Engine) -> tuple[QApplication, MainWindow, QtBot]:
    from inglenook.app.widgets import theme  # after QT_QPA_PLATFORM is set
    from inglenook.app.window import MainWindow

    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    theme.apply_theme(app, "light")
    window = MainWindow(engine, start_api=False)  # the soak runs its own API server
    window.show()
    bot = qt_bot()
    bot.waitUntil(lambda: bool(window.models), timeout=60_000)
    return app, window, bot


class WindowChats:
    """Chat turns typed into the window until ``deadline``; counts into the soak's tally."""

    def __init__(self, window: MainWindow, bot: QtBot, models: list[str], tally: Tally, rnd: random.Random,
                 prompts: list[str]) -> None:
        self.window, self.bot, self.models, self.tally, self.rnd = window, bot, models, tally, rnd
        self.prompts = prompts
        # An answer that fails shows as an error in the window: each one is a soak error too.
        window.chat.answer_failed.connect(lambda cid, exc: tally.error(f"window chat {cid}", exc))

    def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            conversation_id = self._open_new_chat()
            for _ in range(self.rnd.randint(2, 5)):
                if time.monotonic() >= deadline:
                    break
                try:
                    self._turn(conversation_id)
                except WaitTimedOut as exc:  # a wait ran out: say what the engine was doing, stop, go on
                    self.tally.error("window", f"{exc}; {self._what_runs(conversation_id)}")
                    self.window.active.stop()
                    try:
                        self.bot.waitUntil(lambda: not self.window.chat.is_streaming(conversation_id),
                                           timeout=ANSWER_TIMEOUT_MS)
                    except WaitTimedOut:
                        self.tally.error("window", f"the stopped answer did not end; {self._what_runs(conversation_id)}")
                    break  # on to a new chat

    def _open_new_chat(self) -> int:
        """A conversation with a short answer budget (as the GUI tests make), opened in the window."""
        engine = self.window.engine
        sampling = {"max_tokens": self.rnd.randint(4, 24)}
        conversation = engine.chats.new_conversation(model_id=self.models[0], sampling=sampling)
        self.tally.expected[conversation.id] = [0, 0]
        self.window.conversations.refresh()
        self.window.open_conversation(conversation.id)
        self.bot.waitUntil(lambda: self.window.conversation is not None
                           and self.window.conversation.id == conversation.id, timeout=60_000)
        return conversation.id

    def _turn(self, conversation_id: int) -> None:
        window, bot = self.window, self.bot
        if self.rnd.random() < SWITCH_SHARE:
            other = self.models[1] if window.conversation and window.conversation.model_id == self.models[0] \
                else self.models[0]
            window.active.choose_model(other)  # what picking it in the chat's model picker does
            bot.waitUntil(lambda: window.conversation is not None and window.conversation.model_id == other,
                          timeout=60_000)
            self.tally.count("window_model_switches")
        composer = window.composer.input
        composer.setFocus()
        bot.keyClicks(composer, self.rnd.choice(self.prompts))
        bot.keyClick(composer, Qt.Key.Key_Return)
        bot.waitUntil(lambda: composer.toPlainText() == "", timeout=60_000)  # sent: the message is committed
        self.tally.expected[conversation_id][0] += 1
        stop_early = self.rnd.random() < STOP_SHARE
        if stop_early:
            bot.waitUntil(lambda: bool(self._streaming_text()) or not window.chat.is_streaming(conversation_id),
                          timeout=ANSWER_TIMEOUT_MS)
            bot.keyClick(window, Qt.Key.Key_Escape)
        bot.waitUntil(lambda: not window.chat.is_streaming(conversation_id)
                      and window.view.streaming_widget() is None, timeout=ANSWER_TIMEOUT_MS)
        bot.wait(20)  # the finished answer's repaint
        shown = window.view.widgets[-1] if window.view.widgets else None
        if shown is not None and shown.role == "assistant" and shown.text:  # this turn's answer, with text
            self.tally.expected[conversation_id][1] += 1
        self.tally.count("window_turns_stopped" if stop_early else "window_turns")

    def _what_runs(self, conversation_id: int) -> str:
        """The window's and the scheduler's view of a turn that did not end in time."""
        window, scheduler = self.window, self.window.engine.scheduler
        widget = window.view.streaming_widget()
        running = [(r.handle.job.conversation_id, r.sequence.state, getattr(r.sequence, "leader", None) is not None,
                    r.handle.cancelled) for r in list(scheduler._running)]
        waiting = [(getattr(h.job, "conversation_id", None), h.cancelled) for h in list(scheduler._waiting)]
        return (f"conversation {conversation_id}: streaming={window.chat.is_streaming(conversation_id)}, "
                f"widget={'none' if widget is None else repr(widget.text[:40])}, current={window.current_id}; "
                f"running (conversation, state, has leader, cancelled)={running}; waiting={waiting}; "
                f"heartbeat={scheduler.heartbeat()}; loading={scheduler.loading_models()}")

    def _streaming_text(self) -> str:
        widget = self.window.view.streaming_widget()
        return widget.text if widget is not None else ""

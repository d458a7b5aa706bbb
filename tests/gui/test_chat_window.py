"""Chatting in the window: send, stream, stop, regenerate, edit, switch chats, reopen."""

from __future__ import annotations

import gc
import sys
import time

import pytest
from PySide6.QtCore import Qt, QTimer

from .conftest import ANSWER_TIMEOUT_MS, new_chat, type_and_send, wait_answer

pytestmark = [pytest.mark.gui, pytest.mark.integration]


def test_send_shows_the_answer_streaming_in(qtbot, window) -> None:
    # Long enough to span several of the view's 40 ms text flushes: at 140 tok/s (a quiet
    # AVX-512 machine) a 12-token answer could arrive whole in the first one.
    cid = new_chat(qtbot, window, max_tokens=48)
    seen: list[str] = []
    window.chat.answer_text.connect(lambda c, text: seen.append(text))
    type_and_send(qtbot, window, "Name three colours.")
    assert window.composer.input.toPlainText() == ""  # the input clears at once
    assert window.composer.stop_button.isVisible()
    wait_answer(qtbot, window, cid)

    stored = window.engine.store.messages(cid)
    assert [m.role for m in stored] == ["user", "assistant"]
    answer = stored[-1]
    assert answer.status == "complete" and answer.content
    # Streamed: the view got the answer in growing pieces, each a prefix of the next.
    assert len(seen) >= 2
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:]))
    widgets = window.view.widgets
    assert [w.role for w in widgets] == ["user", "assistant"]
    assert widgets[0].text == "Name three colours."
    assert widgets[1].text == answer.content
    assert widgets[1].message is not None and widgets[1].message.id == answer.id
    assert "tokens" in widgets[1].stats.text()
    assert widgets[1].regenerate_button.isVisibleTo(window)
    assert not window.composer.stop_button.isVisible()
    assert window.engine.background.wait_idle(5 * ANSWER_TIMEOUT_MS / 1000)
    # The first message names the chat at once; the background title replaces it as soon as
    # the machine is idle (or is refused, engine/chat/titles.py). Header and sidebar show
    # what is stored, whichever it is.
    title = window.engine.store.get_conversation(cid).title
    assert title
    qtbot.waitUntil(lambda: title in window.sidebar.titles() and window.title_label.text() == title)


def test_a_costly_update_spaces_out_the_next_so_the_window_stays_free(qtbot, window) -> None:
    """When showing the answer so far costs more than a flush's 40 ms (a long table laid out
    again), the next update waits twice that cost: the window keeps time for keys and
    paints. A slow view is stood in by a handler that takes 150 ms per update."""
    from inglenook.app.controllers.answers import FLUSH_MS

    cid = new_chat(qtbot, window, max_tokens=24)
    intervals: list[int] = []

    def slow_view(_cid: int, _text: str) -> None:
        time.sleep(0.15)
        intervals.append(window.chat._flush_timer.interval())  # set by the update before this one

    window.chat.answer_text.connect(slow_view)
    try:
        type_and_send(qtbot, window, "Count from one to twenty.")
        wait_answer(qtbot, window, cid)
    finally:
        window.chat.answer_text.disconnect(slow_view)
    assert intervals and intervals[0] == FLUSH_MS  # the first update waited the usual 40 ms
    assert window.chat._flush_timer.interval() >= 300  # after updates of 150 ms: twice that
    assert all(interval >= 300 for interval in intervals[1:])
    assert window.engine.store.messages(cid)[-1].status == "complete"


def test_signal_emits_keep_their_references_to_true() -> None:
    """PySide6 6.12 drops a reference to True on every Signal.emit() (pyproject excludes it):
    a long session aborts with "bool_dealloc" after a few thousand emits, one streamed answer.
    Counted on emits alone, not across a whole answer: the window and the engine hold and
    free Trues of their own (CI once saw 46 go during an answer with no emit bug at all)."""
    from PySide6.QtCore import QObject, Signal

    class Emitter(QObject):
        fired = Signal(bool)

    emitter = Emitter()
    received: list[bool] = []
    emitter.fired.connect(received.append)
    gc.collect()
    before = sys.getrefcount(True)
    for _ in range(10_000):
        emitter.fired.emit(True)
    received.clear()
    gc.collect()
    assert sys.getrefcount(True) >= before - 100  # the bug loses one per emit: 10,000


def test_stop_mid_answer_keeps_the_partial_answer(qtbot, window) -> None:
    cid = new_chat(qtbot, window, max_tokens=400)
    type_and_send(qtbot, window, "Write a long story about a dragon.")
    qtbot.waitUntil(lambda: bool(window.view.streaming_widget() and window.view.streaming_widget().text),
                    timeout=ANSWER_TIMEOUT_MS)
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    wait_answer(qtbot, window, cid)
    answer = window.engine.store.messages(cid)[-1]
    assert answer.role == "assistant"
    assert answer.status == "partial"
    assert answer.finish_reason == "cancelled"
    assert 0 < answer.completion_tokens < 400
    last = window.view.widgets[-1]
    assert last.text == answer.content
    assert last.note.isVisibleTo(window) and last.note.text() == "Stopped"


def test_regenerate_replaces_the_last_answer(qtbot, window) -> None:
    cid = new_chat(qtbot, window, max_tokens=8)
    type_and_send(qtbot, window, "Say hello.")
    wait_answer(qtbot, window, cid)
    first = window.engine.store.messages(cid)[-1]
    qtbot.mouseClick(window.view.widgets[-1].regenerate_button, Qt.MouseButton.LeftButton)
    assert window.chat.is_streaming(cid)
    wait_answer(qtbot, window, cid)
    stored = window.engine.store.messages(cid)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].created_at > first.created_at  # a new answer (SQLite may reuse the id)
    assert stored[-1].content == first.content  # greedy: the same answer again
    assert [w.role for w in window.view.widgets] == ["user", "assistant"]


def test_edit_a_message_and_resend(qtbot, window) -> None:
    cid = new_chat(qtbot, window, max_tokens=8)
    type_and_send(qtbot, window, "Say hello.")
    wait_answer(qtbot, window, cid)
    type_and_send(qtbot, window, "Say goodbye.")
    wait_answer(qtbot, window, cid)
    assert len(window.engine.store.messages(cid)) == 4

    first_user = window.view.widgets[0]
    qtbot.mouseClick(first_user.edit_button, Qt.MouseButton.LeftButton)
    assert first_user.editor.isVisibleTo(window)
    first_user.editor.setPlainText("What is the capital of France?")
    qtbot.mouseClick(first_user.resend_button, Qt.MouseButton.LeftButton)
    wait_answer(qtbot, window, cid)

    stored = window.engine.store.messages(cid)
    assert [(m.role, m.status) for m in stored] == [("user", "complete"), ("assistant", "complete")]
    assert stored[0].content == "What is the capital of France?"
    assert [w.text for w in window.view.widgets] == [m.content for m in stored]


def test_switching_chats_while_an_answer_streams(qtbot, window) -> None:
    store = window.engine.store
    other = window.engine.chats.new_conversation(title="Earlier chat")
    store.add_message(other.id, "user", "An older question")
    store.add_message(other.id, "assistant", "An older answer")
    cid = new_chat(qtbot, window, max_tokens=40)
    type_and_send(qtbot, window, "Count from one to twenty.")
    qtbot.waitUntil(lambda: bool(window.view.streaming_widget() and window.view.streaming_widget().text),
                    timeout=ANSWER_TIMEOUT_MS)

    window.open_conversation(other.id)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == other.id)
    assert [w.text for w in window.view.widgets] == ["An older question", "An older answer"]
    assert window.view.streaming_widget() is None
    assert not window.composer.stop_button.isVisible()
    qtbot.waitUntil(lambda: not window.chat.is_streaming(cid), timeout=ANSWER_TIMEOUT_MS)
    # The answer finished in the background without touching the chat on screen (the slot
    # that ends ``is_streaming`` is the one that shows an answer's end).
    assert [w.text for w in window.view.widgets] == ["An older question", "An older answer"]

    window.open_conversation(cid)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == cid)
    stored = store.messages(cid)
    assert stored[-1].role == "assistant" and stored[-1].status == "complete"
    assert [w.text for w in window.view.widgets] == [m.content for m in stored]


def test_close_and_reopen_finds_everything(qtbot, qapp, home, smollm2_path) -> None:
    from inglenook.engine import Engine
    from inglenook.app.window import MainWindow

    engine = Engine()
    first = MainWindow(engine, start_api=False)
    qtbot.addWidget(first)
    first.show()
    qtbot.waitUntil(lambda: bool(first.models), timeout=30_000)
    cid = new_chat(qtbot, first, max_tokens=8, system_prompt_note="kept")
    first.panel.system_prompt.setPlainText("You are terse.")
    type_and_send(qtbot, first, "Say hello.")
    wait_answer(qtbot, first, cid)
    shown = [w.text for w in first.view.widgets]
    first.close()
    engine.close()

    engine = Engine()  # the same INGLENOOK_HOME
    try:
        second = MainWindow(engine, start_api=False)
        qtbot.addWidget(second)
        second.show()
        qtbot.waitUntil(lambda: second.conversation is not None and second.conversation.id == cid, timeout=30_000)
        assert [w.text for w in second.view.widgets] == shown
        assert second.conversation.system_prompt == "You are terse."
        assert second.panel.system_prompt.toPlainText() == "You are terse."
        assert second.conversation.sampling["max_tokens"] == 8
        assert second.sidebar.ids() == [cid]
        second.close()
    finally:
        engine.close()


def test_event_loop_never_stalls_while_an_answer_streams(qtbot, window) -> None:
    """The worst gap between 10 ms timer ticks while an answer streams (benchmarks/gui_latency.py
    reports the real number; this bound is generous so a busy machine does not fail it)."""
    cid = new_chat(qtbot, window, max_tokens=24)
    gaps: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(tick)
    type_and_send(qtbot, window, "Explain what a compiler does.")
    timer.start()
    wait_answer(qtbot, window, cid)
    timer.stop()
    assert window.engine.store.messages(cid)[-1].completion_tokens > 1
    assert len(gaps) > 10
    assert max(gaps) < 1.0, f"the GUI froze for {max(gaps) * 1000:.0f} ms"


def test_api_answers_while_the_window_is_open(qtbot, qapp, engine) -> None:
    import socket

    import httpx

    from inglenook.app.window import MainWindow

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine.update_settings(api_port=port, api_enabled=True)
    win = MainWindow(engine)  # starts the API as `inglenook` does
    qtbot.addWidget(win)
    win.show()
    try:
        qtbot.waitUntil(lambda: win.server.state in ("running", "failed"), timeout=60_000)
        assert win.server.state == "running", win.server.error
        assert str(port) in win.status_line.api_status.text()
        base = win.server.url
        models = httpx.get(f"{base}/models", timeout=30).json()
        assert any(m["id"] == "smollm2-135m-instruct:q4_1" for m in models["data"])
        reply = httpx.post(
            f"{base}/chat/completions",
            json={"model": "smollm2-135m-instruct:q4_1", "max_tokens": 4, "temperature": 0,
                  "messages": [{"role": "user", "content": "Hi"}]},
            timeout=120,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"]
        # The toggle in the status bar stops it.
        qtbot.mouseClick(win.status_line.api_toggle, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: win.server.state == "stopped", timeout=30_000)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{base}/models", timeout=5)
    finally:
        win.shutdown()


def test_a_message_sent_while_its_chat_is_still_being_read_goes_to_that_chat(qtbot, window) -> None:
    # At start the latest chat opens by itself, read on the disk lane, and a person may type
    # before it is on screen. The message must land in that chat once it is, not in a new
    # chat made behind their back (the view then showed the old chat with the new answer).
    store = window.engine.store
    earlier = new_chat(qtbot, window, max_tokens=8)
    store.add_message(earlier, "user", "An older question")
    store.add_message(earlier, "assistant", "An older answer")
    window.new_chat()
    chats_before = len(window.engine.chats.conversations())
    window.open_conversation(earlier)
    assert window.conversation is None  # still being read: nothing has run the event loop yet
    window.send("Say hello.")
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == earlier)
    wait_answer(qtbot, window, earlier)
    stored = store.messages(earlier)
    assert [m.content for m in stored[:3]] == ["An older question", "An older answer", "Say hello."]
    assert stored[-1].role == "assistant" and stored[-1].status == "complete"
    assert len(window.engine.chats.conversations()) == chats_before
    assert [w.text for w in window.view.widgets] == [m.content for m in stored]


def test_a_message_waiting_for_a_chat_the_person_left_goes_back_into_the_box(qtbot, window) -> None:
    earlier = new_chat(qtbot, window, max_tokens=8)
    window.new_chat()
    window.open_conversation(earlier)
    window.send("Never mind.")
    window.new_chat()  # before the chat was read
    assert window.composer.input.toPlainText() == "Never mind."
    qtbot.wait(300)  # the read lands, and sends nothing
    assert window.engine.store.messages(earlier) == []

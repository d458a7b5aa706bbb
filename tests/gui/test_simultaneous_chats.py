"""More chats stream at once than the answers lane has threads: the window parks no thread
per answer, so the engine's sequences are the only limit.

The engine's step is held shut until every chat's prompt is admitted, which the old design
(a lane thread blocked in each answer for its whole length) could never reach with more
chats than threads; then every answer streams side by side. What is checked is the order of
the window's own signals, never how long anything took."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.held_steps import hold_steps

from .conftest import ANSWER_TIMEOUT_MS, type_and_send

pytestmark = [pytest.mark.gui, pytest.mark.integration]

CHATS = 6  # the answers lane has 4 threads
SEQUENCES = 8


@pytest.fixture
def engine(home, smollm2_path) -> Iterator[object]:  # overrides conftest's: more sequences
    from inglenook.engine import Engine

    engine = Engine(sequences=SEQUENCES)
    # A small context per sequence keeps eight of them light; no background titles, so the
    # sequences are the chats' alone.
    engine.update_settings(context_size=1024, background_titles=False)
    yield engine
    engine.close()


def test_six_chats_stream_at_once(qtbot, window, monkeypatch: pytest.MonkeyPatch) -> None:
    chat = window.chat
    assert window.workers.answers.threads < CHATS
    events: list[tuple[str, int]] = []  # ("admitted" | "text" | "finished", conversation id), in order
    chat.answer_progress.connect(lambda cid, _progress: events.append(("admitted", cid)))
    chat.answer_text.connect(lambda cid, _text: events.append(("text", cid)))
    chat.answer_finished.connect(lambda cid, _message: events.append(("finished", cid)))
    chat.answer_failed.connect(lambda cid, exc: events.append(("failed", cid)))

    gate = hold_steps(monkeypatch)
    try:
        ids: list[int] = []
        for n in range(CHATS):
            conversation = window.engine.chats.new_conversation(
                title=f"Chat {n}", sampling={"temperature": 0.0, "top_k": 1, "max_tokens": 48})
            window.conversations.refresh()
            window.open_conversation(conversation.id)
            qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == conversation.id)
            type_and_send(qtbot, window, f"Count from {n + 1} to {n + 30}.")
            ids.append(conversation.id)

        # Every prompt is admitted (its first progress reached the window) while no step has
        # run: six answers in flight at once, and the GUI thread kept delivering meanwhile.
        qtbot.waitUntil(lambda: {cid for kind, cid in events if kind == "admitted"} == set(ids),
                        timeout=ANSWER_TIMEOUT_MS)
        assert all(chat.is_streaming(cid) for cid in ids)
        assert not [e for e in events if e[0] != "admitted"]
        gate.set()
        qtbot.waitUntil(lambda: not any(chat.is_streaming(cid) for cid in ids), timeout=ANSWER_TIMEOUT_MS)
    finally:
        gate.set()

    assert not [e for e in events if e[0] == "failed"]
    # Side by side, not one after another: every answer showed text before any finished.
    first_finish = next(i for i, e in enumerate(events) if e[0] == "finished")
    assert {cid for kind, cid in events[:first_finish] if kind == "text"} == set(ids)
    assert sorted(cid for kind, cid in events if kind == "finished") == sorted(ids)
    for cid in ids:
        messages = window.engine.store.messages(cid)
        assert [m.role for m in messages] == ["user", "assistant"]
        assert messages[-1].status == "complete" and messages[-1].content

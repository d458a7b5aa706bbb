"""Search in the sidebar: Esc in the box clears it (Esc elsewhere is still Stop), leaving the
chats for a new chat or another page clears the filter, and "indexing…" shows while search
by meaning is still reading messages."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytestmark = pytest.mark.gui


def _chat(window, title: str, text: str) -> int:
    conversation = window.engine.chats.new_conversation(title=title)
    window.engine.store.add_message(conversation.id, "user", text)
    return conversation.id


def _search(qtbot, window, text: str, expected: list[int]) -> None:
    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(window.sidebar.search, text)
    qtbot.waitUntil(lambda: window.sidebar.ids() == expected)


def test_esc_in_the_search_box_clears_it_and_esc_elsewhere_stops(qtbot, window) -> None:
    apples = _chat(window, "Fruit", "Tell me about apples")
    trains = _chat(window, "Travel", "Fastest trains?")
    window.conversations.refresh()
    qtbot.waitUntil(lambda: window.sidebar.ids() == [trains, apples])
    _search(qtbot, window, "apples", [apples])

    stops: list[bool] = []
    window.active.stop = lambda: stops.append(True)  # what Esc would stop; nothing streams here
    qtbot.keyClick(window.sidebar.search, Qt.Key.Key_Escape)
    assert window.sidebar.search.text() == "" and not stops
    qtbot.waitUntil(lambda: window.sidebar.ids() == [trains, apples])

    window.composer.input.setFocus()
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Escape)
    assert stops == [True]


def test_a_new_chat_or_another_page_leaves_search(qtbot, window) -> None:
    apples = _chat(window, "Fruit", "Tell me about apples")
    trains = _chat(window, "Travel", "Fastest trains?")
    window.conversations.refresh()
    qtbot.waitUntil(lambda: window.sidebar.ids() == [trains, apples])
    _search(qtbot, window, "zebra", [])
    assert window.sidebar.section.text() == "NO MATCHES"
    window.new_chat()
    assert window.sidebar.search.text() == ""
    qtbot.waitUntil(lambda: window.sidebar.ids() == [trains, apples] and window.sidebar.section.text() == "RECENT")

    _search(qtbot, window, "apples", [apples])
    window.show_page("models")
    assert window.sidebar.search.text() == ""
    qtbot.waitUntil(lambda: window.sidebar.ids() == [trains, apples])


def test_the_list_says_indexing_while_meaning_search_is_not_ready(qtbot, window) -> None:
    conversations = window.engine.chats.conversations()
    window.sidebar.search.setText("apples")
    window.sidebar.set_conversations(conversations, None, set(), indexing=True)
    assert window.sidebar.section.text().endswith("INDEXING…")
    assert "more results may appear" in window.sidebar.section.toolTip()
    window.sidebar.set_conversations(conversations, None, set(), indexing=False)
    assert "INDEXING" not in window.sidebar.section.text()

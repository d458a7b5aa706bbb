"""Small things a person notices: the rename box shows whole letters, ages in the sidebar keep
up with the clock, the per-model context column shows its whole text, and Up in an empty
message box brings back the last question."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

pytestmark = pytest.mark.gui


def _chat(window, title: str, question: str) -> int:
    conversation = window.engine.chats.new_conversation(title=title)
    window.engine.store.add_message(conversation.id, "user", question)
    window.engine.store.add_message(conversation.id, "assistant", "An answer.")
    return conversation.id


def test_the_rename_box_is_tall_enough_for_its_text(qtbot, window) -> None:
    chat = _chat(window, "Holiday plans with the family", "Where should we go?")
    window.conversations.refresh()
    qtbot.waitUntil(lambda: window.sidebar.ids() == [chat])
    window.sidebar.begin_rename(chat)
    editor = window.sidebar.list.viewport().findChild(QLineEdit)
    assert editor is not None and editor.isVisible()
    assert editor.height() >= editor.sizeHint().height()  # the style's padding and the letters fit
    assert window.sidebar.list.viewport().rect().contains(editor.geometry())


def test_sidebar_ages_are_repainted_as_time_passes(window) -> None:
    timer = window.sidebar.ages_timer
    assert timer.isActive() and timer.interval() <= 60_000


def test_the_per_model_context_column_shows_its_whole_text(qtbot, window) -> None:
    from inglenook.app.pages.settings.model_names import ModelNamesPage

    page = ModelNamesPage(window.engine.settings, window.models)
    qtbot.addWidget(page)
    page.resize(620, 420)
    page.show()
    box = next(iter(page.context_boxes.values()))
    assert box.value() == 0 and box.text() == "Same as all models"
    qtbot.waitUntil(lambda: box.width() >= box.sizeHint().width())


def test_up_in_an_empty_message_box_recalls_the_last_question(qtbot, window) -> None:
    chat = _chat(window, "Colours", "Name three colours.")
    window.open_conversation(chat)
    qtbot.waitUntil(lambda: window.current_id == chat and len(window.view.widgets) == 2)
    box = window.composer.input
    box.setFocus()
    qtbot.keyClick(box, Qt.Key.Key_Up)
    assert window.composer.text() == "Name three colours."
    assert box.textCursor().atEnd()
    window.composer.set_text("Something else")
    qtbot.keyClick(box, Qt.Key.Key_Up)  # a box with text: Up moves the cursor, nothing is replaced
    assert window.composer.text() == "Something else"

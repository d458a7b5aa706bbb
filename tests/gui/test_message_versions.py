"""Versions and branches in the window, with the real SmolLM2: regenerating keeps the earlier
answer (‹ 1/2 ›), a cut-off answer continues in place, a branch opens as a new chat, and
one message can be deleted — each through the controls a person uses."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from .conftest import new_chat, type_and_send, wait_answer

pytestmark = pytest.mark.gui


def _menu_action(widget, text: str):
    return next(a for a in widget.more.menu().actions() if a.text() == text)


def test_regenerate_keeps_the_earlier_answer_as_a_version(qtbot, window) -> None:
    cid = new_chat(qtbot, window, max_tokens=8, temperature=1.0, seed=1)
    type_and_send(qtbot, window, "Name a colour.")
    wait_answer(qtbot, window, cid)
    first = window.engine.store.messages(cid)[-1]
    assert not window.view.widgets[-1].pager.isVisibleTo(window)  # one version: no pager

    qtbot.mouseClick(window.view.widgets[-1].regenerate_button, Qt.MouseButton.LeftButton)
    wait_answer(qtbot, window, cid)
    second = window.engine.store.messages(cid)[-1]
    assert second.id != first.id
    pager = window.view.widgets[-1].pager
    qtbot.waitUntil(lambda: pager.isVisibleTo(window) and pager.label.text() == "2/2")
    assert pager.next.isEnabled() is False and pager.previous.isEnabled()

    qtbot.mouseClick(pager.previous, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.view.widgets[-1].message is not None
                    and window.view.widgets[-1].message.id == first.id)
    assert window.view.widgets[-1].text == first.content
    assert window.view.widgets[-1].pager.label.text() == "1/2"
    assert [m.id for m in window.engine.store.messages(cid)] [-1] == first.id  # the choice is stored


def test_a_cut_off_answer_continues_in_place(qtbot, window) -> None:
    cid = new_chat(qtbot, window, max_tokens=8)
    type_and_send(qtbot, window, "Count from 1 to 40, separated by commas.")
    wait_answer(qtbot, window, cid)
    answer = window.view.widgets[-1]
    cut = answer.message
    assert cut is not None and cut.finish_reason == "length"
    continue_action = _menu_action(answer, "Continue")
    assert continue_action.isVisible()

    continue_action.trigger()
    assert window.chat.is_streaming(cid)
    wait_answer(qtbot, window, cid)
    widgets = window.view.widgets
    assert [w.role for w in widgets] == ["user", "assistant"]
    stored = window.engine.store.messages(cid)[-1]
    assert stored.id == cut.id and stored.content.startswith(cut.content) and len(stored.content) > len(cut.content)
    assert widgets[-1].text == stored.content


def test_branch_from_here_opens_a_new_chat_and_delete_removes_one_message(qtbot, window) -> None:
    cid = new_chat(qtbot, window, max_tokens=6)
    type_and_send(qtbot, window, "Say hi.")
    wait_answer(qtbot, window, cid)
    type_and_send(qtbot, window, "Say bye.")
    wait_answer(qtbot, window, cid)
    first_answer = window.view.widgets[1]

    _menu_action(first_answer, "Branch from here").trigger()
    qtbot.waitUntil(lambda: window.current_id not in (None, cid) and window.conversation is not None
                    and window.conversation.id == window.current_id)
    branch = window.current_id
    assert [w.role for w in window.view.widgets] == ["user", "assistant"]
    assert window.conversation.title.endswith("(branch)")
    qtbot.waitUntil(lambda: branch in window.sidebar.ids())
    assert len(window.engine.store.messages(cid)) == 4  # the source is untouched

    _menu_action(window.view.widgets[0], "Delete this message").trigger()
    qtbot.waitUntil(lambda: [w.role for w in window.view.widgets] == ["assistant"])
    assert [m.role for m in window.engine.store.messages(branch)] == ["assistant"]


def test_edit_text_opens_a_roomy_wrapping_editor_and_copy_says_copied(qtbot, window) -> None:
    from PySide6.QtWidgets import QPlainTextEdit

    from inglenook.app.pages.chat.message_widget import STARTING

    cid = new_chat(qtbot, window)
    store = window.engine.store
    store.add_message(cid, "user", "Hello")
    store.add_message(cid, "assistant", "An answer " * 80, completion_tokens=160, tokens_per_s=9.5)
    window.active.reload()
    qtbot.waitUntil(lambda: len(window.view.widgets) == 2)
    answer = window.view.widgets[1]
    answer.copy_button.click()
    assert answer.copy_button.text() == "Copied"
    qtbot.waitUntil(lambda: answer.copy_button.text() == "Copy", timeout=5000)

    answer.edit_text_requested.emit(answer.message.id)
    editor = window.history.editor
    qtbot.waitUntil(lambda: editor is not None and editor.isVisible())
    assert editor.width() >= 600 and editor.editor.lineWrapMode() == QPlainTextEdit.LineWrapMode.WidgetWidth
    editor.editor.setPlainText("A shorter answer.")
    editor.accept()
    qtbot.waitUntil(lambda: window.view.widgets and window.view.widgets[-1].text == "A shorter answer.")
    assert window.view.widgets[-1].stats.text() == ""  # the old figures went with the old text

    window.view.begin_answer("model")
    assert window.view.streaming_widget().typing.text() == STARTING and "Thinking" not in STARTING

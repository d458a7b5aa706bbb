"""A model without a chat template (gemma-3-270m base: its GGUF has none) is marked "base model
(no chat template)" in the picker and on the Models page, and a new chat with it says what will
happen before the first message; an instruct model (SmolLM2) is not marked."""

from __future__ import annotations

import pytest

from inglenook.app.text.formatting import BASE_MODEL
from inglenook.app.pages.chat.model_picker import BASE_ROLE, RECORD_ROLE

pytestmark = pytest.mark.gui


def test_a_base_model_is_marked_and_the_chat_says_what_will_happen(qtbot, window, gemma_path) -> None:
    engine = window.engine
    gemma = engine.registry.register_file(gemma_path)
    starter = engine.default_model_id()
    window.model_list.refresh()
    qtbot.waitUntil(lambda: window.model_list.base_models == {gemma.id}, timeout=30_000)

    # The Models page: a badge on gemma's row only.
    window.show_page("models")
    rows = {row.record.id: row for row in window.models_page.rows}
    assert rows[gemma.id].base_badge is not None and rows[gemma.id].base_badge.text() == BASE_MODEL
    assert rows[starter].base_badge is None

    # The picker's list marks it; choosing it says so on the button and in the new chat.
    window.new_chat()
    note = window.view.empty.model_note
    assert not note.isVisible()  # the starter model has a template
    window.picker.open_popup()
    marked = {window.picker.popup.list.item(i).data(RECORD_ROLE).id: bool(window.picker.popup.list.item(i).data(BASE_ROLE))
              for i in range(window.picker.popup.list.count())}
    assert marked == {gemma.id: True, starter: False}
    window.picker.popup.hide()
    window.picker._chosen(gemma.id)  # what clicking its row does
    assert "base model" in window.picker.text()
    assert note.isVisible() and "no chat template" in note.text() and "ChatML" in note.text()

    window.picker._chosen(starter)
    assert "base model" not in window.picker.text() and not note.isVisible()

"""The Usage page after a real chat in the window: its totals and per-client rows show the
answer's tokens, counted as the window's; a bad price is refused with its cell marked."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.gui.conftest import ANSWER_TIMEOUT_MS, new_chat, type_and_send, wait_answer

pytestmark = pytest.mark.gui


def _cells(table) -> list[list[str]]:
    return [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(table.rowCount())]


def test_the_usage_page_shows_a_real_chats_totals(qtbot, window) -> None:
    conversation_id = new_chat(qtbot, window, max_tokens=8)
    type_and_send(qtbot, window, "Say hello.")
    wait_answer(qtbot, window, conversation_id)
    answer = window.engine.store.messages(conversation_id)[-1]
    assert window.engine.background.wait_idle(ANSWER_TIMEOUT_MS / 1000)  # the new chat's title, written after
    assert window.engine.usage.flush()
    title = window.engine.store.get_conversation(conversation_id).title
    # The model was asked for a title (counted below, as background:title); a title sharing
    # no word with the question is refused and the question's first words stay
    # (engine/chat/titles.py), so what is kept may be either.
    assert title
    qtbot.waitUntil(lambda: window.sidebar.list.item(0).text() == title, timeout=10_000)

    page = window.usage_page
    with qtbot.waitSignal(page.refreshed, timeout=ANSWER_TIMEOUT_MS):
        qtbot.mouseClick(window.sidebar.nav_buttons["usage"], Qt.MouseButton.LeftButton)
    assert window.pages.currentWidget() is page
    by_client = page.summary.report.by_client()
    mine = by_client["window"]
    assert mine.requests == 1 and mine.completion_tokens == answer.completion_tokens
    assert mine.prompt_tokens == answer.prompt_tokens
    assert by_client["background:title"].requests == 1  # the title, on the smallest chat model
    total = page.summary.report.total()
    assert page.totals.text().startswith(f"{total.requests} generations")
    assert {row[0]: row[1] for row in _cells(page.client_table)}["window"] == "1"
    assert _cells(page.model_table)[0][0] == answer.model_id
    costs = {row[0]: row[1] for row in _cells(page.cost_table)}
    assert "This machine" in costs and len(costs) >= 3  # the default APIs, then the machine
    assert page.tokens_chart.peak == total.total_tokens


def test_a_negative_price_is_refused_with_its_cell_marked(qtbot, window) -> None:
    page = window.usage_page
    with qtbot.waitSignal(page.refreshed, timeout=60_000):
        window.show_page("usage")
    editor = page.editor
    saved_before = window.engine.settings.usage_prices
    editor.table.item(1, 3).setText("-2")  # the second API's output price
    assert not editor.save()
    assert editor.marked_cells() == [(1, 3)]
    assert "negative" in editor.problem.text()
    editor.table.item(1, 3).setText("12")
    editor.machine_fields["watts"].setText("lots")
    assert not editor.save() and "watts" in editor.problem.text()
    assert window.engine.settings.usage_prices == saved_before  # nothing was saved
    editor.machine_fields["watts"].setText("90")
    with qtbot.waitSignal(page.refreshed, timeout=60_000):
        assert editor.save()
    assert window.engine.settings.machine_watts == 90
    assert window.engine.settings.usage_prices[1]["output"] == 12

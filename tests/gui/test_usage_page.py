"""The Usage page after a real chat in the window: its totals and per-client rows show the
answer's tokens, counted as the window's; a bad price is refused with its cell marked."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.gui.conftest import ANSWER_TIMEOUT_MS, new_chat, type_and_send, wait_answer

pytestmark = pytest.mark.gui


def _cells(table) -> list[list[str]]:  # noqa: ANN001
    return [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(table.rowCount())]


def test_the_usage_page_shows_a_real_chats_totals(qtbot, window) -> None:  # noqa: ANN001
    conversation_id = new_chat(qtbot, window, max_tokens=8)
    type_and_send(qtbot, window, "Say hello.")
    wait_answer(qtbot, window, conversation_id)
    answer = window.engine.store.messages(conversation_id)[-1]
    assert window.engine.usage.flush()

    page = window.usage_page
    with qtbot.waitSignal(page.refreshed, timeout=ANSWER_TIMEOUT_MS):
        qtbot.mouseClick(window.sidebar.nav_buttons["usage"], Qt.MouseButton.LeftButton)
    assert window.pages.currentWidget() is page
    total = page.summary.report.total()
    assert total.requests == 1 and total.completion_tokens == answer.completion_tokens
    assert total.prompt_tokens == answer.prompt_tokens
    assert page.totals.text().startswith("1 generations")
    clients = _cells(page.client_table)
    assert clients[0][0] == "window" and clients[0][1] == "1"
    assert _cells(page.model_table)[0][0] == answer.model_id
    costs = {row[0]: row[1] for row in _cells(page.cost_table)}
    assert "This machine" in costs and len(costs) >= 3  # the default APIs, then the machine
    assert page.tokens_chart.peak == total.total_tokens


def test_a_negative_price_is_refused_with_its_cell_marked(qtbot, window) -> None:  # noqa: ANN001
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

"""Pieces of the pages on their own (no engine, no window): the reasoning fold, the versions
pager, the usage bars and the lab's table."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from inglenook.app.pages.chat.message_actions import MoreMenu, VersionPager
from inglenook.app.pages.chat.reasoning_view import ReasoningView
from inglenook.app.pages.lab.charts import make_chart
from inglenook.app.pages.lab.table import LabTableModel
from inglenook.app.pages.usage.chart import StackedBars, model_color
from inglenook.engine import LabResult

pytestmark = pytest.mark.gui


def test_reasoning_is_hidden_until_there_is_some_and_says_how_long_it_took(qtbot) -> None:
    view = ReasoningView()
    qtbot.addWidget(view)
    view.update("", done=False)
    assert view.isHidden()
    view.start()
    view.update("Let me think", done=False)
    assert not view.isHidden() and view.toggle.text().startswith("Thinking…")
    view.update("Let me think. Done.", done=True)
    assert view.toggle.text().startswith("Thought for ") and view.seconds is not None
    assert view.body.isHidden()
    view.toggle.click()  # unfold
    assert not view.body.isHidden() and view.toggle.text().endswith("▾")


def test_reasoning_without_a_clock_uses_the_estimate(qtbot) -> None:
    view = ReasoningView()
    qtbot.addWidget(view)
    view.update("thoughts", done=True, estimate_s=75.0)
    assert view.toggle.text().startswith("Thought for 1 min 15 s")


def test_the_versions_pager_steps_between_versions(qtbot) -> None:
    pager = VersionPager()
    qtbot.addWidget(pager)
    pager.set_versions([5], 5)
    assert pager.isHidden()  # one version: nothing to page
    pager.set_versions([5, 8, 9], 8)
    assert not pager.isHidden() and pager.label.text() == "2/3"
    with qtbot.waitSignal(pager.version_chosen) as blocker:
        pager.next.click()
    assert blocker.args == [9]
    pager.set_versions([5, 8, 9], 5)
    assert not pager.previous.isEnabled() and pager.next.isEnabled()


def test_the_more_menu_edits_and_branches_answers_only_and_continues_when_it_can(qtbot) -> None:
    answer, question = MoreMenu("assistant"), MoreMenu("user")
    qtbot.addWidget(answer)
    qtbot.addWidget(question)
    assert [a.text() for a in question.menu().actions() if a.text()] == ["Continue", "Delete this message"]
    assert "Branch from here" in [a.text() for a in answer.menu().actions()]
    assert not answer.continue_action.isVisible()
    answer.set_can_continue(True)
    assert answer.continue_action.isVisible()
    with qtbot.waitSignal(answer.branch_requested):
        next(a for a in answer.menu().actions() if a.text() == "Branch from here").trigger()


def test_stacked_bars_know_their_peak_and_colour_models_steadily(qtbot) -> None:
    bars = StackedBars("Tokens", lambda v: f"{v:.0f}")
    qtbot.addWidget(bars)
    assert bars.peak == 0.0
    bars.set_bars([("Mon", [("a", 3.0), ("b", 4.0)]), ("Tue", [("a", 10.0)])], ["a", "b"], title="Tokens per day")
    assert bars.peak == 10.0 and bars.title == "Tokens per day"
    assert model_color(["a", "b"], "b") == model_color(["a", "b"], "b") != model_color(["a", "b"], "a")
    bars.resize(400, 260)
    assert not bars.grab().isNull()  # paints without a model missing from the legend breaking it


def _result(model_id: str, quantization: str, size: int, decode: float | None) -> LabResult:
    return LabResult(model_id=model_id, path=f"/m/{model_id}.gguf", quantization=quantization, fingerprint="f",
                     size_bytes=size, bits_per_weight=4.5, decode_tps=decode)


def test_the_lab_table_sorts_by_size_and_replaces_a_remeasured_variant(qtbot) -> None:
    model = LabTableModel()
    model.set_results([_result("q4", "Q4_K_M", 100, 30.0), _result("q8", "Q8_0", 200, 20.0)], "q4")
    assert model.rowCount() == 2 and model.columnCount() == len(LabTableModel.COLUMNS)
    assert model.data(model.index(0, 0)).startswith("Q8_0")  # the largest first
    model.upsert(_result("q4", "Q4_K_M", 100, 35.5))
    assert model.rowCount() == 2
    decode = [key for _, key in LabTableModel.COLUMNS].index("decode_tps")
    assert model.data(model.index(1, decode), Qt.ItemDataRole.UserRole) == 35.5
    assert model.headerData(0, Qt.Orientation.Horizontal) == "Variant"


def test_a_lab_chart_has_its_titles(qapp) -> None:
    chart, x_axis, y_axis = make_chart("Quality", "Size (MB)", "KLD", dark=False)
    assert chart.title() == "Quality" and x_axis.titleText() == "Size (MB)" and y_axis.titleText() == "KLD"

"""The Quantization page, driven offscreen with real measurements."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from inglenook.app.pages.lab.page import LabPage
from inglenook.app.widgets.theme import apply_theme
from inglenook.engine.lab.lab import LabReport

from .conftest import SMALL, open_lab_engine

pytestmark = [pytest.mark.gui, pytest.mark.integration]



@pytest.fixture
def page(qtbot, qapp, measured: LabReport, measured_home: Path, variant_files: dict[str, Path]):
    apply_theme(qapp, "light")
    engine = open_lab_engine(measured_home, variant_files)
    widget = LabPage(engine, config=SMALL)
    qtbot.addWidget(widget)
    widget.resize(1280, 900)
    widget.show()
    with qtbot.waitSignal(widget.results_shown, timeout=30_000):
        pass
    qtbot.waitUntil(lambda: widget.table_model.rowCount() == 4, timeout=30_000)
    yield widget
    widget.shutdown()
    engine.close()


def _row_texts(widget: LabPage) -> list[str]:
    proxy = widget.proxy
    return [proxy.index(row, 0).data() for row in range(proxy.rowCount())]


def test_page_shows_saved_results_with_recommendation_and_charts(page: LabPage) -> None:
    assert page.group is not None and page.group.reference.quantization == "Q8_0"
    texts = _row_texts(page)
    assert {t.lstrip("★ ") for t in texts} == {"Q8_0", "Q4_1", "Q4_0", "Q2_K"}
    assert page.recommendation is not None
    assert sum(t.startswith("★") for t in texts) == 1
    assert page.recommendation_label.isVisible()
    assert page.recommendation_label.text().startswith("Recommended: ")
    # Four points and a trend line on each chart.
    assert len(page.quality_chart.series()) == 5 and len(page.speed_chart.series()) == 5
    # Installed variants are ticked; creatable ones are offered unticked.
    installed, create = page.checked()
    assert len(installed) == 4 and create == []
    assert page.variant_list.count() > 4


def test_table_sorts_by_numbers_not_text(page: LabPage) -> None:
    column = [c for c, (_, key) in enumerate(page.table_model.COLUMNS) if key == "kld_mean"][0]
    page.table.sortByColumn(column, Qt.SortOrder.AscendingOrder)
    ordered = [t.lstrip("★ ") for t in _row_texts(page)]
    assert ordered[0] == "Q8_0" and ordered[-1] == "Q2_K"


def test_run_measures_in_the_background_and_saves_a_screenshot(qtbot, page: LabPage) -> None:
    for i in range(page.variant_list.count()):
        item = page.variant_list.item(i)
        if item.data(Qt.ItemDataRole.UserRole) != "smollm2-135m-instruct:q4_0" and item.checkState() == Qt.CheckState.Checked:
            item.setCheckState(Qt.CheckState.Unchecked)
    assert page.checked() == (["smollm2-135m-instruct:q4_0"], [])
    progress_seen: list[int] = []
    page.progress.valueChanged.connect(progress_seen.append)
    with qtbot.waitSignal(page.run_finished, timeout=300_000) as finished:
        qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
        assert not page.run_button.isEnabled() and page.cancel_button.isEnabled()
    report = finished.args[0]
    assert report.error is None and not report.cancelled
    assert progress_seen and max(progress_seen) == 1000
    assert page.run_button.isEnabled() and not page.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: page.table_model.rowCount() == 4, timeout=30_000)
    # Screenshots for docs/ come from `make screenshots` only; a test never writes the tree.
    shot = page.grab()
    assert not shot.isNull() and shot.width() > 400


def test_cancel_stops_a_run(qtbot, page: LabPage) -> None:
    with qtbot.waitSignal(page.run_finished, timeout=300_000) as finished:
        qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
        qtbot.mouseClick(page.cancel_button, Qt.MouseButton.LeftButton)
    assert finished.args[0].cancelled
    assert page.run_button.isEnabled()

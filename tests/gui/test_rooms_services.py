"""The window's services and reusable widgets, each on its own (no engine, no window):
the operations helper, errors in words at startup, resources, and the small widgets."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QSize
from PySide6.QtWidgets import QLabel, QPushButton, QWidget

from inglenook.app.services.errors import DISMISS, RETRY, Explanation, explain
from inglenook.app.services.operations import Operations
from inglenook.app.services.resources import read_resource, resource_path
from inglenook.app.services.startup_error import startup_message
from inglenook.app.widgets.banner import Banner
from inglenook.app.widgets.elided import ElidedLabel
from inglenook.app.widgets.flow_layout import FlowLayout
from inglenook.app.widgets.icons import ICON_PROPERTY, set_icon
from inglenook.app.widgets.shortcuts import NEW_CHAT, SHEET, ShortcutsDialog, menu_text
from inglenook.engine import InglenookError, Paths

pytestmark = pytest.mark.gui
WAIT_MS = 5_000


@pytest.fixture
def operations(qapp):
    ops = Operations.of_its_own()
    yield ops
    ops.close()


# -- services/operations.py ------------------------------------------------------------------

def test_a_result_comes_back_on_the_gui_thread(qtbot, operations) -> None:
    seen: list[tuple[int, bool]] = []
    worker_threads: list[str] = []

    def work() -> int:
        worker_threads.append(threading.current_thread().name)
        return 42

    operations.run("disk", work, lambda value: seen.append((value, threading.current_thread() is threading.main_thread())))
    qtbot.waitUntil(lambda: bool(seen), timeout=WAIT_MS)
    assert seen == [(42, True)]
    assert worker_threads == ["inglenook-disk-0"]  # it ran on the disk lane, not the GUI thread


def test_a_failure_nobody_handles_goes_to_the_banner_explained(qtbot, operations) -> None:
    banner = Banner()
    qtbot.addWidget(banner)
    operations.failed.connect(banner.show_explanation)

    def fail() -> None:
        raise InglenookError("the disk said no")

    with qtbot.waitSignal(operations.failed, timeout=WAIT_MS) as blocker:
        operations.run("disk", fail, lambda _value: pytest.fail("no result for a failure"))
    explanation = blocker.args[0]
    assert isinstance(explanation, Explanation)
    assert explanation == explain(InglenookError("the disk said no"))
    assert banner.text.text() == "The disk said no" and RETRY in banner.action_ids()


def test_a_callers_own_handler_gets_the_explanation_and_the_banner_nothing(qtbot, operations) -> None:
    handled: list[Explanation] = []
    operations.failed.connect(lambda _e: pytest.fail("the banner must not hear of a handled failure"))
    operations.run("network", lambda: 1 / 0, None, handled.append)
    qtbot.waitUntil(lambda: bool(handled), timeout=WAIT_MS)
    assert handled[0].title == "Something unexpected went wrong"
    assert "ZeroDivisionError" in handled[0].detail  # the raw words stay in the detail, not the text
    assert "division" not in handled[0].text


def test_run_apart_holds_no_lane_and_explains_its_failure(qtbot, operations) -> None:
    release = threading.Event()
    done: list[str] = []
    failed: list[Explanation] = []
    operations.run_apart("slow", lambda: release.wait(WAIT_MS / 1000) and "signed in", done.append)
    # While it waits (a person in the browser), the network lane still runs other work at once.
    quick: list[int] = []
    operations.run("network", lambda: 7, quick.append)
    qtbot.waitUntil(lambda: quick == [7], timeout=WAIT_MS)
    assert done == []
    release.set()
    qtbot.waitUntil(lambda: done == ["signed in"], timeout=WAIT_MS)
    operations.run_apart("broken", lambda: (_ for _ in ()).throw(InglenookError("no token")), None, failed.append)
    qtbot.waitUntil(lambda: bool(failed), timeout=WAIT_MS)
    assert failed[0].text == "No token"


def test_run_typed_hands_the_exception_itself(qtbot, operations) -> None:
    caught: list[BaseException] = []
    operations.run_typed("downloads", lambda: (_ for _ in ()).throw(KeyError("k")), lambda _v: None, caught.append)
    qtbot.waitUntil(lambda: bool(caught), timeout=WAIT_MS)
    assert isinstance(caught[0], KeyError)


def test_report_explains_a_failure_met_on_the_gui_thread(qtbot, operations) -> None:
    with qtbot.waitSignal(operations.failed, timeout=WAIT_MS) as blocker:
        operations.report(InglenookError("not JSON"))
    assert blocker.args[0].text == "Not JSON"


# -- services/startup_error.py, services/resources.py -----------------------------------------

def test_the_startup_message_names_the_data_folder_and_the_detail(tmp_path: Path) -> None:
    paths = Paths.under(tmp_path)
    exc = InglenookError("database is locked")
    message = startup_message(explain(exc), exc, paths, None)
    assert str(paths.data) in message.body and message.body.endswith("Details: database is locked")


def test_resources_are_found_in_the_checkout() -> None:
    path = resource_path("inglenook.qss")
    assert path is not None and path.is_file() and path.parent.name == "resources"
    assert "QWidget" in read_resource("inglenook.qss")
    assert resource_path("no-such-file.qss") is None and read_resource("no-such-file.qss") == ""


# -- widgets -------------------------------------------------------------------------------

def test_the_banner_shows_an_explanation_and_says_which_button(qtbot) -> None:
    banner = Banner()
    qtbot.addWidget(banner)
    banner.show_explanation(Explanation("Title", "What happened.", [(RETRY, "Try again")], "raw detail"))
    assert banner.isVisibleTo(banner.parentWidget() or banner) and banner.toolTip() == "raw detail"
    assert banner.action_ids() == [RETRY, DISMISS]  # Dismiss is always offered
    retry = next(b for b in banner.findChildren(QPushButton) if b.property("action") == RETRY)
    with qtbot.waitSignal(banner.action) as blocker:
        retry.click()
    assert blocker.args == [RETRY] and banner.explanation is None and banner.isHidden()


def test_an_elided_label_keeps_its_whole_text_and_shortens_only_the_painting(qtbot) -> None:
    label = ElidedLabel("SmolLM2-135M-Instruct-GGUF, a long repository name")
    qtbot.addWidget(label)
    label.resize(60, 20)
    assert label.is_elided() and label.text().startswith("SmolLM2-135M")
    label.setText("short")
    assert label.toolTip() == "short"
    label.resize(400, 20)
    assert not label.is_elided()
    assert label.minimumSizeHint().width() <= label.fontMetrics().averageCharWidth() * 8 + 2


def test_a_flow_layout_wraps_onto_the_next_line(qtbot) -> None:
    host = QWidget()
    qtbot.addWidget(host)
    flow = FlowLayout(host, spacing=4)
    for i in range(6):
        chip = QLabel(f"chip {i}", host)
        chip.setFixedSize(QSize(50, 20))
        flow.addWidget(chip)
    assert flow.count() == 6
    assert flow.heightForWidth(400) < flow.heightForWidth(120)  # narrower: more lines
    flow.setGeometry(host.rect().adjusted(0, 0, 120 - host.width(), 0))
    tops = {flow.itemAt(i).geometry().top() for i in range(flow.count())}
    assert len(tops) > 1


def test_icons_are_themed_and_remembered_for_a_redraw(qtbot) -> None:
    button = QPushButton()
    qtbot.addWidget(button)
    set_icon(button, "settings", size=16)
    assert not button.icon().isNull() and button.property(ICON_PROPERTY) == "settings|muted|16"


def test_the_shortcut_sheet_lists_every_shortcut(qtbot) -> None:
    dialog = ShortcutsDialog()
    qtbot.addWidget(dialog)
    for _section, shortcuts in SHEET:
        for shortcut in shortcuts:
            assert shortcut.what.split(";")[0].replace("&", "&amp;") in dialog.body.text()
    assert menu_text("New chat", NEW_CHAT).startswith("New chat\t")

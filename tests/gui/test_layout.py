"""Every main screen at 800×560, 1280×800 and 1920×1080: nothing clipped, squeezed or overlapping.

The window is filled the way a person's would be (long titles, a long question, an answer with
a wide code block and a table), then each screen is laid out at each size and checked by
geometry (tests/gui/layout_check.py), never by pixels.
"""

from __future__ import annotations

import html
import math

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QFrame, QHBoxLayout, QPushButton, QWidget

from inglenook.app.widgets.markdown_view import RichText

from .layout_check import problems

pytestmark = pytest.mark.gui

SIZES = ((800, 560), (1280, 800), (1920, 1080))
SCREENS = ("chat", "chat with settings", "models installed", "models discover", "usage", "sidebar collapsed")

LONG_QUESTION = ("Could you explain, with as much detail as a careful reader would want, " * 6
                 + "supercalifragilisticexpialidocious-and-then-some-more-unbroken-text")
WIDE_ANSWER = ("Here is the function:\n\n```python\ndef pad():\n    return '" + "x" * 240 + "'\n```\n\n"
               "| Quant | Bits | Quality |\n|---|---|---|\n| Q8_0 | 8.5 | near lossless |\n| Q4_K_M | 4.8 | good |\n\n"
               + "A long closing paragraph that has to wrap inside the reading column. " * 8)


def _fill(window) -> int:
    store = window.engine.store
    for index in range(6):
        other = store.create_conversation(f"An older conversation with a long, long title, number {index}")
        store.add_message(other.id, "user", "hello")
        store.add_message(other.id, "assistant", "hi")
    chat = window.engine.chats.new_conversation(
        title="A conversation whose title is far too long to fit in the header of a narrow window")
    store.add_message(chat.id, "user", LONG_QUESTION)
    # An answer's figures as a real one has them: the longest line under a message.
    store.add_message(chat.id, "assistant", WIDE_ANSWER, model_id=window.engine.default_model_id(),
                      completion_tokens=1234, tokens_per_s=12.3, ttft_ms=17_700, prompt_tokens=5678, cached_tokens=4321)
    window.conversations.refresh()
    window.open_conversation(chat.id)
    return chat.id


def _show(qtbot, window, screen: str) -> None:
    window.sidebar.set_collapsed(screen == "sidebar collapsed")
    window.settings_toggle.setChecked(screen == "chat with settings")
    page = screen.split()[0] if screen != "sidebar collapsed" else "chat"
    window.show_page(page)
    if page == "models":
        # Discover without a search shows its empty state; HF_HUB_OFFLINE keeps it off the network.
        window.models_page.show_tab(window.models_page.DISCOVER if "discover" in screen else window.models_page.INSTALLED)


def _problems_once_settled(qtbot, window) -> list[str]:
    """What is still wrong once the layout has settled: message cards fit their text to the
    width in a few rounds of queued layout requests, so a first look can catch them midway."""
    try:
        qtbot.waitUntil(lambda: not problems(window), timeout=3000)
    except qtbot.TimeoutError:
        pass
    return [str(p) for p in problems(window)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_screen_fits(qtbot, window, size) -> None:
    chat_id = _fill(window)
    qtbot.waitUntil(lambda: window.current_id == chat_id and len(window.view.widgets) == 2)
    window.resize(*size)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == size)
    found: dict[str, list[str]] = {}
    for screen in SCREENS:
        _show(qtbot, window, screen)
        trouble = _problems_once_settled(qtbot, window)
        if trouble:
            found[screen] = trouble
    assert not found, "\n".join(f"{screen}:\n  " + "\n  ".join(lines) for screen, lines in found.items())


def test_narrow_window_floats_chat_settings_and_esc_closes_them(qtbot, window) -> None:
    window.resize(800, 560)
    qtbot.waitUntil(lambda: window.width() == 800)
    window.settings_toggle.setChecked(True)
    assert window.chat_page.overlay and window.panel.isVisible()
    assert window.view.width() > window.chat_page.width() - window.panel.width()  # the chat keeps its width
    window.panel.setFocus()
    qtbot.keyClick(window.panel, Qt.Key.Key_Escape)
    assert not window.panel.isVisible() and not window.settings_toggle.isChecked()

    window.resize(1920, 1080)
    qtbot.waitUntil(lambda: window.width() == 1920)
    window.settings_toggle.setChecked(True)
    assert not window.chat_page.overlay
    assert window.view.geometry().right() < window.panel.geometry().left()  # side by side


def test_sidebar_collapses_with_its_button_and_ctrl_b(qtbot, window) -> None:
    sidebar = window.sidebar
    wide = sidebar.width()
    sidebar.collapse_button.click()
    assert sidebar.collapsed and sidebar.width() < wide and not sidebar.list.isVisible()
    assert all(button.isVisible() for button in sidebar.nav_buttons.values())  # pages stay reachable
    sidebar.nav_buttons["models"].click()
    assert window.pages.currentWidget() is window.models_page
    window.activateWindow()
    qtbot.keyClick(window, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier)
    assert not sidebar.collapsed and sidebar.width() == wide and sidebar.list.isVisible()


def test_the_check_finds_clipping_squeezing_and_overlap(qtbot) -> None:
    """The layout check must be able to fail: a parent too small for its child, a button too
    narrow for its word, and two siblings placed on top of each other."""
    root = QFrame()
    qtbot.addWidget(root)
    root.resize(200, 100)
    row = QHBoxLayout(root)
    inner = QWidget(root)
    row.addWidget(inner)
    squeezed = QPushButton("A button with a long label", inner)
    squeezed.setGeometry(0, 0, 40, 30)
    clipped = QPushButton("Off", root)
    clipped.setGeometry(180, 10, 60, 30)
    on_top = QPushButton("On top", root)
    on_top.setGeometry(150, 20, 60, 30)
    root.show()
    kinds = {p.kind for p in problems(root)}
    assert {"clipped", "squeezed", "overlap"} <= kinds


@pytest.mark.parametrize("page", ["Quantization", "Models & context"])
def test_settings_pages_fit_their_dialog_without_scrolling_sideways(qtbot, window, page) -> None:
    from PySide6.QtWidgets import QScrollArea

    dialog = window.open_settings(page)
    qtbot.waitUntil(lambda: dialog.isVisible())
    # The lab lists its models on a worker; their names set the picker's width.
    qtbot.waitUntil(lambda: window.workers.wait(0), timeout=60_000)
    QApplication.processEvents()  # and deliver what the lanes posted back
    sideways = [area for area in dialog.findChildren(QScrollArea)
                if area.isVisible() and area.horizontalScrollBar().isVisible()]
    assert not sideways
    assert not _problems_once_settled(qtbot, dialog)
    dialog.reject()


def _past_the_viewport(window) -> list[str]:
    """Message widgets (and their bubbles and text) that reach past the conversation's viewport."""
    viewport = window.view.viewport()
    right = viewport.width()
    found = []
    for widget in window.view.widgets:
        parts = [widget, *([widget.bubble, widget.body_text] if widget.role == "user" else [widget.body])]
        parts += [widget.copy_button, widget.more]
        for part in parts:
            if not part.isVisible():
                found.append(f"{widget.role} {type(part).__name__} hidden")
                continue
            edge = part.mapTo(viewport, part.rect().topRight()).x()
            if edge > right:
                found.append(f"{widget.role} {type(part).__name__} ends at {edge}, the viewport at {right}")
        texts = [widget.body_text] if widget.role == "user" else widget.body.findChildren(RichText)
        for text in texts:
            if not text.isVisible() or not text.lineWrapMode() == RichText.LineWrapMode.WidgetWidth:
                continue  # code scrolls sideways in its own block
            lines = text.mapTo(viewport, text.rect().topLeft()).x() + math.ceil(text.document().size().width())
            if lines > right:
                found.append(f"{widget.role}'s text runs to {lines}, the viewport ends at {right}")
    return found


def test_a_filled_chat_holds_when_the_window_narrows(qtbot, window) -> None:
    """Opened wide, then narrowed with the chat list open: every message still wraps inside the
    viewport and keeps its Copy/Edit row — and again after switching chats."""
    window.resize(1280, 800)
    chat_id = _fill(window)
    qtbot.waitUntil(lambda: window.current_id == chat_id and len(window.view.widgets) == 2)
    qtbot.waitUntil(lambda: not _past_the_viewport(window), timeout=3000)  # laid out wide first
    window.resize(800, 560)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == (800, 560))
    assert not window.sidebar.collapsed
    try:
        qtbot.waitUntil(lambda: not _past_the_viewport(window), timeout=3000)
    except qtbot.TimeoutError:
        pass
    assert not _past_the_viewport(window)
    other = window.engine.chats.conversations()[-1].id
    window.open_conversation(other)
    qtbot.waitUntil(lambda: window.current_id == other and len(window.view.widgets) == 2)
    window.open_conversation(chat_id)
    qtbot.waitUntil(lambda: window.current_id == chat_id and len(window.view.widgets) == 2)
    try:
        qtbot.waitUntil(lambda: not _past_the_viewport(window), timeout=3000)
    except qtbot.TimeoutError:
        pass
    assert not _past_the_viewport(window)


def test_settings_open_within_a_narrow_window(qtbot, window) -> None:
    window.resize(800, 560)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == (800, 560))
    dialog = window.open_settings("General")
    qtbot.waitUntil(lambda: dialog.isVisible())
    assert dialog.width() <= window.width() and dialog.height() <= window.height()
    assert not _problems_once_settled(qtbot, dialog)
    dialog.reject()


def test_the_window_opens_where_it_was_and_first_within_the_screen(qtbot, window) -> None:
    from inglenook.app.window import MainWindow

    area = window.screen().availableGeometry()
    assert window.width() <= area.width() and window.height() <= area.height()
    assert window.minimumWidth() <= area.width() and window.minimumHeight() <= area.height()
    window.resize(800, 620)
    qtbot.waitUntil(lambda: (window.width(), window.height()) == (800, 620))
    window.shutdown()  # as closing it does: its size and place are kept
    assert window.engine.settings.window_geometry
    again = MainWindow(window.engine, start_api=False)
    qtbot.addWidget(again)
    try:
        assert (again.width(), again.height()) == (800, 620)
    finally:
        again.shutdown()


def test_a_sign_in_address_stays_inside_settings_tools(qtbot, window) -> None:
    """A long address in Settings → Tools' status line (a URL has no spaces to wrap at) is a
    short link: the page does not grow past its dialog and cut the line off."""
    from PySide6.QtWidgets import QScrollArea

    dialog = window.open_settings("Tools")
    qtbot.waitUntil(lambda: dialog.isVisible())
    page = dialog.tools_page
    url = "https://auth.example.com/authorize?client_id=" + "a" * 120 + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A5555"
    page._show_sign_in_url("guarded", url)
    qtbot.wait(50)
    sideways = [a for a in dialog.findChildren(QScrollArea) if a.isVisible() and a.horizontalScrollBar().isVisible()]
    assert not sideways and not _problems_once_settled(qtbot, dialog)
    assert html.escape(url, quote=True) in page.message.text()  # the link holds the whole address
    dialog.reject()

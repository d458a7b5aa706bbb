"""The first launch's welcome and the menus, on the real window (offscreen) with the starter model."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot, qapp, home, smollm2_path) -> Iterator[object]:
    from inglenook.app.window import MainWindow
    from inglenook.engine import Engine

    engine = Engine()
    win = MainWindow(engine, start_api=False)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.shutdown()
    engine.close()


def test_the_first_launch_welcomes_then_lands_in_a_new_chat_with_the_composer_focused(qtbot, window) -> None:
    from inglenook.app.desktop import maybe_welcome
    from inglenook.app.widgets.welcome import NETWORK_PROMISE

    dialog = maybe_welcome(window)
    assert dialog is not None and dialog.isVisible()
    text = dialog.body.text()
    assert "SmolLM2-135M-Instruct" in text and "is loading" in text  # "ready" only once it is loaded
    qtbot.waitUntil(lambda: bool(window.model_list.default_model), timeout=30_000)
    window.model_list.load(window.model_list.default_model)
    qtbot.waitUntil(lambda: "is ready" in dialog.body.text(), timeout=120_000)
    text = dialog.body.text()
    assert str(window.engine.paths.database) in text
    assert "http://127.0.0.1:8484/v1" in text and "Settings → API server" in text
    assert NETWORK_PROMISE in text
    dialog.start_button.click()
    qtbot.waitUntil(lambda: window.engine.settings.welcome_shown, timeout=10_000)
    assert window.conversation is None and window.title_label.text() == "New chat"
    qtbot.waitUntil(lambda: window.composer.input.hasFocus(), timeout=5_000)
    assert maybe_welcome(window) is None  # once only


def test_the_welcome_says_when_the_api_is_off(window) -> None:
    from inglenook.app.desktop import welcome_facts
    from inglenook.app.widgets.welcome import welcome_html

    window.engine.settings = window.engine.settings.save(window.engine.store, api_enabled=False)
    assert "API is off" in welcome_html(welcome_facts(window))


def test_help_menu_and_desktop_settings(qtbot, window, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    menus = window.menus
    titles = [action.text() for action in window.menuBar().actions()]
    assert titles == ["&Inglenook", "&Help"]
    help_items = [a.text() for a in window.menuBar().actions()[1].menu().actions()]
    assert help_items == ["Keyboard shortcuts", "About Inglenook", "Open logs folder", "Open data folder"]
    app_items = [a.text() for a in window.menuBar().actions()[0].menu().actions() if a.text()]
    assert app_items[:5] == ["New chat\tCtrl+N", "Search chats\tCtrl+F", "Hide or show the chat list\tCtrl+B",
                             "Copy the last answer\tCtrl+Shift+C", "Settings…\tCtrl+,"]  # each with its shortcut
    sheet = menus.show_shortcuts()
    assert sheet.isVisible() and "Ctrl+B" in sheet.body.text() and "the last question again" in sheet.body.text()
    sheet.close()
    menus.about_action.trigger()
    assert window.settings_dialog is not None and window.settings_dialog.isVisible()
    window.settings_dialog.close()
    assert menus.tray_action.isChecked()  # close_to_tray is on by default
    menus.tray_action.trigger()
    qtbot.waitUntil(lambda: window.engine.settings.close_to_tray is False, timeout=10_000)
    menus.login_action.trigger()
    qtbot.waitUntil(lambda: window.engine.settings.start_at_login is True, timeout=10_000)
    assert (tmp_path / "config" / "autostart" / "inglenook.desktop").is_file()
    menus.login_action.trigger()
    qtbot.waitUntil(lambda: window.engine.settings.start_at_login is False, timeout=10_000)
    assert not (tmp_path / "config" / "autostart" / "inglenook.desktop").exists()


def test_without_a_tray_closing_the_window_quits(qtbot, window) -> None:
    """Offscreen (like Xvfb or a desktop with no tray) there is nowhere to hide: close quits."""
    from inglenook.app.desktop import install_tray

    tray = install_tray(window)
    assert not tray.should_hide_on_close()
    window.close()
    assert window.closed  # shutdown ran: the window really closed


def test_the_default_model_starts_loading_as_the_window_opens_whichever_list_arrives_first(
        qtbot, window) -> None:
    from inglenook.app.desktop import preload_default_model

    preload_default_model(window)
    # The remote engines' list (none here) lands before the installed models are read, as it
    # did on a fast machine: the preload must wait for the local list, not give up.
    window.model_list._remote_read([])
    scheduler = window.engine.scheduler
    qtbot.waitUntil(lambda: any(m.record.id.startswith("smollm2") for m in scheduler.loaded_models()),
                    timeout=60_000)
    assert window.engine.chats.conversations() == []  # loaded, nothing asked

"""What run_app adds around the window on a desktop: the tray, the welcome, a later launch.

Kept out of window.py so that tests and scripts which build a ``MainWindow`` directly get the
plain window: no tray icon, no first-run dialog.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtGui import QIcon

from inglenook.engine import find_starter_model

from inglenook.app.services.resources import resource_path
from inglenook.app.services.tray import TrayController
from inglenook.app.widgets.welcome import FAILED, LOADING, READY, WelcomeDialog, WelcomeFacts
from inglenook.app.window import MainWindow

log = logging.getLogger(__name__)


def bring_forward(window: MainWindow, models: list[Path]) -> None:
    """A second launch asked for the window (and maybe to import ``.gguf`` files)."""
    tray = getattr(window, "tray", None)
    if isinstance(tray, TrayController):
        tray.show_window()
    else:
        window.showNormal()
        window.raise_()
        window.activateWindow()
    if models:
        window.import_dropped(models)


def install_tray(window: MainWindow) -> TrayController:
    """The tray icon, and closing the window while the API serves means hiding it there."""
    icon_file = resource_path("inglenook.svg")
    icon = QIcon(str(icon_file)) if icon_file is not None else window.windowIcon()
    settings = window.engine

    tray = TrayController(window, window.server, close_to_tray=lambda: settings.settings.close_to_tray,
                          quit_app=window.quit_app, icon=icon)

    def hide_instead() -> bool:
        if not tray.should_hide_on_close():
            return False
        tray.hide_to_tray()
        return True

    window.close_guard = hide_instead
    window.tray = tray  # type: ignore[attr-defined]  # bring_forward finds it here
    return tray


def preload_default_model(window: MainWindow) -> None:
    """Start loading the default model as the window opens, once the model list is read: by
    the time the welcome is read and a first question typed, the model is resident (a load
    allocates the KV cache of every parallel answer: seconds on a busy machine). The
    scheduler unloads it again after ``idle_unload_s`` if nobody asks anything."""
    model_list = window.model_list

    def load() -> None:
        if model_list.default_model and not window.hub.loaded:
            log.info("loading %s in the background for the first question", model_list.default_model)
            model_list.load(model_list.default_model)

    def listed() -> None:
        # The local read, not any change: the remote engines' list (empty, quick) often
        # arrives first, before the default model is known.
        model_list.local_read.disconnect(listed)
        load()

    if model_list.local_loaded:  # read already (events ran since the window opened)
        load()
    else:
        model_list.local_read.connect(listed)


def welcome_facts(window: MainWindow) -> WelcomeFacts:
    engine = window.engine
    # The file, not the model list: the list is still being read on a worker at this point.
    starter = find_starter_model()
    settings = engine.settings
    return WelcomeFacts(
        starter_model=starter.stem.replace(".", " (", 1) + ")" if starter is not None else None,
        database=engine.paths.database,
        api_url=f"http://{settings.api_host}:{settings.api_port}/v1" if settings.api_enabled else None,
    )


def maybe_welcome(window: MainWindow) -> WelcomeDialog | None:
    """On the first launch: the welcome, then a new chat with the composer focused."""
    if window.engine.settings.welcome_shown:
        window.composer.input.setFocus()
        return None
    dialog = WelcomeDialog(welcome_facts(window), window)
    hub = window.hub

    def model_state(*_args: object) -> None:
        if hub.loaded:
            dialog.set_model_state(READY)
        elif hub.loading:
            dialog.set_model_state(LOADING, hub.progress)
        elif hub.failed:
            dialog.set_model_state(FAILED)

    model_state()
    hub.changed.connect(model_state)

    def done(_result: int) -> None:
        hub.changed.disconnect(model_state)
        window.saver.apply({"welcome_shown": True})
        window.new_chat()
        window.activateWindow()
        window.composer.input.setFocus()

    dialog.finished.connect(done)
    dialog.open()
    window.welcome = dialog  # type: ignore[attr-defined]  # tests and the timing script find it
    return dialog

"""The window's menu bar: the Inglenook menu (desktop behaviours) and Help.

Inglenook: New chat, the window's other shortcuts (search, chat list, copy), Settings…, Keep
running in the tray when closed, Start at login, Quit; each item shows its shortcut.
Help: Keyboard shortcuts (the whole list), About Inglenook (Settings → About: versions and the
doctor report), Open logs folder, Open data folder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenuBar

from inglenook.app.services import autostart

from inglenook.app.widgets import shortcuts
from inglenook.app.widgets.shortcuts import Shortcut, ShortcutsDialog, menu_text

log = logging.getLogger(__name__)


class AppMenus:
    """Builds the menus on ``window`` and keeps the two checkable settings in step."""

    def __init__(self, window: QMainWindow, *, settings: Callable[[], Any], save: Callable[[dict[str, Any]], None],
                 folders: dict[str, Path], new_chat: Callable[[], None], open_settings: Callable[[str], object],
                 quit_app: Callable[[], None], notice: Callable[[str], None],
                 more: Sequence[tuple[Shortcut, Callable[[], None]]] = ()) -> None:
        self.window = window
        self.settings = settings
        self.save = save
        self.folders = folders
        self.notice = notice
        bar: QMenuBar = window.menuBar()
        app_menu = bar.addMenu("&Inglenook")
        self._add(app_menu, menu_text("New chat", shortcuts.NEW_CHAT), new_chat)
        for shortcut, slot in more:
            self._add(app_menu, menu_text(shortcut.what, shortcut), slot)
        self._add(app_menu, menu_text("Settings…", shortcuts.SETTINGS), lambda: open_settings("General"))
        app_menu.addSeparator()
        self.tray_action = self._add(app_menu, "Keep running in the tray when closed", self._toggle_tray)
        self.tray_action.setCheckable(True)
        self.login_action = self._add(app_menu, "Start at login", self._toggle_login)
        self.login_action.setCheckable(True)
        app_menu.addSeparator()
        quit_action = self._add(app_menu, "Quit", quit_app)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        help_menu = bar.addMenu("&Help")
        self.shortcuts_action = self._add(help_menu, "Keyboard shortcuts", self.show_shortcuts)
        self.shortcuts_dialog: ShortcutsDialog | None = None
        self.about_action = self._add(help_menu, "About Inglenook", lambda: open_settings("About"))
        self._add(help_menu, "Open logs folder", lambda: self.open_folder("logs"))
        self._add(help_menu, "Open data folder", lambda: self.open_folder("data"))
        self.refresh()

    def _add(self, menu: Any, text: str, slot: Callable[[], object]) -> QAction:
        action = QAction(text, self.window)
        action.triggered.connect(lambda _checked=False: slot())
        menu.addAction(action)
        return action

    def refresh(self, saved: dict[str, Any] | None = None) -> None:
        """Show the settings; after a save, only the fields that save wrote (with the values
        it wrote: saves land in order, while the live settings may already be a later one's)."""
        values = saved if saved is not None else vars(self.settings())
        for key, action in (("close_to_tray", self.tray_action), ("start_at_login", self.login_action)):
            if key in values:
                action.setChecked(bool(values[key]))

    def show_shortcuts(self) -> ShortcutsDialog:
        if self.shortcuts_dialog is None:
            self.shortcuts_dialog = ShortcutsDialog(self.window)
        self.shortcuts_dialog.show()
        self.shortcuts_dialog.raise_()
        return self.shortcuts_dialog

    def open_folder(self, key: str) -> bool:
        folder = self.folders[key]
        folder.mkdir(parents=True, exist_ok=True)
        opened = QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))
        if not opened:
            # No file manager (a bare desktop): say where it is instead.
            self.notice(f"The {key} folder is {folder}")
        return opened

    def _toggle_tray(self) -> None:
        self.save({"close_to_tray": self.tray_action.isChecked()})

    def _toggle_login(self) -> None:
        wanted = self.login_action.isChecked()
        try:
            autostart.set_start_at_login(wanted)
        except OSError as exc:
            log.warning("could not change start at login: %s", exc)
            self.login_action.setChecked(not wanted)
            self.notice(f"Could not change start at login: {exc.strerror or exc}")
            return
        self.save({"start_at_login": wanted})

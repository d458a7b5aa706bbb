"""The system tray: where Inglenook keeps serving the API after its window is closed.

Closing the window while the API server runs hides it instead of quitting, when the
``close_to_tray`` setting is on and the desktop has a tray; the tray's menu says whether the
API is on and offers Open, Stop (or Start) API and Quit. Without a tray (many minimal
desktops, Xvfb) or with the setting off, closing quits as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction, QIcon
from PySide6.QtWidgets import QApplication, QMainWindow, QMenu, QSystemTrayIcon

from inglenook.app.services.server_control import ServerController

log = logging.getLogger(__name__)


class TrayController(QObject):
    """Owns the tray icon and decides what closing the window means."""

    def __init__(self, window: QMainWindow, server: ServerController, close_to_tray: Callable[[], bool],
                 quit_app: Callable[[], None], icon: QIcon) -> None:
        super().__init__(window)
        self.window = window
        self.server = server
        self.close_to_tray = close_to_tray
        self.quit_app = quit_app
        self.told_once = False
        self.tray = QSystemTrayIcon(icon, self)
        self.tray.setToolTip("Inglenook")
        menu = QMenu()
        self.status_action = QAction("API off", menu)
        self.status_action.setEnabled(False)
        self.open_action = QAction("Open Inglenook", menu)
        self.open_action.triggered.connect(self.show_window)
        self.api_action = QAction("Stop API", menu)
        self.api_action.triggered.connect(self._toggle_api)
        self.quit_action = QAction("Quit", menu)
        self.quit_action.triggered.connect(self.quit_app)
        for action in (self.status_action, self.open_action, self.api_action):
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        self.menu = menu  # QSystemTrayIcon does not take ownership of its menu
        self.tray.setContextMenu(menu)
        self.tray.activated.connect(self._activated)
        server.state_changed.connect(self._api_state)
        self._api_state(server.state, server.url, None)
        # The desktop's tray can come up after Inglenook (started at login before the panel,
        # or a tray host started late): until it does, look again every few seconds.
        self._tray_watch = QTimer(self)
        self._tray_watch.setInterval(2000)
        self._tray_watch.timeout.connect(self._show_when_available)
        self._show_when_available()
        if not self.tray.isVisible():
            self._tray_watch.start()

    def _show_when_available(self) -> None:
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.tray.show()
            self._tray_watch.stop()

    @staticmethod
    def available() -> bool:
        return QSystemTrayIcon.isSystemTrayAvailable()

    def should_hide_on_close(self) -> bool:
        """Closing the window hides it only when the API serves and the tray can bring it back."""
        self._show_when_available()  # a tray that appeared since the last look counts now
        return self.close_to_tray() and self.server.running and self.available() and self.tray.isVisible()

    def hide_to_tray(self) -> None:
        # While hidden, a dialog closing is not "the last window": the app must keep running.
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.setQuitOnLastWindowClosed(False)
        self.window.hide()
        if not self.told_once:
            self.told_once = True
            self.tray.showMessage("Inglenook is still running",
                                  f"The API keeps serving at {self.server.url}. Quit from this icon's menu; "
                                  "turn this off in the Inglenook menu.", QSystemTrayIcon.MessageIcon.Information, 6000)

    def show_window(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.setQuitOnLastWindowClosed(True)
        window = self.window
        window.showNormal()
        window.raise_()
        window.activateWindow()

    def hide_icon(self) -> None:
        self.tray.hide()

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.show_window()

    def _toggle_api(self) -> None:
        if self.server.running:
            self.server.stop()
        else:
            self.server.start()

    def _api_state(self, state: str, url: str, _error: object) -> None:
        text = {"running": f"API on: {url}", "starting": "API starting…", "failed": "API failed to start"}
        self.status_action.setText(text.get(state, "API off"))
        self.api_action.setText("Stop API" if state in ("running", "starting") else "Start API")
        self.tray.setToolTip(f"Inglenook — {text.get(state, 'API off')}")

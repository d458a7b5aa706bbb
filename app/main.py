"""Starting the desktop app: ``inglenook`` with no arguments lands here."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Sequence

from PySide6.QtCore import QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from inglenook.engine import CrashGuard, InglenookError, Paths

from . import theme
from .resources import resource_path

log = logging.getLogger(__name__)


def run_app(argv: Sequence[str] | None = None) -> int:
    app = QApplication.instance() or QApplication(list(argv if argv is not None else sys.argv))
    app.setApplicationName("Inglenook")
    app.setDesktopFileName("inglenook")
    icon = resource_path("inglenook.svg")
    if icon is not None:
        app.setWindowIcon(QIcon(str(icon)))
    guard: CrashGuard | None = None
    try:
        from inglenook import __version__  # noqa: PLC0415
        from inglenook.cli import setup_logging  # noqa: PLC0415
        from inglenook.engine import Engine  # noqa: PLC0415

        paths = Paths.default().ensure()
        setup_logging(paths)
        guard = CrashGuard(paths.logs, "app", __version__)
        last_crashes = guard.start()
        engine = Engine(paths, crash_guard=guard, full_check=True)
    except InglenookError as exc:
        if guard is not None:
            guard.stop()
        theme.apply_theme(app, "system")
        # The one mapping of errors to words (a full or locked disk reads as such, not as a bug).
        from .errors import explain  # noqa: PLC0415

        explanation = explain(exc)
        QMessageBox.critical(None, "Inglenook cannot start", f"{explanation.title}\n\n{explanation.text}\n\n{exc}")
        return 1
    theme.apply_theme(app, engine.settings.theme)
    from .window import MainWindow  # noqa: PLC0415

    window = MainWindow(engine)
    if last_crashes:
        window.report_last_crash(last_crashes[-1])
    # "Follow the system": restyle when the desktop switches between light and dark.
    app.styleHints().colorSchemeChanged.connect(
        lambda _scheme: window.apply_theme() if engine.settings.theme == "system" else None
    )
    window.show()
    _quit_on_sigterm(app)
    try:
        return app.exec()
    finally:
        window.shutdown()
        engine.close()
        guard.stop()


def _quit_on_sigterm(app: QApplication) -> None:
    """SIGTERM (a logout, ``kill``) closes the app as the window's Quit does: answers stop,
    the engine shuts down, and the next start does not report a crash. Python runs signal
    handlers only between bytecodes, so a timer gives it a moment every half second."""
    signal.signal(signal.SIGTERM, lambda *_: app.quit())
    ticker = QTimer(app)
    ticker.timeout.connect(lambda: None)
    ticker.start(500)

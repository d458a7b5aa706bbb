"""Starting the desktop app: ``inglenook`` with no arguments lands here."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from inglenook.engine import CrashGuard, InglenookError, Paths

from . import theme
from .desktop import bring_forward, install_tray, maybe_welcome, preload_default_model
from .qt_platform import check_platform_libraries
from .resources import resource_path
from .single_instance import Handoff, InstanceServer, hand_over, server_name

log = logging.getLogger(__name__)


def run_app(argv: Sequence[str] | None = None) -> int:
    arguments = list(argv if argv is not None else sys.argv)
    problem = check_platform_libraries()
    if problem is not None:
        # Qt would print its plugin error and abort with a core dump; say what to install.
        print(problem, file=sys.stderr)  # noqa: T201 — no window can show it
        return 1
    app = QApplication.instance() or QApplication(arguments)
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
        opened = model_arguments(arguments)
        instance = _claim_instance(paths, opened)
        if isinstance(instance, int):
            return instance  # another Inglenook has this profile
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
    instance.setParent(window)
    instance.opened.connect(lambda sent: bring_forward(window, [Path(p) for p in sent]))
    tray = install_tray(window)
    preload_default_model(window)
    if last_crashes:
        window.report_last_crash(last_crashes[-1])
    # "Follow the system": restyle when the desktop switches between light and dark.
    app.styleHints().colorSchemeChanged.connect(
        lambda _scheme: window.apply_theme() if engine.settings.theme == "system" else None
    )
    window.show()
    if opened:
        window.import_dropped(opened)
    maybe_welcome(window)
    _quit_on_sigterm(app)
    try:
        return app.exec()
    finally:
        tray.hide_icon()
        instance.close()
        window.shutdown()
        engine.close()
        guard.stop()


def model_arguments(argv: Sequence[str]) -> list[Path]:
    """The ``.gguf`` files given on the command line (a double-click, "Open with")."""
    return [Path(arg).absolute() for arg in argv[1:] if arg.lower().endswith(".gguf")]


def _claim_instance(paths: Paths, opened: list[Path]) -> InstanceServer | int:
    """Become the one instance for this profile, or hand ``opened`` to the running one.

    An int is this process's exit status: 0 when the other took over, 1 when it is not
    responding (which the user is told here)."""
    name = server_name(paths.data)
    handoff = hand_over(name, [str(p) for p in opened])
    if handoff is Handoff.HANDED_OVER:
        log.info("Inglenook is already running; it was brought forward")
        return 0
    if handoff is Handoff.NOT_RESPONDING:
        text = ("Inglenook is already running but did not respond within a few seconds. It may be busy "
                "or hung: wait a moment and try again, or end the other Inglenook process.")
        print(f"inglenook: {text}", file=sys.stderr)  # noqa: T201 — also for a launch from a terminal
        theme.apply_theme(QApplication.instance(), "system")  # type: ignore[arg-type]
        QMessageBox.warning(None, "Inglenook is not responding", text)
        return 1
    instance = InstanceServer(name)
    instance.listen()
    return instance


def _quit_on_sigterm(app: QApplication) -> None:
    """SIGTERM (a logout, ``kill``) closes the app as the window's Quit does: answers stop,
    the engine shuts down, and the next start does not report a crash. Python runs signal
    handlers only between bytecodes, so a timer gives it a moment every half second."""
    signal.signal(signal.SIGTERM, lambda *_: app.quit())
    ticker = QTimer(app)
    ticker.timeout.connect(lambda: None)
    ticker.start(500)

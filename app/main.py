"""Starting the desktop app: ``inglenook`` with no arguments lands here."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from inglenook.engine import CrashGuard, InglenookError, LastCrash, Paths

from inglenook.app.widgets import theme
from inglenook.app.desktop import bring_forward, install_tray, maybe_welcome, preload_default_model
from inglenook.app.services.qt_platform import check_platform_libraries
from inglenook.app.services.resources import resource_path
from inglenook.app.services.single_instance import Handoff, InstanceServer, hand_over, server_name

if TYPE_CHECKING:
    from inglenook.engine import Engine

log = logging.getLogger(__name__)


def run_app(argv: Sequence[str] | None = None) -> int:
    arguments = list(argv if argv is not None else sys.argv)
    problem = check_platform_libraries()
    if problem is not None:
        # Qt would print its plugin error and abort with a core dump; say what to install.
        print(problem, file=sys.stderr)  # noqa: T201 — no window can show it
        return 1
    existing = QApplication.instance()  # tests create theirs first
    app = existing if isinstance(existing, QApplication) else QApplication(arguments)
    app.setApplicationName("Inglenook")
    app.setDesktopFileName("inglenook")
    icon = resource_path("inglenook.svg")
    if icon is not None:
        app.setWindowIcon(QIcon(str(icon)))
    while True:
        try:
            started = _start_engine(arguments)
            break
        except InglenookError as exc:
            if not _startup_failed(app, exc):
                return 1
    if isinstance(started, int):
        return started  # another Inglenook has this profile
    engine, guard, instance, opened, last_crashes = started
    theme.apply_theme(app, engine.settings.theme)
    from inglenook.app.window import MainWindow  # noqa: PLC0415

    window = MainWindow(engine)
    instance.setParent(window)
    instance.opened.connect(lambda sent: bring_forward(window, [Path(p) for p in sent]))
    tray = install_tray(window)
    preload_default_model(window)
    # Messages saved before this version, or while search by meaning was off: indexed once idle.
    engine.request_index()
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


_Started = tuple["Engine", CrashGuard, InstanceServer, list[Path], list[LastCrash]]


def _start_engine(arguments: list[str]) -> _Started | int:
    """The data folders, logging, the one-instance claim, the crash guard and the engine.
    On an error what was started is stopped again, so the start can be tried once more."""
    from inglenook import __version__  # noqa: PLC0415
    from inglenook.cli import setup_logging  # noqa: PLC0415
    from inglenook.engine import Engine  # noqa: PLC0415

    paths = Paths.default().ensure()
    setup_logging(paths)
    opened = model_arguments(arguments)
    instance = _claim_instance(paths, opened)
    if isinstance(instance, int):
        return instance
    guard = CrashGuard(paths.logs, "app", __version__)
    try:
        last_crashes = guard.start()
        return Engine(paths, crash_guard=guard, full_check=True), guard, instance, opened, last_crashes
    except BaseException:
        guard.stop()
        instance.close()
        raise


def _startup_failed(app: QApplication, exc: InglenookError) -> bool:
    """Say why Inglenook cannot start, and where; True when the person asks to try again
    (after freeing space, say). Also logged and printed, for a launch from a terminal."""
    from inglenook.app.services.errors import explain  # noqa: PLC0415 — the one mapping of errors to words
    from inglenook.app.services.startup_error import disk_trouble, startup_message  # noqa: PLC0415

    log.info("cannot start: %s", exc)  # into the log file; the line below is for the terminal
    paths = Paths.default()
    message = startup_message(explain(exc), exc, paths, disk_trouble(paths))
    print(f"inglenook: {message.headline}: {exc}", file=sys.stderr)  # noqa: T201 — maybe no window shows
    theme.apply_theme(app, "system")
    box = QMessageBox(QMessageBox.Icon.Critical, "Inglenook cannot start", message.headline)
    box.setInformativeText(message.body)
    retry = box.addButton("Try again", QMessageBox.ButtonRole.AcceptRole)
    box.addButton("Quit", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(retry)
    # The style sheet's bold for a `:default` button is not in its size (a pseudo-state is
    # matched when painting), so the label was clipped; the primary-button name is matched
    # when the button is polished, and polishing again sizes it for the bold label.
    retry.setObjectName("PrimaryButton")
    retry.style().unpolish(retry)
    retry.style().polish(retry)
    box.exec()
    return box.clickedButton() is retry


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
        theme.apply_theme(QApplication.instance(), "system")  # type: ignore[arg-type]  # a QApplication: made before this runs
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

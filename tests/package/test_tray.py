"""Closing the window while the API serves keeps Inglenook in the tray; launching again brings
it back. Real parts: Xvfb, a real system tray (trayer owns the XEmbed tray selection Qt looks
for), the app started as ``python -m inglenook`` with a fresh HOME in its own network
namespace, the close sent as a window manager sends it (WM_DELETE_WINDOW)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.polling import wait_until

from .desktop_session import MAIN_TITLE, MODELS_SCRIPT, cannot_run, launch, missing_tools, request_close, \
    user_environment, xvfb

# Also under `make package-test`, where CI has installed the tools (scripts/package_deps.py):
# there a missing one fails the run instead of skipping the tray unseen.
pytestmark = [pytest.mark.gui, pytest.mark.package]

if missing_tools() or shutil.which("trayer") is None:
    cannot_run(f"needs Xvfb, xdotool, unshare and trayer (missing: {', '.join(missing_tools()) or 'trayer'})")
if os.geteuid() != 0:
    cannot_run("runs the app in its own network namespace, which needs root")


def wait_for(condition: Callable[[], bool], failure: str) -> None:
    # Each poll runs xdotool: a few a second; the bound is generous for a loaded CI machine.
    wait_until(condition, timeout=300.0, failure=failure, interval=0.2)


def test_closing_while_the_api_serves_keeps_running_in_the_tray(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with xvfb() as display:
        app = launch([sys.executable, "-m", "inglenook"], home, display, installed=False)
        tray_host = None
        try:
            main = app.start_chatting()
            # The tray comes up after the app, as a panel does when Inglenook starts at login
            # (on a fast machine the app used to win that race, find no tray, and quit on close).
            tray_host = subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel",
                                          "--width", "64", "--height", "24"], env={**os.environ, "DISPLAY": display},
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Its window shows once it holds the tray; the app looks again when the window closes.
            wait_for(lambda: bool(app.xdotool("search", "--onlyvisible", "--class", "trayer", check=False).strip()),
                       "the tray host did not start")
            assert app.api(MODELS_SCRIPT)["models"], "the API did not come up"
            request_close(display, main)
            wait_for(lambda: not app.window_ids(MAIN_TITLE), "closing the window did not hide it")
            app.check_alive()  # still running, in the tray
            assert app.api(MODELS_SCRIPT)["models"], "the API stopped when the window closed"
            # Launching again brings the hidden window back (and the second process leaves).
            again = subprocess.run([sys.executable, "-m", "inglenook"], env=user_environment(home, display),
                                   capture_output=True, text=True, timeout=300)
            assert again.returncode == 0, again.stdout + again.stderr
            wait_for(lambda: bool(app.window_ids(MAIN_TITLE)), "a second launch did not bring the window back")
            assert app.quit() == 0, app.log_text()
        finally:
            if app.process.poll() is None:
                app.process.kill()
                app.process.wait(10)
            if tray_host is not None:
                tray_host.terminate()
                tray_host.wait(10)

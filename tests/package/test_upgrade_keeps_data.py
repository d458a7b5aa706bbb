"""Installing a newer build over an older one keeps the user's chats and runs its migrations.

``make package-test`` builds both: dist/inglenook_<v>_amd64.deb (``make package``) and
dist/upgrade/inglenook_<v>+upgradetest1_amd64.deb (``make package-upgrade``: the same bundle
repacked with a marker file that makes packaging/inglenook_entry.py add one dummy migration,
m999_upgrade_test_marker). The test installs the older with apt,
chats, upgrades with dpkg -i, starts the new version on the same HOME and chats on in the
same conversation. It changes the machine's packages, so it runs only with
INGLENOOK_PACKAGE_TEST=1 (as root).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from .desktop_session import MAIN_TITLE, ROOT, WELCOME_TITLE, RunningApp, cannot_run, integrity, launch, \
    missing_tools, newest_deb, user_questions, wait_answers, xvfb

pytestmark = pytest.mark.package

OLDER = newest_deb()
NEWER = next(iter(sorted((ROOT / "dist" / "upgrade").glob("inglenook_*+upgradetest1_amd64.deb"))), None)
PROGRAM = Path("/opt/inglenook/inglenook")

if os.environ.get("INGLENOOK_PACKAGE_TEST") != "1" or os.geteuid() != 0:
    pytest.skip("the upgrade test installs packages on this machine: run it with `make package-test` (root)",
                allow_module_level=True)
if OLDER is None or NEWER is None:
    cannot_run("needs both builds: `make package` and `make package-upgrade`")
if missing_tools():
    cannot_run(f"missing tools: {', '.join(missing_tools())} (python3 scripts/package_deps.py --install)")


def installed_version() -> str:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "inglenook"], capture_output=True, text=True, check=True)
    return done.stdout


def conversations_of_answers(database: Path) -> list[int]:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT conversation_id FROM messages WHERE role = 'assistant'"
                                  " AND status IN ('complete', 'partial') ORDER BY id").fetchall()
        return [row[0] for row in rows]
    finally:
        connection.close()


def chat_once(home: Path, question: str, answers_expected: int, first_run: bool) -> None:
    with xvfb() as display:
        app = launch(PROGRAM, home, display)
        try:
            main = app.start_chatting() if first_run else app.wait_window(MAIN_TITLE)
            if not first_run:
                time.sleep(1.0)  # the latest chat opens on start (a worker reads it)
                assert not app.window_ids(WELCOME_TITLE), "the welcome came back after an upgrade"
            app.type_into(main, text=question, key="Return")
            wait_question_stored(app, question, tmp_screens=home / "screens")
            wait_answers(app, answers_expected)
            assert app.quit() == 0, app.log_text()
        finally:
            if app.process.poll() is None:
                app.process.kill()
                app.process.wait(10)


def wait_question_stored(app: RunningApp, question: str, tmp_screens: Path, timeout: float = 60.0) -> None:
    """The typed question reaches the store within ``timeout``: else the keystrokes went
    somewhere else, and the failure shows where (a screenshot, the logs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        app.check_alive()
        if question in user_questions(app.database):
            return
        time.sleep(0.2)
    shot = tmp_screens / "question-lost.png"
    app.screenshot(shot)
    raise AssertionError(f"{question!r} was typed but not stored after {timeout:.0f} s (screen: {shot})\n"
                         f"{app.log_text()}")


@pytest.mark.timeout(1200)  # two launches, each with an answer the test may have to stop
def test_an_upgrade_keeps_the_chat_and_runs_the_new_migration(tmp_path: Path) -> None:
    assert OLDER is not None and NEWER is not None
    home = tmp_path / "home"
    home.mkdir()
    database = home / ".local" / "share" / "Inglenook" / "inglenook.db"
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", str(OLDER)], check=True,
                   stdout=subprocess.DEVNULL)
    try:
        chat_once(home, "What is the capital of France?", 1, first_run=True)
        subprocess.run(["dpkg", "-i", str(NEWER)], check=True, stdout=subprocess.DEVNULL)
        assert installed_version().endswith("+upgradetest1")
        chat_once(home, "And the capital of Italy?", 2, first_run=False)
    finally:
        subprocess.run(["dpkg", "-r", "inglenook"], check=False, stdout=subprocess.DEVNULL)
    assert integrity(database) == "ok"
    first, second = conversations_of_answers(database)[:2]
    assert first == second, "the upgraded app did not continue the same conversation"
    connection = sqlite3.connect(database)
    try:
        applied = [row[0] for row in connection.execute("SELECT name FROM _migrations")]
        marker = connection.execute("SELECT note FROM upgrade_test_marker").fetchall()
    finally:
        connection.close()
    assert "m999_upgrade_test_marker" in applied and marker

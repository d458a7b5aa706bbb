"""First start on a read-only or full data disk: a dialog that says what is wrong and where.

Real faults, not mocks: each case runs the app (the real ``run_app``, offscreen) in its own
mount namespace where the folder is a real tmpfs, remounted read-only (EROFS) or too small
(ENOSPC, also in the middle of creating the database), and in its own network namespace (the
API's port stays private). The dialogs are answered by tests/package/startup_failure_driver.py.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gui

DRIVER = Path(__file__).with_name("startup_failure_driver.py")


def _namespaces_work() -> str | None:
    missing = [tool for tool in ("unshare", "ip") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (util-linux, iproute2)"
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(["unshare", "-m", "-n", "sh", "-c", f"mount -t tmpfs tmpfs {folder}"],
                              capture_output=True, text=True)
    return None if done.returncode == 0 else f"unshare -m -n with a tmpfs mount is not permitted here: {done.stderr}"


if (reason := _namespaces_work()) is not None:
    pytest.skip(reason, allow_module_level=True)


def run_first_start(tmp_path: Path, mount: str, then_run: str | None = None, after: str = "true") -> dict[str, Any]:
    """Start the app with HOME at ``tmp_path/home`` after ``mount`` (shell, in the namespace);
    ``after`` runs there once the app has exited (the tmpfs is gone with the namespace)."""
    home, out, runtime = tmp_path / "home", tmp_path / "out", tmp_path / "runtime"
    for folder in (home, out, runtime):
        folder.mkdir(exist_ok=True)
    runtime.chmod(0o700)
    command = [sys.executable, str(DRIVER), str(out)] + (["--then-run", then_run] if then_run else [])
    script = f"ip link set lo up && {mount} && {shlex.join(command)} && {after}"
    keep = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
    env = {**keep, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime), "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(["unshare", "-m", "-n", "sh", "-c", script], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads((out / "result.json").read_text())
    result["stderr"] = done.stderr
    return result


def test_a_read_only_home_says_so_and_names_the_data_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_first_start(tmp_path, f"mount -t tmpfs -o size=1m tmpfs {home} && mount -o remount,ro {home}")
    assert result["exit_code"] == 1 and not result["window_shown"]
    [dialog] = result["dialogs"]
    assert dialog["headline"] == "The disk for Inglenook's data is read-only"
    data = home / ".local" / "share" / "Inglenook"
    assert f"keeps its chats, settings and models in {data}." in dialog["body"]
    assert f"The disk that holds {home} is mounted read-only" in dialog["body"]
    assert "read-only" in dialog["body"].split("Details:")[1]  # the error itself, in words
    assert dialog["buttons"] == ["Quit", "Try again"]
    assert Path(dialog["image"]).stat().st_size > 1000
    assert "The disk for Inglenook's data is read-only" in result["stderr"]  # a launch from a terminal


def test_a_full_disk_says_so_and_starts_once_space_is_freed(tmp_path: Path) -> None:
    share = tmp_path / "home" / ".local" / "share"
    share.mkdir(parents=True)
    filler = share / "filler"
    result = run_first_start(
        tmp_path, f"mount -t tmpfs -o size=1m tmpfs {share} && (dd if=/dev/zero of={filler} bs=4k || true)",
        then_run=f"rm {filler}")
    first = result["dialogs"][0]
    assert first["headline"] == "The disk for Inglenook's data is full"
    assert f"models in {share / 'Inglenook'}. That folder's disk has 0\u00a0B free" in first["body"]
    assert len(result["dialogs"]) == 1 and result["window_shown"] and result["exit_code"] == 0


def test_a_disk_that_fills_while_the_database_is_made_keeps_a_store_that_finishes_later(tmp_path: Path) -> None:
    """128 KiB holds the first pages of the new database but not all of its migrations (the
    write-ahead log grows past it); once the disk grows, Try again finishes the same file,
    which is then healthy, complete, and nothing was set aside as damaged."""
    share = tmp_path / "home" / ".local" / "share"
    share.mkdir(parents=True)
    kept = tmp_path / "kept"
    result = run_first_start(tmp_path, f"mount -t tmpfs -o size=128k tmpfs {share}",
                             then_run=f"mount -o remount,size=16m {share}", after=f"cp -r {share / 'Inglenook'} {kept}")
    first = result["dialogs"][0]
    assert first["headline"] == "The disk for Inglenook's data is full"
    assert "inglenook.db" in first["data_files"]  # the database had been begun when the disk filled
    assert len(result["dialogs"]) == 1 and result["window_shown"] and result["exit_code"] == 0
    assert not list(kept.glob("*.corrupt-*"))
    with sqlite3.connect(kept / "inglenook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"conversations", "messages", "settings"} <= tables

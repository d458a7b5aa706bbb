"""The crash guard: a run that ends without stopping its guard is reported once, next start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inglenook.engine.core.crashguard import DUMP_SIGNAL, CrashGuard, find_crashed_runs


def test_a_clean_run_leaves_nothing_to_report(tmp_path: Path) -> None:
    guard = CrashGuard(tmp_path, "terminal", "0.1.0")
    assert guard.start() == []
    guard.doing("answering in conversation 3 with smollm2")
    marker = json.loads(guard.marker.read_text())
    assert marker["activity"] == "answering in conversation 3 with smollm2"
    guard.stop()
    assert list(tmp_path.iterdir()) == []
    assert CrashGuard(tmp_path, "terminal").start() == []


def test_a_run_that_died_is_reported_once_with_what_it_was_doing(tmp_path: Path) -> None:
    # A real child process starts a guard, says what it does, then dies without stopping it.
    script = (
        "import os, sys; from pathlib import Path; from inglenook.engine.core.crashguard import CrashGuard;"
        "g = CrashGuard(Path(sys.argv[1]), 'app', '9.9'); g.start();"
        "g.doing('loading the model gemma'); os._exit(3)"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=False)
    crashes = find_crashed_runs(tmp_path, own_pid=os.getpid())
    assert len(crashes) == 1
    crash = crashes[0]
    assert crash.front_end == "app" and crash.version == "9.9"
    assert crash.activity == "loading the model gemma"
    assert "stopped unexpectedly" in crash.message() and "loading the model gemma" in crash.message()
    assert crash.fault_log is None  # no fatal signal, so faulthandler wrote nothing
    assert find_crashed_runs(tmp_path) == []  # reported once


def test_a_running_process_is_not_a_crash(tmp_path: Path) -> None:
    guard = CrashGuard(tmp_path, "terminal")
    guard.start()
    try:
        # Another process (pid differs) looking at the folder sees a live run, not a crash.
        assert find_crashed_runs(tmp_path, own_pid=-1) == []
    finally:
        guard.stop()


def test_an_unreadable_marker_is_set_aside(tmp_path: Path) -> None:
    (tmp_path / "run-123.json").write_text("{not json")
    assert find_crashed_runs(tmp_path) == []
    assert (tmp_path / "run-123.unreadable").exists()


def test_a_live_run_whose_start_time_reads_differently_keeps_its_records(tmp_path: Path) -> None:
    """Issue 45: ``mcp add`` beside a running ``serve`` took the server for a crashed run and
    deleted its marker and fault log. psutil's start time is boot time (from the wall clock)
    plus ticks, so two reads of a live process can differ by over a second; here the marker's
    recorded times are moved as such a read would move them."""
    script = (
        "import sys, time; from pathlib import Path; from inglenook.engine.core.crashguard import CrashGuard;"
        "g = CrashGuard(Path(sys.argv[1]), 'server', '9.9'); g.start(); print('ready', flush=True); time.sleep(600)"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        marker = tmp_path / f"run-{child.pid}.json"
        record = json.loads(marker.read_text())
        record["create_time"] -= 5.0
        if isinstance(record.get("start_ticks"), int):
            record["start_ticks"] -= 500
        marker.write_text(json.dumps(record))

        assert find_crashed_runs(tmp_path, own_pid=os.getpid()) == []
        assert marker.exists() and (tmp_path / f"fault-{child.pid}.log").exists()
    finally:
        child.kill()
        child.wait()
    # Once it is gone (killed: no clean exit), the next start reports it.
    assert [c.pid for c in find_crashed_runs(tmp_path, own_pid=os.getpid())] == [child.pid]


STUCK_CHILD = """
import sys, threading, time
from pathlib import Path
from inglenook.engine.core.crashguard import CrashGuard

guard = CrashGuard(Path(sys.argv[1]), 'app', '9.9')
guard.start()
never = threading.Lock()
never.acquire()

def waiting_for_a_lock_nobody_releases():
    never.acquire()

threading.Thread(target=waiting_for_a_lock_nobody_releases, daemon=True).start()
print('ready', flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(DUMP_SIGNAL is None, reason="no signal asks a live run for its stacks on this system")
def test_a_stuck_run_tells_its_stacks_on_request_and_a_later_crash_is_still_reported(tmp_path: Path) -> None:
    assert DUMP_SIGNAL is not None
    child = subprocess.Popen([sys.executable, "-c", STUCK_CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        fault_log = tmp_path / f"fault-{child.pid}.log"
        deadline = time.monotonic() + 30
        while "waiting_for_a_lock_nobody_releases" not in fault_log.read_text() and time.monotonic() < deadline:
            os.kill(child.pid, DUMP_SIGNAL)  # again until the thread is in its function
            time.sleep(0.2)
        stacks = fault_log.read_text()
        assert "waiting_for_a_lock_nobody_releases" in stacks  # the stuck thread, by its function
        assert "_dump_stacks" not in stacks  # the main thread where the signal found it, not the handler
        assert child.poll() is None  # asking did not stop it
        assert find_crashed_runs(tmp_path, own_pid=os.getpid()) == []  # alive: not a crash
        os.kill(child.pid, signal.SIGSEGV)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    crashes = find_crashed_runs(tmp_path, own_pid=os.getpid())
    assert len(crashes) == 1 and crashes[0].fault_log is not None
    # The excerpt is the crash's report, not the stacks asked for before it.
    assert crashes[0].fault_excerpt.startswith("Fatal Python error: Segmentation fault")

"""A native crash is not silent: what the process was doing when llama.cpp took it down.

The engine runs llama.cpp in-process, so a fault in native code (an illegal instruction,
a segmentation fault) ends the process before Python can log anything. Each front end
opens one ``CrashGuard`` per process:

* ``faulthandler`` writes every thread's Python stack into ``logs/fault-<pid>.log`` when a
  fatal signal arrives (it is a signal handler, so it runs even then);
* on POSIX, ``SIGUSR1`` writes every thread's stack there too, without stopping anything: a
  process that seems stuck (a window that no longer answers) can be asked what each thread
  is waiting on (``kill -USR1 <pid>``; the pid is in the marker's name). A Python handler
  does it, under the GIL, between bytecodes of the main thread (the app's ticker gives it a
  turn twice a second). ``faulthandler.register`` would answer even with the main thread
  stuck in C, but it reads the other threads' frames while they run: it crashed a live app
  here twice in eleven asks, mid-dump, with a segmentation fault;
* a small marker, ``logs/run-<pid>.json``, says what the process is doing right now
  ("loading smollm2…", "answering in conversation 12"), updated as jobs start and end;
* a clean exit removes both. A marker left behind by a process that no longer runs means
  that run stopped unexpectedly; the next start reports it once, with the log to open.

Whether a marker's process still runs is decided first by a lock, not by the clock: each run
holds an exclusive advisory lock on its fault log for as long as it lives, and the system
drops it when the process ends, however it ends. A marker whose fault log is still locked
belongs to a live run and is never touched. (Comparing ``psutil``'s process start time alone
took a live server for a dead one: on Linux that time is the boot time plus ticks since boot,
and the boot time is derived from the wall clock, which moves, so two reads can differ by
more than a second.) The pid and start time remain the check for markers written before the
lock existed, with the start time compared in the system's own ticks where it has them.

Saved messages do not depend on any of this: they are committed before and after each
answer (see ``chat.py``); the guard only explains what happened.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from ..base import atomic_write_text

log = logging.getLogger(__name__)

MARKER_GLOB = "run-*.json"
FAULT_EXCERPT_LINES = 40
# Asks a live run for every thread's stack (Windows has no such signal).
DUMP_SIGNAL: signal.Signals | None = getattr(signal, "SIGUSR1", None)


@dataclass(frozen=True)
class LastCrash:
    """A run that ended without shutting down."""

    pid: int
    front_end: str  # "app" | "terminal" | "server"
    version: str
    started: float  # time.time()
    last_seen: float  # when it last reported what it was doing
    activity: str  # what it was doing then, or "" when idle
    fault_log: Path | None  # the faulthandler output, when the fault reached it
    fault_excerpt: str

    @property
    def doing(self) -> str:
        return self.activity or "idle (no model was working)"

    def message(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.last_seen))
        where = f" The crash report is in {self.fault_log}." if self.fault_log else ""
        return (f"The last run of Inglenook ({self.front_end}, started {_clock(self.started)}) stopped "
                f"unexpectedly around {when} while {self.doing}.{where} Messages saved before then are kept.")


def _clock(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


class CrashGuard:
    """One per process; ``start`` it before the engine loads any model."""

    def __init__(self, logs_dir: Path, front_end: str, version: str = "") -> None:
        self.logs_dir = logs_dir
        self.front_end = front_end
        self.version = version
        self.pid = os.getpid()
        self.marker = logs_dir / f"run-{self.pid}.json"
        self.fault_log = logs_dir / f"fault-{self.pid}.log"
        self._fault_file: IO[str] | None = None
        self._lock = threading.Lock()
        self._started = time.time()
        self._activity = ""
        self._previous_handler: Any = None  # DUMP_SIGNAL's handler before start()
        self.last_crashes: list[LastCrash] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> list[LastCrash]:
        """Collect runs that crashed earlier, then watch this one. Returns what was found."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.last_crashes = find_crashed_runs(self.logs_dir, own_pid=self.pid)
        for crash in self.last_crashes:
            log.info("%s", crash.message())  # the front end shows it to the person
        # Line-buffered text file: faulthandler writes to its descriptor directly.
        self._fault_file = open(self.fault_log, "w", encoding="utf-8")  # noqa: SIM115 — kept open for the process
        if not _lock(self._fault_file.fileno()):  # held until this process ends, however it ends
            log.warning("cannot lock %s; another start may take this run for a crashed one", self.fault_log)
        faulthandler.enable(file=self._fault_file, all_threads=True)
        if DUMP_SIGNAL is not None and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(DUMP_SIGNAL, self._dump_stacks)
        self._write_marker()
        return self.last_crashes

    def stop(self) -> None:
        """A clean exit: nothing to report next time."""
        with self._lock:
            if self._fault_file is None:
                return
            faulthandler.disable()
            if DUMP_SIGNAL is not None and self._previous_handler is not None:
                with contextlib.suppress(ValueError):  # not the main thread: the handler stays, harmless
                    signal.signal(DUMP_SIGNAL, self._previous_handler)
                self._previous_handler = None
            # Removed while still locked, then closed (which drops the lock): no other start
            # sees the marker of this run unlocked.
            for path in (self.marker, self.fault_log):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
                except PermissionError:  # Windows will not remove an open file: after the close
                    pass
            self._fault_file.close()
            self._fault_file = None
            for path in (self.marker, self.fault_log):
                path.unlink(missing_ok=True)

    def _dump_stacks(self, _signum: int, interrupted: Any) -> None:
        """DUMP_SIGNAL's handler: every thread's stack, most recent call first, into the fault
        log. It takes no lock: it runs on the main thread, which may hold ``_lock`` already."""
        out = self._fault_file
        if out is None:
            return
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        lines = [f"Stacks asked for at {time.strftime('%Y-%m-%d %H:%M:%S')}"]
        here = threading.get_ident()
        for ident, frame in sys._current_frames().items():
            if ident == here:  # where the signal found this thread, not this handler
                frame = interrupted
            lines.append(f"\nThread {names.get(ident, '?')} ({ident:#x}) (most recent call first):")
            lines.extend(entry.rstrip("\n") for entry in reversed(traceback.format_stack(frame)))
        try:
            out.write("\n".join(lines) + "\n\n")
            out.flush()
        except (OSError, ValueError) as exc:  # a full disk, or the file closed by stop()
            log.warning("cannot write the stacks asked for: %s", exc)

    def doing(self, activity: str | None) -> None:
        """Record what the engine is doing now ("" or None: idle). Cheap; called per job."""
        with self._lock:
            if (activity or "") == self._activity:
                return  # the marker already says so; no write for every admitted job
            self._activity = activity or ""
            if self._fault_file is not None:
                self._write_marker()

    def _write_marker(self) -> None:
        record = {
            "pid": self.pid, "create_time": _create_time(self.pid), "start_ticks": _start_ticks(self.pid),
            "front_end": self.front_end,
            "version": self.version, "started": self._started, "last_seen": time.time(),
            "activity": self._activity, "fault_log": self.fault_log.name,
        }
        try:
            atomic_write_text(self.marker, json.dumps(record))
        except OSError as exc:  # a full disk must not stop an answer
            log.warning("cannot update %s: %s", self.marker, exc)

    def __enter__(self) -> "CrashGuard":
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _lock(fd: int) -> bool:
    """Take an exclusive, non-blocking lock on ``fd``; whether it was taken."""
    try:
        if sys.platform == "win32":
            import msvcrt  # noqa: PLC0415

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl  # noqa: PLC0415

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _locked_by_a_live_run(fault_log: Path) -> bool:
    """Whether a running process holds ``fault_log``'s lock (its run is alive). Opened for
    reading only, never created, and let go at once."""
    if not fault_log.name or not fault_log.is_file():
        return False
    try:
        handle = open(fault_log, "rb")  # noqa: SIM115 — closed below
    except OSError:
        return False
    with handle:
        if sys.platform == "win32":  # msvcrt locks a range of a handle opened for writing too
            return False
        if not _lock(handle.fileno()):
            return True
        import fcntl  # noqa: PLC0415

        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return False


def _start_ticks(pid: int) -> int | None:
    """The process's start in clock ticks since boot (Linux's /proc/PID/stat, field 22): a
    count that no clock change moves, unlike a start time in seconds since the epoch."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def _still_running(record: dict[str, Any]) -> bool:
    pid = int(record.get("pid", 0) or 0)
    if pid <= 0 or not psutil.pid_exists(pid):
        return False
    # A reused pid belongs to a process created later than the one that wrote the marker.
    ticks = record.get("start_ticks")
    if isinstance(ticks, int):
        now = _start_ticks(pid)
        if now is not None:
            return now == ticks
    created = float(record.get("create_time", 0.0) or 0.0)
    return abs(_create_time(pid) - created) < 1.0


def find_crashed_runs(logs_dir: Path, own_pid: int | None = None) -> list[LastCrash]:
    """Markers of runs that are gone; each is reported once (its marker is removed)."""
    crashes = []
    for marker in sorted(logs_dir.glob(MARKER_GLOB)):
        try:
            record = json.loads(marker.read_text())
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except (OSError, ValueError):
            log.warning("unreadable run marker %s set aside", marker)
            marker.replace(marker.with_suffix(".unreadable"))
            continue
        fault_log = logs_dir / (Path(str(record.get("fault_log", "") or "")).name or f"fault-{record.get('pid')}.log")
        if record.get("pid") == own_pid or _locked_by_a_live_run(fault_log) or _still_running(record):
            continue
        excerpt = _excerpt(fault_log)
        crashes.append(LastCrash(
            pid=int(record.get("pid", 0) or 0), front_end=str(record.get("front_end", "")),
            version=str(record.get("version", "")), started=float(record.get("started", 0.0) or 0.0),
            last_seen=float(record.get("last_seen", 0.0) or 0.0), activity=str(record.get("activity", "")),
            fault_log=fault_log if excerpt else None, fault_excerpt=excerpt,
        ))
        marker.unlink(missing_ok=True)
        if not excerpt:
            fault_log.unlink(missing_ok=True)  # killed without a fault report (power, SIGKILL)
    return crashes


def _excerpt(fault_log: Path) -> str:
    try:
        text = fault_log.read_text(errors="replace") if fault_log.is_file() else ""
    except OSError:
        return ""
    lines = text.strip().splitlines()
    # Stacks asked for earlier (DUMP_SIGNAL) come before the crash's own report: start there.
    fatal = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error")]
    return "\n".join(lines[fatal[-1] if fatal else 0:][:FAULT_EXCERPT_LINES])

"""Running the installed Inglenook as a person would: an X server, a fresh HOME, no network.

Used by the package tests and by scripts/first_run_timing.py. Everything here is real: Xvfb,
the installed program, xdotool typing into its window, its SQLite store read from disk, its
API called with the OpenAI SDK from inside the app's own network namespace.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WELCOME_TITLE = "Welcome to Inglenook"
MAIN_TITLE = "^Inglenook$"


ON_MACHINE = os.environ.get("INGLENOOK_PACKAGE_TEST") == "1"


def cannot_run(reason: str) -> None:
    """At a package test module's top: skip it for ``reason``, except under ``make package-test``
    (INGLENOOK_PACKAGE_TEST=1), where a check that cannot run fails the run instead of letting
    a broken package pass unseen."""
    import pytest

    if ON_MACHINE:
        pytest.fail(f"make package-test cannot run this check: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def install(deb: Path, scratch: Path) -> Path:
    """Install ``deb``; return the installed program. With INGLENOOK_PACKAGE_TEST=1 (``make
    package-test``, root) with apt, as a user would; otherwise unpacked with ``dpkg-deb -x``
    into ``scratch``, so a plain ``make test`` never changes the machine's packages."""
    if ON_MACHINE:
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", str(deb)], check=True,
                       stdout=subprocess.DEVNULL)
        return Path("/opt/inglenook/inglenook")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(scratch)], check=True)
    return scratch / "opt" / "inglenook" / "inglenook"


def uninstall(scratch: Path) -> None:
    """Remove what install() put in place (``dpkg -r``: the program, not the user's data)."""
    if ON_MACHINE:
        subprocess.run(["dpkg", "-r", "inglenook"], check=True, stdout=subprocess.DEVNULL)
        assert not Path("/opt/inglenook").exists(), "dpkg -r left /opt/inglenook behind"
        assert not Path("/usr/bin/inglenook").exists()
        assert not Path("/usr/share/applications/inglenook.desktop").exists()
    else:
        shutil.rmtree(scratch)


def newest_deb() -> Path | None:
    found = sorted((ROOT / "dist").glob("inglenook_*_amd64.deb"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


MODELS_SCRIPT = """
import json, time
from openai import OpenAI
client = OpenAI(base_url="http://127.0.0.1:8484/v1", api_key="unused", timeout=30, max_retries=0)
for attempt in range(300):  # the server starts on a worker beside the window
    try:
        print(json.dumps({"models": [m.id for m in client.models.list().data]}))
        break
    except Exception:
        time.sleep(1)
"""


def imagemagick() -> str:
    """ImageMagick's convert: by Debian's own name first, since an earlier `convert` on PATH
    may be something else (a stand-in that only prints PNGs)."""
    return shutil.which("convert-im6.q16") or shutil.which("convert-im7.q16") or "convert"


def missing_tools() -> list[str]:
    return [tool for tool in ("Xvfb", "xdotool", "xwininfo", "dpkg-deb", "unshare", "nsenter", "ip")
            if shutil.which(tool) is None]


@contextmanager
def xvfb(width: int = 1280, height: int = 800) -> Iterator[str]:
    """A private X display (":N"), gone afterwards: yielded once an X client has connected to
    it, not merely once its socket file exists. ``-noreset``: by default an X server resets
    when its last client leaves, and a client that connects during that reset is dropped
    before its setup is answered. The readiness probe here is such a last client, so the
    app, starting right after it, failed now and then with "could not connect to display"
    (CI, stop 52; the race is Xorg's, see freedesktop xserver issue 1102). What the server
    says goes to ``xvfb_log``, which a failure's message shows."""
    number = next(n for n in range(140, 400) if not Path(f"/tmp/.X11-unix/X{n}").exists()
                  and not Path(f"/tmp/.X{n}-lock").exists())
    display = f":{number}"
    log = xvfb_log(display)
    with log.open("wb") as out:
        server = subprocess.Popen(["Xvfb", display, "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp",
                                   "-noreset"],
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _accepts_clients(display):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Xvfb {display} did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield display
    finally:
        server.terminate()
        server.wait(10)


def xvfb_log(display: str) -> Path:
    return Path(tempfile.gettempdir()) / f"inglenook-xvfb{display.lstrip(':')}.log"


def _accepts_clients(display: str) -> bool:
    if not Path(f"/tmp/.X11-unix/X{display.lstrip(':')}").exists():
        return False
    done = subprocess.run(["xdotool", "getdisplaygeometry"], env={**os.environ, "DISPLAY": display},
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=30)
    return done.returncode == 0


def user_environment(home: Path, display: str) -> dict[str, str]:
    """A desktop user's environment with nothing of ours in it: no INGLENOOK_HOME, no Qt
    platform override (the real xcb plugin), a fresh HOME and runtime folder."""
    runtime = home / ".runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TZ") if k in os.environ}
    return {**keep, "HOME": str(home), "DISPLAY": display, "XDG_RUNTIME_DIR": str(runtime),
            "LANG": os.environ.get("LANG", "C.UTF-8")}


@dataclass
class RunningApp:
    process: subprocess.Popen[bytes]
    home: Path
    display: str
    started: float  # time.monotonic() just before the process was started
    log: Path
    events: dict[str, float] = field(default_factory=dict)

    @property
    def database(self) -> Path:
        return self.home / ".local" / "share" / "Inglenook" / "inglenook.db"

    def xdotool(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": self.display},
                              capture_output=True, text=True, timeout=30)
        if check and done.returncode != 0:
            raise RuntimeError(f"xdotool {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def window_ids(self, title_regex: str) -> list[str]:
        out = self.xdotool("search", "--onlyvisible", "--name", title_regex, check=False)
        return [line for line in out.splitlines() if line.strip()]

    def wait_window(self, title_regex: str, timeout: float = 300.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            ids = self.window_ids(title_regex)
            if ids:
                return ids[-1]
            time.sleep(0.05)
        raise TimeoutError(f"no window titled {title_regex!r} after {timeout:.0f} s\n{self.log_text()}")

    def type_into(self, window: str, text: str | None = None, key: str | None = None) -> None:
        """Focus ``window`` (there is no window manager, so by XSetInputFocus) and type."""
        self.xdotool("windowfocus", "--sync", window)
        if text:
            self.xdotool("type", "--delay", "20", text)
        if key:
            self.xdotool("key", key)

    def start_chatting(self, welcome: str | None = None, timeout: float = 60.0) -> str:
        """Press "Start chatting" (Return) on the first-run welcome and return the main
        window once the welcome has gone: the composer takes the focus only then, and keys
        typed before it went to whatever had it (a question lost its first letters)."""
        self.type_into(welcome or self.wait_window(WELCOME_TITLE), key="Return")
        deadline = time.monotonic() + timeout
        while self.window_ids(WELCOME_TITLE):
            self.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the welcome stayed open {timeout:.0f} s after Return\n{self.log_text()}")
            time.sleep(0.05)
        return self.wait_window(MAIN_TITLE)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"Inglenook exited with {self.process.returncode}\n{self.log_text()}")

    @property
    def app_log(self) -> Path:
        """The app's own log (platformdirs' user log folder), where its workers write."""
        return self.home / ".local" / "state" / "Inglenook" / "log" / "inglenook.log"

    def log_text(self) -> str:
        """The tails of what the app printed and of its own log, for a failure's message."""
        parts = []
        for name, path in (("stdout", self.log), ("inglenook.log", self.app_log), ("Xvfb", xvfb_log(self.display))):
            if path.exists():
                parts.append(f"--- {name} ---\n" + path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)

    def stuck_report(self, screen: Path) -> str:
        """What a run that seems stuck is doing, for a failure's message: the crash guard's
        marker (the engine's activity), every thread's Python stack (the guard writes them into
        its fault log when asked with SIGUSR1), a screenshot, and the logs. The app keeps
        running; the test ends it."""
        parts = []
        for marker in sorted(self.app_log.parent.glob("run-*.json")):
            parts.append(f"--- {marker.name} ---\n{_read(marker)}")
            try:  # a report of a failure must not fail itself
                record = json.loads(_read(marker))
                fault_log = self.app_log.parent / str(record.get("fault_log", ""))
                os.kill(int(record["pid"]), signal.SIGUSR1)
            except (OSError, KeyError, ValueError, TypeError, AttributeError) as exc:
                parts.append(f"(no stacks: {exc})")
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "most recent call first" not in _read(fault_log):
                time.sleep(0.1)
            time.sleep(0.5)  # the rest of the threads
            parts.append(f"--- {fault_log.name} ---\n{_read(fault_log)[-40000:]}")
        try:
            self.screenshot(screen)
            parts.append(f"(screen: {screen})")
        except (OSError, subprocess.SubprocessError) as exc:
            parts.append(f"(no screenshot: {exc})")
        return "\n".join([*parts, self.log_text()])

    def screenshot(self, target: Path, window: str = "root") -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        raw = target.with_suffix(".xwd")
        which = ["-root"] if window == "root" else ["-id", window]
        subprocess.run(["xwd", *which, "-silent", "-display", self.display, "-out", str(raw)], check=True,
                       timeout=30)
        subprocess.run([imagemagick(), str(raw), str(target)], check=True, timeout=60)
        raw.unlink()

    def colours(self, image: Path) -> int:
        done = subprocess.run([imagemagick(), str(image), "-format", "%k", "info:"], capture_output=True, text=True,
                              check=True, timeout=60)
        return int(done.stdout.strip() or 0)

    def screenshot_when_painted(self, target: Path, window: str, timeout: float = 60.0, settle: float = 1.5) -> int:
        """A screenshot of the screen once ``window`` has painted: a freshly mapped window is
        black until Qt's first paint, so wait until it shows many colours (text is antialiased),
        then a moment more for the rest (the model list, the status line). Returns the count."""
        probe = target.with_name("probe.png")
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            self.screenshot(probe, window)
            colours = self.colours(probe)
            if colours > 40 or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        probe.unlink()
        time.sleep(settle)
        self.screenshot(target)
        return colours

    def api(self, script: str) -> dict[str, object]:
        """Run ``script`` (Python, using the OpenAI SDK; prints one JSON line) inside the app's
        network namespace: the only place its loopback API exists."""
        self.wait_for_own_network()
        done = subprocess.run(["nsenter", "-t", str(self.process.pid), "-n", sys.executable, "-c", script],
                              capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"API client failed: {done.stderr[-2000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def wait_for_own_network(self, timeout: float = 60.0) -> None:
        """Until the process is in its own network namespace. Popen returns before `unshare`
        has made it: an nsenter at once joined this machine's namespace instead, and a client
        there waited on a port nothing listened to (seen with `serve`, asked at once)."""
        ours = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if os.readlink(f"/proc/{self.process.pid}/ns/net") != ours:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"the program never entered its own network namespace\n{self.log_text()}")

    def quit(self, timeout: float = 60.0) -> int:
        """Ctrl+Q in the main window (the menu's Quit); SIGTERM if that is not possible."""
        ids = self.window_ids(MAIN_TITLE)
        if ids:
            self.type_into(ids[-1], key="ctrl+q")
        else:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGTERM)
            return self.process.wait(30)


def build_folders() -> list[Path]:
    """What a user's machine does not have and a bundle must not lean on: llama.cpp's build
    cache (scripts/llama_build.py's, with its CMake tree), the checkout's build folder and the
    dev venv's llama_cpp package."""
    cache = Path(os.environ.get("INGLENOOK_BUILD_CACHE")
                 or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "inglenook" / "build")
    venv_llama = sorted((ROOT / ".venv" / "lib").glob("python3*/site-packages/llama_cpp"))
    return [path for path in (cache, ROOT / "build", *venv_llama) if path.is_dir()]


def as_a_user(command: list[str], offline: bool = True, hide: list[Path] | None = None) -> list[str]:
    """``command`` wrapped to run as on a user's machine: ``offline``, in a network namespace
    with only loopback, so nothing outside this machine can be reached (and an API's port is
    private); ``hide``, in a mount namespace where each of those folders (build_folders() by
    default) is an empty tmpfs, so a library found only there fails to load."""
    hidden = build_folders() if hide is None else hide
    steps = ["ip link set lo up"] if offline else []
    steps += [f"mount -t tmpfs -o size=1m inglenook-hidden '{folder}'" for folder in hidden]
    flags = (["-n"] if offline else []) + (["-m"] if hidden else [])
    if not flags:
        return command
    return ["unshare", *flags, "sh", "-c", " && ".join([*steps, 'exec "$0" "$@"']), *command]


def launch(program: Path | list[str], home: Path, display: str, offline: bool = True,
           installed: bool = True) -> RunningApp:
    """Start ``program`` (a path, or a whole command) as a user would (as_a_user: offline; for
    an ``installed`` program also with the build folders hidden, which the checkout's own
    ``python -m inglenook`` runs from)."""
    env = user_environment(home, display)
    log = home / "inglenook-stdout.log"
    command = as_a_user([str(part) for part in program] if isinstance(program, list) else [str(program)],
                        offline=offline, hide=None if installed else [])
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=home)
    return RunningApp(process=process, home=home, display=display, started=started, log=log)


class _ClientMessage(ctypes.Structure):
    """Xlib's XClientMessageEvent, padded to the size of an XEvent (24 longs)."""

    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("message_type", ctypes.c_ulong),
                ("format", ctypes.c_int), ("data", ctypes.c_long * 5), ("pad", ctypes.c_long * 12)]


def request_close(display: str, window: str) -> None:
    """Ask ``window`` to close as a window manager's close button does: a WM_PROTOCOLS
    client message carrying WM_DELETE_WINDOW (Xvfb has no window manager to click)."""
    x11 = ctypes.CDLL("libX11.so.6")
    x11.XOpenDisplay.restype = ctypes.c_void_p
    x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
    x11.XInternAtom.restype = ctypes.c_ulong
    x11.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    x11.XSendEvent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    x11.XFlush.argtypes = [ctypes.c_void_p]
    x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
    connection = x11.XOpenDisplay(display.encode())
    if not connection:
        raise RuntimeError(f"cannot open X display {display}")
    try:
        event = _ClientMessage(type=33, window=int(window), format=32)  # 33: ClientMessage
        event.message_type = x11.XInternAtom(connection, b"WM_PROTOCOLS", 0)
        event.data[0] = x11.XInternAtom(connection, b"WM_DELETE_WINDOW", 0)
        x11.XSendEvent(connection, int(window), 0, 0, ctypes.byref(event))
        x11.XFlush(connection)
    finally:
        x11.XCloseDisplay(connection)


def stored_rows(database: Path, query: str) -> list[sqlite3.Row]:
    """``query``'s rows from the store, read as another program would (read-only); none
    while the file or its schema is still being created."""
    if not database.exists():
        return []
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
    connection.row_factory = sqlite3.Row
    try:
        return connection.execute(query).fetchall()
    except sqlite3.OperationalError:  # the schema is still being created
        return []
    finally:
        connection.close()


def assistant_answers(database: Path) -> list[sqlite3.Row]:
    """The finished answers in the store."""
    return stored_rows(database, "SELECT content, status, ttft_ms, created_at FROM messages"
                                 " WHERE role = 'assistant' ORDER BY id")


def wait_answers(app: RunningApp, count: int, stop_after: float = 150.0, timeout: float = 240.0) -> list[sqlite3.Row]:
    """Wait for ``count`` finished answers. The 135M starter model sometimes rambles to its
    token limit, minutes on a busy machine: after ``stop_after`` seconds the answer is stopped
    with Esc, as a person would, and kept as 'partial' (with its text: by then its first tokens
    have long arrived). An answer stored as failed ends the wait at once; so does ``timeout``,
    well inside pytest's own limit, so the failure carries the app's logs."""
    started = time.monotonic()
    stopped = False
    while time.monotonic() - started < timeout:
        app.check_alive()
        stored = assistant_answers(app.database)
        failed = [a for a in stored if a["status"] == "error"]
        if failed:
            raise AssertionError(f"an answer failed: {dict(failed[0])}\n{app.log_text()}")
        answers = [a for a in stored if a["status"] in ("complete", "partial")]
        if len(answers) >= count:
            return answers
        if not stopped and time.monotonic() - started > stop_after:
            windows = app.window_ids(MAIN_TITLE)
            if windows:
                app.type_into(windows[-1], key="Escape")
                stopped = True
        time.sleep(0.2)
    raise TimeoutError(f"no finished answer #{count} after {timeout:.0f} s (Esc sent: {stopped}; stored: "
                       f"{[dict(a) for a in assistant_answers(app.database)]}; questions stored: "
                       f"{len(user_questions(app.database))})\n"
                       f"{app.stuck_report(app.home / 'screens' / f'no-answer-{count}.png')}")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def user_questions(database: Path) -> list[str]:
    """The person's messages in the store."""
    return [row[0] for row in stored_rows(database, "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]


def integrity(database: Path) -> str:
    connection = sqlite3.connect(database)
    try:
        return str(connection.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        connection.close()


# Generous waits, never assertions on time: on a shared two-core machine an answer of a few
# tokens can take minutes while other processes decode.
API_SCRIPT = """
import json
from openai import OpenAI
client = OpenAI(base_url="http://127.0.0.1:8484/v1", api_key="unused", timeout=850, max_retries=0)
models = [m.id for m in client.models.list().data]
reply = client.chat.completions.create(model="smollm2-135m-instruct:q4_1", max_tokens=16,
    messages=[{"role": "user", "content": "Say hello."}])
print(json.dumps({"models": models, "text": reply.choices[0].message.content,
                  "finish": reply.choices[0].finish_reason}))
"""

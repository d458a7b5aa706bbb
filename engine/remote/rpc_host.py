"""The child process that runs models split over RPC workers, reached as a remote engine.

ggml aborts the process that uses a worker when that worker disappears, so the split model
never runs in the window's or the API server's own process: ``RpcHost`` starts ``inglenook
serve --rpc-direct`` on a loopback port with a key of its own, and the window (through
``remote/catalogue``) and the API (through ``remote_proxy``) talk to it like to any remote
engine. A worker that vanishes ends the child; the answer in flight ends with a clear error,
the child's memory goes with it, and the next request starts a fresh child.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

from .remote import RemoteEndpoint
from .rpc import RpcError, Worker

log = logging.getLogger(__name__)

ENGINE_NAME = "rpc"  # its models appear as "rpc/<model id>"
CHILD_VARIABLE = "INGLENOOK_RPC_CHILD"  # set in the child: it must not start hosts of its own
PARENT_VARIABLE = "INGLENOOK_RPC_PARENT"  # the child exits when this process is gone
START_TIMEOUT_S = 120.0  # a child loads llama.cpp and attaches the workers before it listens
FAILURE_HINT = "the model is split over RPC workers; one of them may have stopped or become unreachable"
_URL_LINE = re.compile(r"Serving the OpenAI-compatible API at (\S+)")


class RpcHost:
    def __init__(self, workers: list[Worker], model: str | None = None, home: Path | None = None) -> None:
        self.workers = workers
        self.model = model
        self.home = home
        self._process: subprocess.Popen[str] | None = None
        self._endpoint: RemoteEndpoint | None = None
        self._lock = threading.Lock()
        self._errors: deque[str] = deque(maxlen=20)
        self.split = ""  # the child's "N layers here, a + b on the workers" once it has said it
        atexit.register(self.stop)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def endpoint(self) -> RemoteEndpoint:
        """The child's address, starting it (again) when it is not running."""
        with self._lock:
            if not self.alive or self._endpoint is None:
                if self._process is not None:
                    log.warning("the RPC host stopped (exit status %s); starting a fresh one", self._process.returncode)
                self._endpoint = self._start()
            return self._endpoint

    def _start(self) -> RemoteEndpoint:
        key = secrets.token_urlsafe(24)
        command = [sys.executable, "-m", "inglenook", "serve", "--rpc-direct", ",".join(w.endpoint for w in self.workers),
                   "--host", "127.0.0.1", "--port", "0"]
        if self.model:
            command += ["--model", self.model]
        env = dict(os.environ, INGLENOOK_API_KEY=key, **{CHILD_VARIABLE: "1", PARENT_VARIABLE: str(os.getpid())})
        if self.home is not None:
            env["INGLENOOK_HOME"] = str(self.home)
        self._errors.clear()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self._process = process
        threading.Thread(target=self._keep_errors, args=(process,), daemon=True, name="rpc-host-stderr").start()
        url = self._wait_for_url(process)
        log.info("RPC host (pid %d) serving at %s for workers %s", process.pid, url,
                 ", ".join(w.endpoint for w in self.workers))
        return RemoteEndpoint(ENGINE_NAME, url, key, failure_hint=FAILURE_HINT)

    def _wait_for_url(self, process: subprocess.Popen[str]) -> str:
        assert process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        for line in process.stdout:
            found = _URL_LINE.search(line)
            if found:
                threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
                return found.group(1)
            if time.monotonic() > deadline:
                break
        if process.poll() is None:
            process.wait(5)
        time.sleep(0.2)  # let the last error lines arrive
        reason = next((line for line in reversed(self._errors) if "error" in line.lower()), None)
        self.stop()
        raise RpcError(reason.split("error: ", 1)[-1] if reason else "the RPC host did not start")

    def _keep_errors(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            line = line.rstrip()
            if line.startswith("RPC split: "):
                self.split = line.removeprefix("RPC split: ")
            if line:
                self._errors.append(line)
                log.debug("rpc host: %s", line)

    def stop(self) -> None:
        process, self._process, self._endpoint = self._process, None, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def _drain(stream: object) -> None:
    for _ in stream:  # type: ignore[attr-defined]
        pass


def watch_parent() -> None:
    """In the child: exit when the process that started it is gone (no orphaned model)."""
    parent = os.environ.get(PARENT_VARIABLE)
    if not parent or not parent.isdigit():
        return

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != int(parent):
                log.warning("the process that started this RPC host is gone; exiting")
                os._exit(0)

    threading.Thread(target=watch, daemon=True, name="rpc-parent-watch").start()

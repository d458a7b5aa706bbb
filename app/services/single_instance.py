"""One Inglenook per user profile: a second launch hands its arguments to the first.

The first instance listens on a local socket (a Unix socket in the temp folder, a named pipe
on Windows) named after the data folder, so two profiles (``INGLENOOK_HOME``) never meet.
A second launch connects, sends one JSON line (``{"open": [paths…]}``) and waits for the
first to answer ``ok``: then the first raises its window and imports the ``.gguf`` files,
and the second exits. A first instance that accepts the connection but does not answer
within the timeout is hung (or stuck in a long modal wait): the second says so instead of
silently doing nothing, and does not start a second engine on the same files.
"""

from __future__ import annotations

import enum
import getpass
import hashlib
import json
import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal, SignalInstance
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

ANSWER_TIMEOUT_MS = 5000
CONNECT_TIMEOUT_MS = 1000
MAX_MESSAGE_BYTES = 64 * 1024  # a few thousand paths; more is not a launch


class Handoff(enum.Enum):
    NONE_RUNNING = "none running"  # nobody listens: this process is the first
    HANDED_OVER = "handed over"  # the first instance answered and took the arguments
    NOT_RESPONDING = "not responding"  # someone listens but did not answer in time


def server_name(data_dir: Path) -> str:
    """Short enough for a Unix socket path, distinct per user and per profile."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        user = "user"
    safe_user = "".join(c for c in user if c.isalnum())[:16] or "user"
    return f"inglenook-{safe_user}-{digest}"


def hand_over(name: str, paths: list[str], timeout_ms: int = ANSWER_TIMEOUT_MS) -> Handoff:
    """Give ``paths`` to a running instance, if there is one (blocking, before any window)."""
    socket = QLocalSocket()
    socket.connectToServer(name)
    if not socket.waitForConnected(CONNECT_TIMEOUT_MS):
        # ServerNotFound / ConnectionRefused: no one, or a stale socket file from a crash.
        log.debug("no running instance at %s: %s", name, socket.errorString())
        return Handoff.NONE_RUNNING
    socket.write(json.dumps({"open": paths}).encode() + b"\n")
    socket.flush()
    answered = bytearray()
    while b"\n" not in answered:
        if not socket.waitForReadyRead(timeout_ms):
            log.warning("the running instance at %s did not answer within %d ms", name, timeout_ms)
            socket.abort()
            return Handoff.NOT_RESPONDING
        answered += bytes(socket.readAll().data())
    socket.disconnectFromServer()
    return Handoff.HANDED_OVER if answered.strip() == b"ok" else Handoff.NOT_RESPONDING


class InstanceServer(QObject):
    """The first instance's end: emits ``opened`` with the paths each later launch sent."""

    opened = Signal(list)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.server = QLocalServer(self)
        # Only this user may connect (the socket is created 0700 on Unix).
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._accept)

    def listen(self) -> bool:
        """Start listening; a socket file left by a crashed instance is removed first (the
        caller asked ``hand_over`` already, so no live instance owns it)."""
        if self.server.listen(self.name):
            return True
        QLocalServer.removeServer(self.name)
        if self.server.listen(self.name):
            return True
        log.warning("cannot listen for later launches on %s: %s", self.name, self.server.errorString())
        return False

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            connection = self.server.nextPendingConnection()
            # The reader is the socket's child: Qt deletes both together, and a bound method
            # (not a lambda holding the socket) is what PySide disconnects safely on deletion.
            _LaunchReader(connection, self.opened)


class _LaunchReader(QObject):
    """Reads one later launch's line from ``connection``, answers, and closes it."""

    def __init__(self, connection: QLocalSocket, opened: SignalInstance) -> None:
        super().__init__(connection)
        self.connection = connection
        self.opened = opened
        self.buffer = bytearray()
        self.done = False
        connection.readyRead.connect(self.read)

    def read(self) -> None:
        if self.done:
            return
        self.buffer += bytes(self.connection.readAll().data())
        if len(self.buffer) > MAX_MESSAGE_BYTES:
            log.warning("dropped an oversized message from a later launch")
            self.finish(None)
            return
        if b"\n" not in self.buffer:
            return
        line = bytes(self.buffer).split(b"\n", 1)[0]
        try:
            message = json.loads(line)
            paths = [str(p) for p in message.get("open", [])]
        except (ValueError, AttributeError, TypeError):
            log.warning("ignored a malformed message from a later launch")
            self.finish(b"error\n")
            return
        self.finish(b"ok\n")
        self.opened.emit(paths)

    def finish(self, answer: bytes | None) -> None:
        self.done = True
        connection = self.connection
        if answer is not None:
            connection.write(answer)
            connection.flush()
        connection.disconnectFromServer()
        connection.deleteLater()

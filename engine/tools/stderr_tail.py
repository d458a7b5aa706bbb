"""The last words of a stdio MCP server: its stderr, read from a pipe as it comes, of which only
a bounded tail is kept.

A server may write without end (1 GiB before it exited took ``mcp test`` to 2.2 GB when the
whole temporary file was read back), so nothing here grows with what it writes: the pipe is
drained by a reader thread into a buffer of ``TAIL_BYTES``, and lines are cut to
``LINE_CHARS``. What the lines say is the server's own text, possibly with secrets in it: the
caller masks it and keeps it off the API (``connection.problem``).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from typing import TextIO

#: How much of the end of a server's stderr is kept.
TAIL_BYTES = 64 * 1024
#: A line longer than this is cut (one 5 MB line must not become a 5 MB error message).
LINE_CHARS = 300
_POLL_S = 0.2
_POSIX = sys.platform != "win32"


class StderrTail:
    """A pipe a child writes its stderr into (``writer``: give it as the process's stderr) and
    the bounded tail of what came through it."""

    def __init__(self, name: str) -> None:
        read_fd, write_fd = os.pipe()
        self._read_fd = read_fd
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._tail = bytearray()
        self._cut = False  # the tail's first line lost its beginning
        self._lock = threading.Lock()
        self._closed = threading.Event()
        if _POSIX:
            os.set_blocking(read_fd, False)
        self._thread = threading.Thread(target=self._pump, name=f"mcp-stderr-{name}", daemon=True)
        self._thread.start()

    def lines(self, count: int) -> list[str]:
        """The last ``count`` non-blank lines, each at most ``LINE_CHARS`` characters."""
        with self._lock:
            if _POSIX:
                self._drain()  # what the server wrote just before it exited, not yet pumped
            text = self._tail.decode("utf-8", "replace")
            cut = self._cut
        found = text.splitlines()
        if cut and found:
            found = found[1:]
        kept = [line.rstrip() for line in found if line.strip()][-count:]
        return [line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " […]" for line in kept]

    def close(self) -> None:
        """Close this end of the pipe's writing side and stop reading (the buffer stays)."""
        with contextlib.suppress(OSError):
            self.writer.close()
        self._closed.set()
        self._thread.join(2 * _POLL_S + 1)

    # -- the reader thread -----------------------------------------------------------------

    def _keep(self, data: bytes) -> None:
        self._tail += data
        if len(self._tail) > TAIL_BYTES:
            del self._tail[:len(self._tail) - TAIL_BYTES]
            self._cut = True

    def _drain(self) -> bool:
        """Read what is waiting (the lock held, the descriptor non-blocking); False at EOF."""
        while self._read_fd >= 0:
            try:
                data = os.read(self._read_fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            self._keep(data)
        return False

    def _pump(self) -> None:
        try:
            while not self._closed.is_set():
                if _POSIX:
                    ready, _, _ = select.select([self._read_fd], [], [], _POLL_S)
                    if ready:
                        with self._lock:
                            if not self._drain():
                                return
                else:  # Windows pipes cannot be polled: a blocking read, EOF when the server is gone
                    data = os.read(self._read_fd, 1 << 16)
                    if not data:
                        return
                    with self._lock:
                        self._keep(data)
        except OSError:
            return
        finally:
            with self._lock:  # a closed number may be reused: nobody reads it after this
                with contextlib.suppress(OSError):
                    os.close(self._read_fd)
                self._read_fd = -1

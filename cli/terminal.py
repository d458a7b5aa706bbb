"""Terminal output shared by the commands."""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from typing import TextIO, TypeVar

T = TypeVar("T")

# A progress line is redrawn at most this often: a GPU reads many prompt chunks a second.
REDRAW_EVERY_S = 0.1


# C0 and C1 control characters and DEL: an escape sequence in a file name (ESC ] … BEL) can
# retitle the terminal, hide text or, on some terminals, write to the clipboard.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with control characters shown as escapes (``\x1b``), never acted on."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns two spaces apart; the first row is the header. Cells are names
    from disks, servers and hubs: their control characters are shown, not sent."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


class ProgressLine:
    """One line of progress redrawn in place on a terminal and erased before the answer
    prints; nothing at all when the stream is not a terminal (a pipe, a log file), whose
    reader wants the answer alone. Drawn with carriage returns and spaces, which every
    terminal understands (no escape sequences)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = _is_terminal(stream)
        self._width = 0  # characters on the line now
        self._drawn_at = 0.0

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self._width and now - self._drawn_at < REDRAW_EVERY_S:
            return
        self._drawn_at = now
        text = text[: max(1, shutil.get_terminal_size().columns - 1)]  # a wrapped line cannot be erased
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def clear(self) -> None:
        if not self._width:
            return
        self.stream.write("\r" + " " * self._width + "\r")
        self.stream.flush()
        self._width = 0


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def run_interruptibly(work: Callable[[], T], cancel: threading.Event, name: str,
                      on_interrupt: Callable[[], None] = lambda: None) -> tuple[T | None, BaseException | None]:
    """Run ``work`` on a thread of its own while the main thread waits for Ctrl-C: a Ctrl-C
    sets ``cancel`` (``work`` stops at its next check), calls ``on_interrupt`` and waits for
    ``work`` to end. Returns what it returned (None if it raised) and what it raised (or None)."""
    value: list[T] = []
    raised: list[BaseException] = []

    def target() -> None:
        try:
            value.append(work())
        except BaseException as exc:  # noqa: BLE001 — handed to the main thread
            raised.append(exc)

    worker = threading.Thread(target=target, name=name, daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)  # a bounded wait, so Python delivers KeyboardInterrupt here
    except KeyboardInterrupt:
        cancel.set()
        on_interrupt()
        worker.join()
    return (value[0] if value else None), (raised[0] if raised else None)

"""Ending a ``llama_decode`` in the middle when the one sequence it serves is cancelled.

A prompt chunk of 512 tokens deep in a long conversation takes seconds on a two-core CPU,
and Python cannot interrupt the native call: Stop pressed during it used to act only when
the chunk ended (1.5–4.5 s on a busy machine). llama.cpp checks an abort callback between
the nodes of its compute graph; when it returns true, ``llama_decode`` returns 2 and removes
the aborted micro-batch's positions from the KV cache.

The callback is not a Python function: llama.cpp calls it after every graph node (about a
thousand per decode), and a ctypes trampoline there would take the GIL each time, from the
compute thread, while the window's thread wants it too. Instead the callback is the C
library's ``strlen``, given a two-byte buffer ``[flag, 0]``: it returns 0 while the flag is
0 and 1 once the flag is set, read as the callback's ``bool`` (the low byte of the return
register on every ABI that llama.cpp builds for). Setting the flag is one byte written from
the thread that cancels, through the cancel event's hook.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

from ..base import CancelEvent

log = logging.getLogger(__name__)

ABORTED = 2  # what llama_decode returns when the abort callback said stop


def _strlen_address() -> int | None:
    """The address of the C library's ``strlen``, or None where it cannot be found."""
    try:
        libc = ctypes.CDLL("msvcrt") if sys.platform == "win32" else ctypes.CDLL(ctypes.util.find_library("c") or None)
        address = ctypes.cast(libc.strlen, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    return int(address) if address else None


class DecodeAbort:
    """One context's abort flag, and the way a decode arms it with a sequence's cancel event."""

    def __init__(self, lib: Any, ctx: Any) -> None:
        self._flag = ctypes.create_string_buffer(2)  # [flag, 0]: strlen reads 0 or 1
        self._lock = threading.Lock()
        address = _strlen_address()
        self.active = address is not None
        if address is None:
            log.info("no C library strlen found: Stop acts between prompt chunks only")
            return
        # Kept on the object: llama.cpp holds the pointer for the context's life.
        self._callback = lib.ggml_abort_callback(address)
        lib.llama_set_abort_callback(ctx, self._callback, ctypes.cast(self._flag, ctypes.c_void_p))

    def _raise_flag(self) -> None:
        self._flag[0] = b"\x01"

    @contextlib.contextmanager
    def armed(self, cancel: object) -> Iterator[None]:
        """While inside, setting ``cancel`` (a ``CancelEvent``) makes the running decode end."""
        if not self.active or not isinstance(cancel, CancelEvent):
            yield
            return
        with self._lock:  # one decode at a time per context, but be sure the flag is ours
            self._flag[0] = b"\x00"
            remove = cancel.on_set(self._raise_flag)
            try:
                yield
            finally:
                remove()
                self._flag[0] = b"\x00"

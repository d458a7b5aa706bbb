"""Files a person names (``--image``, ``docs add``, ``mcp import``) are checked before a byte
is read: a regular file (not a device, a FIFO or a socket), no larger than the reader's limit,
then read with that bound.

A plain ``open()`` of a FIFO blocks until a writer appears, and ``read_bytes()`` of
``/dev/zero`` never ends (14 GB of memory before it was stopped); ``stat`` says 0 bytes for
both, so the size check alone lets them through. The file is therefore opened without
blocking and checked with ``fstat`` on the same descriptor (no window for a swap between the
check and the read), and the read stops one byte past the limit whatever the size said.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import InglenookError, InvalidRequest

_BLOCK = 1 << 20


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.0f} MB" if size >= 1024 * 1024 else f"{size:,} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


@contextmanager
def open_bounded(path: Path | str, limit: int, what: str = "the file",
                 error: type[InglenookError] = InvalidRequest) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """``path`` open for reading, with its ``fstat``, once it is known to be a regular file of
    at most ``limit`` bytes; else ``error`` saying which (an OSError's reason included)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(Path(path).expanduser(), flags)
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise error(f"{what} is {_kind(status.st_mode)}, not a file that can be read")
        if status.st_size > limit:
            raise error(f"{what} is {_megabytes(status.st_size)}; at most {_megabytes(limit)} is accepted here")
        if getattr(os, "O_NONBLOCK", 0):  # opened non-blocking (POSIX): reads of a regular file block as usual
            os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle, status


def read_bounded(path: Path | str, limit: int, what: str = "the file",
                 error: type[InglenookError] = InvalidRequest) -> bytes:
    """The bytes of regular file ``path``, at most ``limit`` of them (a file that grew past the
    limit since its ``fstat`` is refused too)."""
    with open_bounded(path, limit, what, error) as (handle, _status):
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise error(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(f"{what} is over {_megabytes(limit)}; at most {_megabytes(limit)} is accepted here")
    return data


def blocks_bounded(handle: BinaryIO, limit: int, what: str = "the file",
                   error: type[InglenookError] = InvalidRequest) -> Iterator[bytes]:
    """The blocks of an open file, ending with ``error`` once more than ``limit`` bytes came."""
    seen = 0
    while block := handle.read(_BLOCK):
        seen += len(block)
        if seen > limit:
            raise error(f"{what} is over {_megabytes(limit)}; at most {_megabytes(limit)} is accepted here")
        yield block

"""Crash-safe file writes: temporary name in the same directory, fsync, rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_writer(target: Path) -> Iterator[BinaryIO]:
    """Yield a binary file whose contents replace ``target`` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_directory(target.parent)


def atomic_write_bytes(target: Path, data: bytes) -> None:
    with atomic_writer(target) as handle:
        handle.write(data)


def atomic_write_text(target: Path, text: str) -> None:
    atomic_write_bytes(target, text.encode("utf-8"))


def _fsync_directory(directory: Path) -> None:
    # The rename is only durable once the directory entry is on disk (POSIX); Windows
    # cannot open directories, and does not need it.
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Make renames into ``directory`` durable (a no-op where directories cannot be fsynced)."""
    _fsync_directory(directory)

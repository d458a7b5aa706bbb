"""Crash-safe file writes: temporary name in the same directory, fsync, rename."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

_TEMP_PREFIX, _TEMP_SUFFIX = ".", ".tmp"


@contextlib.contextmanager
def atomic_writer(target: Path) -> Iterator[BinaryIO]:
    """Yield a binary file whose contents replace ``target`` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f"{_TEMP_PREFIX}{target.name}.", suffix=_TEMP_SUFFIX, dir=target.parent)
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


def remove_stale_temporaries(directory: Path, older_than_s: float = 3600.0) -> int:
    """Delete temporaries that ``atomic_writer`` left when its process was killed mid-write.

    They never carry a real file's name, so nothing reads them; this only gives their space
    back. Only ones untouched for ``older_than_s`` go, so another process's write in
    progress is left alone. Returns how many were deleted.
    """
    removed = 0
    cutoff = time.time() - older_than_s
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not (entry.name.startswith(_TEMP_PREFIX) and entry.name.endswith(_TEMP_SUFFIX)):
            continue
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
        except OSError as exc:
            log.debug("could not remove %s: %s", entry.name, exc)
    if removed:
        log.info("removed %d interrupted write(s) from %s", removed, Path(directory).name)
    return removed

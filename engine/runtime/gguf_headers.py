"""GGUF headers by model version, parsed once.

Before a load the scheduler estimates the model's memory and the engine picks its automatic
context; both need the header, and so does the memory count after the load. Parsing one
walks the whole vocabulary and its merges (0.03 s for a 49k-token vocabulary, more for
larger ones), so it is done once for all of them. A record's fingerprint names the file's
content as the registry last saw it (a changed file gets a new fingerprint at the next
scan), so between scans an estimate may use the older header. A load validates the file as
it is right before llama.cpp opens it (``checked_header``): the parsed header serves only
while the file is the very one parsed, unchanged since, else it is parsed again.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from ..base import GGUFInfo, ModelRecord, read_gguf

_KEEP = 4  # a few models' headers; each holds its vocabulary's metadata
# (path, fingerprint) -> the header, and the file's identity when it was parsed (see _identity).
_headers: OrderedDict[tuple[str, str], tuple[GGUFInfo, tuple[int, ...] | None]] = OrderedDict()
_lock = threading.Lock()


def header_of(record: ModelRecord) -> GGUFInfo:
    """The parsed header of ``record``'s file (raises as ``read_gguf`` does; failures are not kept)."""
    key = (str(record.path), record.fingerprint)
    with _lock:
        found = _headers.get(key)
        if found is not None:
            _headers.move_to_end(key)
            return found[0]
    return _parse(record, key)


def checked_header(record: ModelRecord) -> GGUFInfo:
    """``record``'s header as its file is now, for a load to validate the file by: the one
    parsed before when the file is still the same one, unchanged since (inode, size and
    modification time), else the file parsed afresh. The scheduler's estimate parses a model
    moments before it loads, and a second parse of the same bytes was a start-up cost of every
    load (issue 27; 0.03 s for SmolLM2's vocabulary, several times that for gemma-3's)."""
    key = (str(record.path), record.fingerprint)
    now = _identity(record.path)
    with _lock:
        found = _headers.get(key)
    if found is not None and now is not None and found[1] == now:
        return found[0]
    return _parse(record, key)


def _parse(record: ModelRecord, key: tuple[str, str]) -> GGUFInfo:
    identity = _identity(record.path)  # before the read: a change during it shows as a mismatch
    info = read_gguf(record.path)
    with _lock:
        _headers[key] = (info, identity)
        _headers.move_to_end(key)
        while len(_headers) > _KEEP:
            _headers.popitem(last=False)
    return info


def _identity(path: Path) -> tuple[int, ...] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None  # read_gguf says what is wrong with it
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)

"""GGUF headers by model version, parsed once.

Before a load the scheduler estimates the model's memory and the engine picks its automatic
context; both need the header, and so does the memory count after the load. Parsing one
walks the whole vocabulary and its merges (0.03 s for a 49k-token vocabulary, more for
larger ones), so it is done once for all of them. A record's fingerprint names the file's
content as the registry last saw it (a changed file gets a new fingerprint at the next
scan), so between scans an estimate may use the older header; ``LoadedModel`` still reads
the file itself, and that read is the validation right before llama.cpp opens it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .gguf import GGUFInfo, read_gguf
from .registry import ModelRecord

_KEEP = 4  # a few models' headers; each holds its vocabulary's metadata
_headers: OrderedDict[tuple[str, str], GGUFInfo] = OrderedDict()
_lock = threading.Lock()


def header_of(record: ModelRecord) -> GGUFInfo:
    """The parsed header of ``record``'s file (raises as ``read_gguf`` does; failures are not kept)."""
    key = (str(record.path), record.fingerprint)
    with _lock:
        found = _headers.get(key)
        if found is not None:
            _headers.move_to_end(key)
            return found
    info = read_gguf(record.path)
    with _lock:
        _headers[key] = info
        while len(_headers) > _KEEP:
            _headers.popitem(last=False)
    return info

"""A GGUF's vocabulary, checked for what llama.cpp would abort the process on.

llama.cpp maps each token's text to its id and then asserts that no two tokens share a text
(``GGML_ASSERT(id_to_token.size() == token_to_id.size())`` in ``llama-vocab.cpp``): a file
with a duplicate token ends the whole process, the app and every chat in it, with SIGABRT.
The header parse (``gguf.py``) walks over the vocabulary without reading it, to stay cheap for
listing a folder; this walk reads it once, right before a load, and says which tokens clash.
Empty texts are not clashes: llama.cpp names each one ``[EMPTY_<id>]``.
"""

from __future__ import annotations

import os
import stat
import struct

from .errors import ModelLoadError
from .gguf import GGUFInfo, vocabulary_start

_U64 = struct.Struct("<Q")
_BLOCK = 1 << 20


def check_vocabulary(info: GGUFInfo) -> None:
    """``ModelLoadError`` naming two tokens of ``info``'s file with the same text, if any."""
    if info.vocabulary_checked:
        return
    start, count = vocabulary_start(info)
    kept = info.metadata.get("tokenizer.ggml.tokens")
    if start < 0 and isinstance(kept, list):  # a short vocabulary, kept whole by the parse
        _check_kept(info, [str(t).encode() for t in kept])
    elif start >= 0 and count:
        _check_file(info, start, count)
    info.vocabulary_checked = True


def _clash(info: GGUFInfo, text: bytes, first: int, second: int) -> ModelLoadError:
    shown = text[:40].decode("utf-8", "replace")
    return ModelLoadError(f"{info.path.name} cannot be loaded: its vocabulary has the token {shown!r} twice "
                          f"(ids {first} and {second}), which would end llama.cpp and this program")


def _check_kept(info: GGUFInfo, texts: list[bytes]) -> None:
    seen: dict[bytes, int] = {}
    for token_id, text in enumerate(texts):
        first = seen.setdefault(text, token_id) if text else token_id
        if first != token_id:
            raise _clash(info, text, first, token_id)


def _check_file(info: GGUFInfo, start: int, count: int) -> None:
    seen: dict[bytes, int] = {}
    try:
        fd = os.open(info.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb", buffering=_BLOCK) as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ModelLoadError(f"not a file: {info.path}")
            handle.seek(start)
            for token_id in range(count):
                head = handle.read(8)
                if len(head) < 8:
                    raise ModelLoadError(f"{info.path.name} is truncated inside its vocabulary")
                text = handle.read(_U64.unpack(head)[0])  # the parse checked each length already
                if not text:
                    continue
                first = seen.setdefault(text, token_id)
                if first != token_id:
                    raise _clash(info, text, first, token_id)
    except OSError as exc:
        raise ModelLoadError(f"cannot read {info.path.name}: {exc.strerror or exc}") from exc

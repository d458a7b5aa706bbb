"""Inglenook's state file: one saved llama.cpp sequence state and the exact tokens it covers.

Layout (little-endian)::

    fixed part   magic "\\x89INGKV\\r\\n" · u16 format version · u16 reserved · u32 meta length
                 · u32 token count · u64 payload size · u32 CRC-32 of meta + tokens
                 · u32 CRC-32 of the payload
    meta         UTF-8 JSON: state key (model fingerprint | KV layout | llama.cpp build), kind,
                 conversation id, prompt token count, model id, creation time
    tokens       token count × int32
    payload      the bytes of llama_state_seq_get_data

The header (fixed part, meta, tokens) can be read and checked without the payload, which
is how the cache builds its index at start-up. The magic's \\r\\n catches text-mode
mangling; the two CRCs catch truncation and bit rot. Nothing here is pickled: the meta is
JSON, the rest plain numbers.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from io import BufferedReader
from typing import Any, BinaryIO

import numpy as np

from ..base import StateFileInvalid, atomic_writer

MAGIC = b"\x89INGKV\r\n"
FORMAT_VERSION = 1
_FIXED = struct.Struct("<8sHHIIQII")
_MAX_META = 64 * 1024
_MAX_TOKENS = 1 << 24  # far above any context; bounds what a damaged count can make us read
SUFFIX = ".ilstate"


@dataclass
class StateHeader:
    state_key: str  # KvStates.state_key(): fingerprint | KV layout | llama.cpp build
    kind: str  # "conversation" | "prefix"
    tokens: list[int]
    conversation_id: int | None = None
    prompt_tokens: int = 0  # how many of ``tokens`` were the prompt (the rest were generated)
    model_id: str = ""
    created_at: float = field(default_factory=time.time)
    payload_size: int = 0
    payload_crc: int = 0
    version: int = FORMAT_VERSION
    # A documents block's prefix entry: the documents' sha256 (an optional meta key, so
    # files without it still read as format 1).
    documents: tuple[str, ...] = ()

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def model_fingerprint(self) -> str:
        return self.state_key.split("|", 1)[0]

    def meta(self) -> dict[str, Any]:
        fingerprint, _, rest = self.state_key.partition("|")
        kv_layout, _, build = rest.partition("|")
        return {
            "state_key": self.state_key,
            "model_fingerprint": fingerprint,
            "kv_layout": kv_layout,
            "llama_build": build,
            "kind": self.kind,
            "conversation_id": self.conversation_id,
            "prompt_tokens": self.prompt_tokens,
            "model_id": self.model_id,
            "created_at": self.created_at,
            **({"documents": list(self.documents)} if self.documents else {}),
        }


def write_state_file(path: Path, header: StateHeader, payload: bytes | bytearray | np.ndarray) -> int:
    """Write atomically (temporary file, fsync, rename); returns the file's size in bytes."""
    tokens = np.asarray(header.tokens, dtype="<i4").tobytes()
    meta = json.dumps(header.meta(), separators=(",", ":")).encode("utf-8")
    header_crc = zlib.crc32(tokens, zlib.crc32(meta))
    # numpy's stubs do not declare the buffer protocol on ndarray; its .data is the same bytes.
    payload_bytes = payload.data if isinstance(payload, np.ndarray) else payload
    payload_crc = zlib.crc32(payload_bytes)
    fixed = _FIXED.pack(MAGIC, FORMAT_VERSION, 0, len(meta), len(header.tokens), len(payload), header_crc, payload_crc)
    with atomic_writer(path) as handle:
        handle.write(fixed)
        handle.write(meta)
        handle.write(tokens)
        handle.write(payload_bytes)
    header.payload_size, header.payload_crc = len(payload), payload_crc
    return _FIXED.size + len(meta) + len(tokens) + len(payload)


def read_header(path: Path) -> StateHeader:
    """Read and check everything but the payload; StateFileInvalid when anything is off."""
    try:
        with open_regular_file(path) as handle:
            header, _ = _read_header(handle, path)
    except OSError as exc:
        raise StateFileInvalid(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    return header


def read_state_file(path: Path, expected_key: str | None = None) -> tuple[StateHeader, np.ndarray]:
    """Read a whole state file and verify both checksums (and the state key, when given)."""
    try:
        with open_regular_file(path) as handle:
            header, offset = _read_header(handle, path)
            if expected_key is not None and header.state_key != expected_key:
                raise StateFileInvalid(f"{path.name} was saved by another model, KV layout or llama.cpp build")
            file_size = handle.seek(0, 2)
            if file_size != offset + header.payload_size:
                raise StateFileInvalid(
                    f"{path.name} is {file_size} bytes, expected {offset + header.payload_size} (truncated or padded)"
                )
            handle.seek(offset)
            payload = np.empty(header.payload_size, dtype=np.uint8)  # no zero-fill: it is overwritten
            if handle.readinto(payload.data) != header.payload_size:
                raise StateFileInvalid(f"{path.name} is truncated")
    except OSError as exc:
        raise StateFileInvalid(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    if zlib.crc32(payload.data) != header.payload_crc:
        raise StateFileInvalid(f"{path.name} fails its payload checksum")
    return header, payload


def open_regular_file(path: Path) -> BufferedReader:
    """Open ``path`` for reading only if it is a regular file: never a symlink, FIFO or device.

    A plain ``open()`` on a FIFO blocks until a writer appears, on the scheduler's thread, so
    the file is opened without following links and without blocking, and checked with fstat
    before a byte is read. OSError (ELOOP for a symlink) and StateFileInvalid reach the caller.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise StateFileInvalid(f"{path.name} is not a regular file")
        # O_NONBLOCK means nothing for a regular file's reads; the handle is an ordinary one.
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_header(handle: BinaryIO, path: Path) -> tuple[StateHeader, int]:
    fixed = handle.read(_FIXED.size)
    if len(fixed) < _FIXED.size:
        raise StateFileInvalid(f"{path.name} is too short to be a state file")
    magic, version, _reserved, meta_len, n_tokens, payload_size, header_crc, payload_crc = _FIXED.unpack(fixed)
    if magic != MAGIC:
        raise StateFileInvalid(f"{path.name} is not an Inglenook state file")
    if version != FORMAT_VERSION:
        raise StateFileInvalid(f"{path.name} has format version {version}; this build reads {FORMAT_VERSION}")
    if meta_len > _MAX_META or n_tokens > _MAX_TOKENS:
        raise StateFileInvalid(f"{path.name} has an implausible header")
    meta_bytes = handle.read(meta_len)
    token_bytes = handle.read(4 * n_tokens)
    if len(meta_bytes) != meta_len or len(token_bytes) != 4 * n_tokens:
        raise StateFileInvalid(f"{path.name} is truncated")
    if zlib.crc32(token_bytes, zlib.crc32(meta_bytes)) != header_crc:
        raise StateFileInvalid(f"{path.name} fails its header checksum")
    try:
        meta = json.loads(meta_bytes)
        if not isinstance(meta, dict):
            raise TypeError("the meta is not an object")
        conversation_id = meta.get("conversation_id")
        if conversation_id is not None and (type(conversation_id) is not int or conversation_id < 0):
            raise TypeError("conversation_id is not a number")
        header = StateHeader(
            state_key=str(meta["state_key"]),
            kind=str(meta["kind"]),
            tokens=np.frombuffer(token_bytes, dtype="<i4").tolist(),
            conversation_id=conversation_id,
            prompt_tokens=int(meta.get("prompt_tokens") or 0),
            model_id=str(meta.get("model_id") or ""),
            created_at=float(meta.get("created_at") or 0.0),
            payload_size=payload_size,
            payload_crc=payload_crc,
            version=version,
            documents=tuple(str(d) for d in meta.get("documents") or ()),
        )
    # RecursionError: deeply nested JSON; OverflowError: int(inf). Both only mean "damaged".
    except (ValueError, KeyError, TypeError, RecursionError, OverflowError) as exc:
        raise StateFileInvalid(f"{path.name} has an unreadable header") from exc
    return header, _FIXED.size + meta_len + 4 * n_tokens

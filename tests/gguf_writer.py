"""Write small synthetic GGUF files for tests of the header reader and the registry."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

_U32, _I32, _F32, _BOOL, _STRING, _ARRAY, _U64 = 4, 5, 6, 7, 8, 9, 10


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _value(value: Any) -> tuple[int, bytes]:
    if isinstance(value, bool):
        return _BOOL, struct.pack("<?", value)
    if isinstance(value, int):
        return _U32, struct.pack("<I", value)
    if isinstance(value, float):
        return _F32, struct.pack("<f", value)
    if isinstance(value, str):
        return _STRING, _string(value)
    if isinstance(value, list):
        item_type, _ = _value(value[0])
        body = b"".join(_value(v)[1] for v in value)
        return _ARRAY, struct.pack("<IQ", item_type, len(value)) + body
    raise TypeError(value)


def write_gguf(
    path: Path,
    metadata: dict[str, Any] | None = None,
    tensors: list[tuple[str, tuple[int, ...]]] | None = None,
    version: int = 3,
    magic: bytes = b"GGUF",
    truncate_to: int | None = None,
) -> Path:
    """A valid GGUF (F32 tensors filled with zeros) unless told to break it."""
    metadata = {
        "general.architecture": "llama",
        "general.name": "Tiny Test",
        "general.file_type": 0,
        "llama.context_length": 256,
        "llama.block_count": 1,
        **(metadata or {}),
    }
    tensors = tensors if tensors is not None else [("token_embd.weight", (8, 4)), ("output.weight", (8, 4))]
    header = magic + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, value in metadata.items():
        value_type, body = _value(value)
        header += _string(key) + struct.pack("<I", value_type) + body
    offset = 0
    infos = b""
    for name, shape in tensors:
        infos += _string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        infos += struct.pack("<IQ", 0, offset)  # type F32
        size = 4
        for d in shape:
            size *= d
        offset += (size + 31) // 32 * 32
    blob = header + infos
    blob += b"\0" * ((-len(blob)) % 32)
    blob += b"\0" * offset
    if truncate_to is not None:
        blob = blob[:truncate_to]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    return path

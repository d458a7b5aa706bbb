"""A model as the registry records it: one GGUF file's id, path, shape and fingerprint.

Jobs, the runtime and the scheduler all name a model by its ``ModelRecord``; the registry
(``models/registry.py``) finds the files and keeps the records in the store.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ModelLoadError
from .gguf import GGUFInfo

# Metadata worth keeping in the database (the rest is re-read from the file when needed).
_KEPT_KEYS = ("general.name", "general.basename", "general.size_label", "general.finetune", "general.license", "general.organization")


@dataclass
class ModelRecord:
    id: str
    path: Path
    name: str
    architecture: str
    quantization: str
    parameter_count: int
    context_length: int | None
    size_bytes: int
    fingerprint: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)
    mtime: float = 0.0
    added_at: float = 0.0
    #: Why the last attempt to load it failed (None: usable, or never tried).
    problem: str | None = None

    @property
    def usable(self) -> bool:
        return self.problem is None

    @property
    def base_id(self) -> str:
        return self.id.split(":", 1)[0]

    @classmethod
    def describe(
        cls, info: GGUFInfo, model_id: str, source: str, name: str | None = None, added_at: float = 0.0
    ) -> "ModelRecord":
        """A record for the file ``info`` was read from (fingerprinted, not yet registered)."""
        path = info.path
        return cls(
            id=model_id,
            path=path,
            name=name or path.name.removesuffix(".gguf"),
            architecture=info.architecture,
            quantization=info.quantization,
            parameter_count=info.parameter_count,
            context_length=info.context_length,
            size_bytes=info.file_size,
            fingerprint=fingerprint_file(path, info.file_size),
            source=source,
            metadata={k: info.metadata[k] for k in _KEPT_KEYS if k in info.metadata}
            | {"bits_per_weight": round(info.bits_per_weight, 3), "block_count": info.block_count},
            mtime=path.stat().st_mtime,
            added_at=added_at,
        )

    def to_row(self) -> dict[str, Any]:
        return {
            "id": self.id, "path": str(self.path), "name": self.name,
            "architecture": self.architecture, "quantization": self.quantization,
            "parameter_count": self.parameter_count, "context_length": self.context_length,
            "size_bytes": self.size_bytes, "mtime": self.mtime, "fingerprint": self.fingerprint,
            "source": self.source, "metadata": json.dumps(self.metadata), "added_at": self.added_at,
            "problem": self.problem,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "ModelRecord":
        return cls(
            id=row["id"], path=Path(row["path"]), name=row["name"], architecture=row["architecture"],
            quantization=row["quantization"], parameter_count=row["parameter_count"] or 0,
            context_length=row["context_length"], size_bytes=row["size_bytes"] or 0,
            fingerprint=row["fingerprint"], source=row["source"],
            metadata=json.loads(row["metadata"] or "{}"), mtime=row["mtime"] or 0.0,
            added_at=row["added_at"] or 0.0, problem=row.get("problem"),
        )


def fingerprint_file(path: Path, size: int) -> str:
    """A content fingerprint that reads a few MB, not the whole file.

    Hashes the size, the header region, the tail and 16 evenly spaced samples: any
    re-quantization or different file changes it, and it costs the same for 100 MB or
    100 GB. Full sha256 verification is the downloader's job.
    """
    digest = hashlib.sha256(str(size).encode())
    sample = 64 * 1024
    try:
        with path.open("rb") as handle:
            digest.update(handle.read(4 * 1024 * 1024))
            for i in range(16):
                handle.seek(size * i // 16)
                digest.update(handle.read(sample))
            handle.seek(max(0, size - 1024 * 1024))
            digest.update(handle.read(1024 * 1024))
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    return digest.hexdigest()[:32]

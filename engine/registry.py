"""The local model registry: which GGUF files Inglenook can run, and what they are.

Models come from the models directory (scanned), files the user registered in place
(imported, never copied), and the bundled starter model. Each gets a stable,
human-readable id such as ``smollm2-135m-instruct:q4_1`` and a content fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ModelLoadError, ModelNotFound
from .gguf import FILE_TYPES, GGUFInfo, read_gguf
from .paths import Paths
from .starter import find_starter_model
from .store import Store

log = logging.getLogger(__name__)

_QUANT_NAMES = sorted({*FILE_TYPES.values(), "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "Q3_K", "Q4_K", "Q5_K"}, key=len, reverse=True)
_QUANT_SUFFIX = re.compile(r"[-_. ](" + "|".join(re.escape(q) for q in _QUANT_NAMES) + r")$", re.IGNORECASE)
STARTER_REMOVED_KEY = "starter_removed"
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})$")

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
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "ModelRecord":
        return cls(
            id=row["id"], path=Path(row["path"]), name=row["name"], architecture=row["architecture"],
            quantization=row["quantization"], parameter_count=row["parameter_count"] or 0,
            context_length=row["context_length"], size_bytes=row["size_bytes"] or 0,
            fingerprint=row["fingerprint"], source=row["source"],
            metadata=json.loads(row["metadata"] or "{}"), mtime=row["mtime"] or 0.0,
            added_at=row["added_at"] or 0.0,
        )


def model_id_for(path: Path, info: GGUFInfo) -> str:
    """``<file stem without quant and shard suffix, slugged>:<quant>``."""
    stem = _SHARD.sub("", path.name.removesuffix(".gguf"))
    stem = _QUANT_SUFFIX.sub("", stem)
    base = re.sub(r"[^a-z0-9.]+", "-", stem.lower()).strip("-.") or info.architecture
    return f"{base}:{info.quantization.lower()}"


def fingerprint_file(path: Path, size: int) -> str:
    """A content fingerprint that reads a few MB, not the whole file.

    Hashes the size, the header region, the tail and 16 evenly spaced samples: any
    re-quantization or different file changes it, and it costs the same for 100 MB or
    100 GB. Full sha256 verification is the downloader's job.
    """
    digest = hashlib.sha256(str(size).encode())
    sample = 64 * 1024
    with path.open("rb") as handle:
        digest.update(handle.read(4 * 1024 * 1024))
        for i in range(16):
            handle.seek(size * i // 16)
            digest.update(handle.read(sample))
        handle.seek(max(0, size - 1024 * 1024))
        digest.update(handle.read())
    return digest.hexdigest()[:32]


def is_secondary_shard(path: Path) -> bool:
    match = _SHARD.search(path.name.removesuffix(".gguf"))
    return bool(match and match.group(1) != "00001")


class ModelRegistry:
    """Lists, registers, resolves and removes local models. Thread-safe."""

    def __init__(self, store: Store, paths: Paths, extra_dirs: list[str] | None = None) -> None:
        self.store = store
        self.paths = paths
        self.extra_dirs = [Path(d) for d in extra_dirs or []]
        self._lock = threading.RLock()

    # -- discovery ------------------------------------------------------------------

    def refresh(self) -> list[ModelRecord]:
        """Register the starter model and every GGUF in the scanned folders; drop vanished files."""
        with self._lock:
            starter = find_starter_model()
            # A user who removed the starter model does not want it back on every start.
            if starter is not None and not self.store.get_setting(STARTER_REMOVED_KEY, False):
                self._try_register(starter, "starter")
            for folder in [self.paths.models, *self.extra_dirs]:
                for path in sorted(folder.rglob("*.gguf")) if folder.is_dir() else []:
                    if self.paths.downloads in path.parents or is_secondary_shard(path):
                        continue
                    self._try_register(path, "scan")
            for record in self.list():
                if not record.path.is_file():
                    log.info("model file of %s is gone; removing it from the registry", record.id)
                    self.store.delete_model(record.id)
            return self.list()

    def _try_register(self, path: Path, source: str) -> None:
        try:
            self.register_file(path, source=source)
        except ModelLoadError as exc:
            log.warning("skipping %s: %s", path, exc)

    def register_file(self, path: Path | str, source: str = "import", display_name: str | None = None) -> ModelRecord:
        """Add a GGUF file in place (no copy). Validates the header first.

        ``display_name`` names a file whose own name says nothing (an Ollama blob is
        ``sha256-…``); the id is then derived from it instead of the file name."""
        path = Path(path).expanduser().absolute()
        with self._lock:
            stat = path.stat() if path.is_file() else None
            existing = self._by_path(path)
            if existing and stat and existing.size_bytes == stat.st_size and existing.mtime == stat.st_mtime:
                return existing
            info = read_gguf(path)
            named = Path(f"{display_name}.gguf") if display_name else path
            record = ModelRecord.describe(
                info,
                model_id=self._unique_id(model_id_for(named, info), path),
                source=existing.source if existing and source == "scan" else source,
                name=named.name.removesuffix(".gguf"),
                added_at=existing.added_at if existing else time.time(),
            )
            self.store.upsert_model(record.to_row())
            log.info("registered model %s (%s)", record.id, path.name)
            return record

    def _by_path(self, path: Path) -> ModelRecord | None:
        for record in self.list():
            if record.path == path:
                return record
        return None

    def _unique_id(self, wanted: str, path: Path) -> str:
        taken = {r.id: r.path for r in self.list()}
        candidate, n = wanted, 2
        while candidate in taken and taken[candidate] != path:
            base, _, quant = wanted.partition(":")
            candidate = f"{base}-{n}:{quant}"
            n += 1
        return candidate

    # -- queries --------------------------------------------------------------------

    def list(self) -> list[ModelRecord]:
        return [ModelRecord.from_row(r) for r in self.store.model_rows()]

    def get(self, model_id: str) -> ModelRecord:
        for record in self.list():
            if record.id == model_id:
                return record
        raise ModelNotFound(f"no local model named {model_id!r}")

    def resolve(self, name: str) -> ModelRecord:
        """Find a model by id, by id without the quant (when unambiguous), or by file path."""
        records = self.list()
        wanted = name.strip().lower()
        for record in records:
            if record.id == wanted:
                return record
        same_base = [r for r in records if r.base_id == wanted]
        if not same_base:
            # "smollm2" finds "smollm2-135m-instruct:q4_1" when no other model starts that way.
            same_base = [r for r in records if r.id.startswith(wanted + "-")]
        if len(same_base) == 1:
            return same_base[0]
        if len(same_base) > 1:
            options = ", ".join(r.id for r in same_base)
            raise ModelNotFound(f"{name!r} matches several models: {options}")
        if name.endswith(".gguf") or "/" in name or "\\" in name:
            path = Path(name).expanduser()
            if not path.exists():
                raise ModelLoadError(f"model file not found: {name}")
            return self.register_file(path)
        raise ModelNotFound(f"no local model named {name!r}; `inglenook list` shows the installed ones")

    def remove(self, model_id: str, delete_file: bool | None = None) -> ModelRecord:
        """Forget a model. Files inside our models directory are deleted; imported files are kept
        unless ``delete_file`` is True; the starter model's file is never deleted."""
        with self._lock:
            record = self.resolve(model_id)
            inside = self.paths.models in record.path.parents
            if delete_file is None:
                delete_file = inside
            if record.source == "starter":
                self.store.set_setting(STARTER_REMOVED_KEY, True)
            elif delete_file:
                record.path.unlink(missing_ok=True)
            self.store.delete_model(record.id)
            return record

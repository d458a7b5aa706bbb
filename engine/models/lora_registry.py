"""Imported LoRA adapters: which GGUF adapters Inglenook knows, and resolving a job's choice.

Adapters are used in place, like imported models (nothing is copied): a file, every adapter
under a folder, or the adapters of a Hugging Face repo (``lora_hub``). Each gets an id from
its file name (``pirate-lora``) and a content fingerprint; the table is ``lora_adapters``
(migration ``m008``). A file that is not a LoRA GGUF is refused with the reason.

Which adapter fits which model is decided per use (``lora.check_compatible``): an adapter
names its base architecture, and its tensor shapes must match the model's.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import (
    AdapterError, AdapterHeader, GGUFInfo, LoraSet, LoraUse, ModelLoadError, ModelRecord, adapter_header,
    check_compatible, fingerprint_file, read_gguf,
)
from ..runtime import header_of
from ..store import Store, table_named

log = logging.getLogger(__name__)

_TABLE = "lora_adapters"


@dataclass(frozen=True)
class AdapterRecord:
    id: str
    path: Path
    architecture: str
    base_model: str | None
    rank: int
    alpha: float
    tensors: int
    size_bytes: int
    fingerprint: str
    source: str = "import"
    mtime: float = 0.0
    added_at: float = 0.0

    def to_row(self) -> dict[str, Any]:
        return {"id": self.id, "path": str(self.path), "architecture": self.architecture,
                "base_model": self.base_model, "rank": self.rank, "alpha": self.alpha, "tensors": self.tensors,
                "size_bytes": self.size_bytes, "mtime": self.mtime, "fingerprint": self.fingerprint,
                "source": self.source, "added_at": self.added_at}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "AdapterRecord":
        return cls(id=row["id"], path=Path(row["path"]), architecture=row["architecture"] or "",
                   base_model=row["base_model"], rank=row["rank"] or 0, alpha=row["alpha"] or 0.0,
                   tensors=row["tensors"] or 0, size_bytes=row["size_bytes"] or 0,
                   fingerprint=row["fingerprint"], source=row["source"] or "import",
                   mtime=row["mtime"] or 0.0, added_at=row["added_at"] or 0.0)


@dataclass
class AdapterImport:
    imported: list[AdapterRecord] = field(default_factory=list)
    already: list[AdapterRecord] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (path, reason)


def adapter_id_for(path: Path) -> str:
    stem = path.name.removesuffix(".gguf")
    return re.sub(r"[^a-z0-9.]+", "-", stem.lower()).strip("-.") or "adapter"


def is_adapter(info: GGUFInfo) -> bool:
    """Whether a GGUF header is an adapter's (the model registry leaves these alone)."""
    return info.metadata.get("general.type") == "adapter"


class AdapterRegistry:
    """Lists, imports, resolves and forgets adapters. Thread-safe."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.RLock()

    # -- queries ----------------------------------------------------------------------

    def list(self) -> list[AdapterRecord]:
        """Every adapter, oldest first: the order (and index) ``GET /lora-adapters`` shows."""
        with self.store.reading() as conn:
            cursor = conn.execute(f"SELECT * FROM {_TABLE} ORDER BY added_at, id")
            names = [d[0] for d in cursor.description]
            return [AdapterRecord.from_row(dict(zip(names, row))) for row in cursor.fetchall()]

    def get(self, wanted: str | int) -> AdapterRecord:
        """By id, else by index in ``list()`` (llama-server's numeric ids); ``AdapterError`` if unknown."""
        records = self.list()
        if isinstance(wanted, str):
            found = next((r for r in records if r.id == wanted.strip().lower()), None)
            if found is not None:
                return found
            if wanted.strip().isdigit():  # "1" from a command line: the index, when no id is "1"
                wanted = int(wanted)
        if isinstance(wanted, int) and not isinstance(wanted, bool) and 0 <= wanted < len(records):
            return records[wanted]
        known = ", ".join(f"{i}: {r.id}" for i, r in enumerate(records)) or "none are imported"
        raise AdapterError(f"there is no LoRA adapter {wanted!r} (adapters: {known})")

    # -- importing --------------------------------------------------------------------

    def register_file(self, path: Path | str, source: str = "import") -> AdapterRecord:
        """Add one adapter file in place; ``AdapterError`` when it is not a LoRA GGUF."""
        path = Path(path).expanduser().absolute()
        try:
            info = read_gguf(path)
        except ModelLoadError as exc:
            raise AdapterError(f"{path.name} is not a LoRA adapter: {exc}") from None
        header = adapter_header(info, path.name)
        with self._lock:
            records = self.list()
            fingerprint = fingerprint_file(path, info.file_size)
            same = next((r for r in records if r.fingerprint == fingerprint or r.path == path), None)
            if same is not None and same.fingerprint == fingerprint:
                return same
            taken = {r.id for r in records if r.path != path}
            record = AdapterRecord(
                id=_unique(adapter_id_for(path), taken), path=path, architecture=header.architecture,
                base_model=_base_model(info), rank=header.rank, alpha=header.alpha, tensors=len(header.pairs),
                size_bytes=info.file_size, fingerprint=fingerprint, source=source, mtime=path.stat().st_mtime,
                added_at=same.added_at if same is not None else time.time(),
            )
            with self.store.writing() as conn:
                conn.execute(f"DELETE FROM {_TABLE} WHERE path = ?", [str(path)])
                table_named(self.store.db, _TABLE).insert(record.to_row(), replace=True)
            log.info("imported LoRA adapter %s (%s, rank %d, %d tensor pairs)", record.id, record.architecture,
                     record.rank, record.tensors)
            return record

    def import_path(self, path: Path | str) -> AdapterImport:
        """A file, or every ``.gguf`` under a folder that is an adapter (models are skipped)."""
        path = Path(path).expanduser()
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.gguf") if p.is_file())
            if not files:
                return AdapterImport(skipped=[(path, "no .gguf files in this folder")])
            return self.import_files(files)
        if not path.exists():
            return AdapterImport(skipped=[(path, "no such file or folder")])
        return self.import_files([path])

    def import_files(self, files: Iterable[Path]) -> AdapterImport:
        result = AdapterImport()
        for file in files:
            before = {r.fingerprint for r in self.list()}
            try:
                record = self.register_file(file)
            except AdapterError as exc:
                result.skipped.append((file, str(exc)))
                continue
            except OSError as exc:
                result.skipped.append((file, exc.strerror or str(exc)))
                continue
            (result.already if record.fingerprint in before else result.imported).append(record)
        return result

    def remove(self, adapter_id: str) -> AdapterRecord:
        """Forget an adapter (its file is never deleted: it was imported in place)."""
        record = self.get(adapter_id)
        with self.store.writing() as conn:
            conn.execute(f"DELETE FROM {_TABLE} WHERE id = ?", [record.id])
        return record

    # -- a job's choice ---------------------------------------------------------------

    def lora_set(self, requested: Iterable[tuple[str | int, float]], model: ModelRecord | None = None) -> LoraSet:
        """The adapters ``requested`` as (id or index, scale), checked against ``model``'s
        header when one is given: unknown ids and adapters for another base model are
        ``AdapterError`` (HTTP 400) before anything is queued."""
        uses = []
        for wanted, scale in requested:
            record = self.get(wanted)
            uses.append(LoraUse(record.id, record.path, record.fingerprint, scale))
        chosen = LoraSet.of(uses)
        if model is not None:
            for use in chosen.uses:
                self.check_fits(self.get(use.adapter_id), model)
        return chosen

    def check_fits(self, record: AdapterRecord, model: ModelRecord) -> None:
        check_compatible(self.header(record), record.id, header_of(model), model.id)

    def header(self, record: AdapterRecord) -> AdapterHeader:
        try:
            info = read_gguf(record.path)
        except ModelLoadError as exc:
            raise AdapterError(f"the adapter {record.id} cannot be read: {exc}") from None
        return adapter_header(info, record.id)


def _base_model(info: GGUFInfo) -> str | None:
    name = info.metadata.get("general.base_model.0.name")
    return str(name) if isinstance(name, str) and name else None


def _unique(wanted: str, taken: set[str]) -> str:
    candidate, n = wanted, 2
    while candidate in taken:
        candidate = f"{wanted}-{n}"
        n += 1
    return candidate

"""Lab results in SQLite, keyed by file fingerprint, machine and settings.

Reading back never re-measures: the last result of each file on this machine is shown at
once, with a note when it no longer describes the file (re-quantized or replaced), when
it was measured with other settings, or when its reference has changed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import ModelRecord
from ..store import Store, table_named


@dataclass
class LabResult:
    model_id: str
    path: str
    quantization: str
    fingerprint: str
    size_bytes: int
    bits_per_weight: float
    load_s: float | None = None
    ram_bytes: int | None = None
    vram_bytes: int | None = None
    prompt_tps: float | None = None
    decode_tps: float | None = None
    perplexity: float | None = None
    kld_mean: float | None = None
    kld_p99: float | None = None
    same_top: float | None = None  # share of positions, 0..1
    positions: int = 0
    is_reference: bool = False
    reference_id: str | None = None
    reference_fingerprint: str | None = None
    backend: str = ""
    measured_at: float = field(default_factory=time.time)
    # Filled when read back, not stored: why this result may no longer hold.
    stale_reason: str | None = None

    @property
    def stale(self) -> bool:
        return self.stale_reason is not None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LabResult":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class MeasureSettings:
    """Everything besides the file and the machine that changes the numbers."""

    threads: int
    gpu_layers: int
    window: int
    kv_cache_type: str
    eval_digest: str
    eval_tokens: int | None  # a cap on the evaluation length, None for the whole text
    top_k: int = 128  # reference tokens kept per position (changes the KLD estimate slightly)

    def key(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def describe_difference(self, other_key: str) -> str:
        try:
            other = json.loads(other_key)
        except ValueError:
            return "measured with different settings"
        mine = dataclasses.asdict(self)
        changed = sorted(k for k in mine if other.get(k) != mine[k])
        labels = {"eval_digest": "evaluation text", "eval_tokens": "evaluation length", "gpu_layers": "GPU layers",
                  "kv_cache_type": "KV cache type", "window": "context window",
                  "top_k": "number of reference tokens kept"}
        return "measured with different " + ", ".join(labels.get(k, k) for k in changed) if changed else ""


class LabResults:
    """The ``lab_results`` table (created by migration ``m003_lab_results``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def save(self, result: LabResult, machine: str, settings: MeasureSettings) -> None:
        row = {
            "path": result.path,
            "fingerprint": result.fingerprint,
            "machine": machine,
            "settings": settings.key(),
            "model_id": result.model_id,
            "reference_fingerprint": result.reference_fingerprint,
            "result": json.dumps({k: v for k, v in result.to_json().items() if k != "stale_reason"}),
            "measured_at": result.measured_at,
        }
        # The store's lock serialises this with every other use of the shared connection;
        # writing() also maps a full or read-only disk to StorageUnavailable.
        with self.store.writing():
            table_named(self.store.db, "lab_results").upsert(row, pk=("path", "fingerprint", "machine", "settings"))

    def latest(
        self,
        records: list[ModelRecord],
        machine: str,
        settings: MeasureSettings,
        reference: ModelRecord | None,
    ) -> list[LabResult]:
        """The newest result of each file on this machine, with ``stale_reason`` set where due.

        A result measured with exactly these settings is preferred over a newer one with
        other settings, so switching a setting back shows the matching numbers again.
        """
        found: list[LabResult] = []
        for record in records:
            with self.store.reading():
                rows = list(self.store.db.conn.execute(
                    "SELECT fingerprint, settings, result FROM lab_results WHERE path = ? AND machine = ? "
                    "ORDER BY measured_at DESC",
                    [str(record.path), machine],
                ))
            if not rows:
                continue
            exact = [r for r in rows if r[0] == record.fingerprint and r[1] == settings.key()]
            fingerprint, settings_key, payload = exact[0] if exact else rows[0]
            result = LabResult.from_json(json.loads(payload))
            result.model_id = record.id
            if fingerprint != record.fingerprint:
                result.stale_reason = "the file has changed since it was measured"
            elif settings_key != settings.key():
                result.stale_reason = settings.describe_difference(settings_key) or "measured with different settings"
            elif reference is not None and result.reference_fingerprint not in (None, reference.fingerprint):
                result.stale_reason = "compared against a reference that has since changed"
            found.append(result)
        return found

    def forget(self, path: Path) -> None:
        with self.store.writing():
            self.store.db.conn.execute("DELETE FROM lab_results WHERE path = ?", [str(path)])

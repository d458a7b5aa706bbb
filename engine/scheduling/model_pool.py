"""The models resident at once, within a memory budget, and the thread that loads them.

The scheduler keeps several loaded models (chat models, an embedding context, a draft
model) in one ``ModelPool``. Each entry carries the memory it was estimated to need before
it loaded (``fit``: weights + KV cache at its context + llama.cpp's scratch buffer), so a
new load first evicts the least recently used idle models until the estimates fit the
budget. A model too large for the budget even alone is refused with ``ModelTooLarge``.

Loads run on the ``ModelLoader``'s own thread. The pool's lock guards only its dictionary,
never a load or a step, so ``/health``, ``/v1/models`` and the window read the resident
models at any time, and the scheduler keeps stepping the models already resident while
another one loads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..base import ModelLoadError, ModelRecord, ModelTooLarge
from ..runtime import (DRAFT, OFF, LoadOptions, ModelShape, compute_bytes, flash_attention_for, header_of,
                       kv_cache_bytes, output_rows, window_checkpoint_bytes)

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# "Auto" budget: this share of physical RAM; the rest is the desktop's and the prompt cache's.
AUTO_BUDGET_SHARE = 0.6


def auto_budget_bytes() -> int:
    """The memory budget when the setting is 0: a share of physical RAM."""
    import psutil  # noqa: PLC0415 — only needed here

    return int(psutil.virtual_memory().total * AUTO_BUDGET_SHARE)


def budget_from_setting(memory_budget_mb: int) -> int:
    """``Settings.memory_budget_mb`` in bytes (0 or less: automatic)."""
    return memory_budget_mb * MIB if memory_budget_mb > 0 else auto_budget_bytes()


def estimate_resident_bytes(record: ModelRecord, options: LoadOptions) -> int:
    """What ``record`` takes once loaded with ``options``: its weights, the KV cache of every
    sequence at ``options.context_size`` tokens each, one micro-batch's scratch buffer and,
    for a sliding-window model, the window checkpoints its sequences may keep.
    A header that cannot be read counts as the file's size (the load will say what is wrong)."""
    try:
        shape = ModelShape.from_gguf(header_of(record))
    except (ModelLoadError, OSError):
        return record.size_bytes
    cells = max(1, options.context_size) * max(1, options.parallel)
    window = shape if not options.swa_full else replace(shape, swa_layers=0)
    total = (shape.weights_bytes + kv_cache_bytes(window, cells, options.kv_cache_type, options.parallel,
                                                  options.batch_size)
             + compute_bytes(shape, max(1, options.context_size), options.batch_size, flash_attention_for(options),
                             output_rows(options, max(1, options.parallel)))
             + window_checkpoint_bytes(window, cells, options.kv_cache_type, options.parallel,
                                       options.batch_size))
    return total + draft_model_bytes(record, options)


def draft_model_bytes(record: ModelRecord, options: LoadOptions) -> int:
    """The draft model loaded beside ``record`` (speculative "draft"): its own context with
    a sequence per target sequence. Its weights count unless it is the same file, whose
    pages the two mappings share. It loads with full-size window layers (``swa_full``, as
    ``LoadedModel._load_draft`` does: a rejected draft is cut back without checkpoints), so
    a sliding-window draft's KV counts at full size and it keeps no window checkpoints."""
    draft = options.draft_model
    if options.speculative != DRAFT or draft is None:
        return 0
    alone = estimate_resident_bytes(draft, replace(options, speculative=OFF, draft_model=None, swa_full=True))
    if draft.fingerprint and draft.fingerprint == record.fingerprint:
        try:
            alone -= ModelShape.from_gguf(header_of(draft)).weights_bytes
        except (ModelLoadError, OSError):
            pass
    return alone


# (model id, False) for a chat context; (model id, pooling) for one loaded for embeddings,
# its own context ("mean" for the API, "last" for search by meaning).
Key = tuple[str, str | bool]


@dataclass
class Resident:
    model: Any
    bytes: int
    last_used: float = field(default_factory=time.monotonic)


class ModelPool:
    """Resident models by key, their estimated sizes and when each was last used."""

    def __init__(self, budget_bytes: Callable[[], int]) -> None:
        self.budget_bytes = budget_bytes
        self._residents: dict[Key, Resident] = {}
        self._lock = threading.Lock()

    def get(self, key: Key) -> Any | None:
        with self._lock:
            resident = self._residents.get(key)
            return None if resident is None else resident.model

    def models(self) -> list[Any]:
        """The resident models, most recently used first."""
        with self._lock:
            ordered = sorted(self._residents.values(), key=lambda r: r.last_used, reverse=True)
            return [r.model for r in ordered]

    def keys(self) -> list[Key]:
        with self._lock:
            return list(self._residents)

    def add(self, key: Key, model: Any, size: int) -> None:
        with self._lock:
            self._residents[key] = Resident(model, size)

    def pop(self, key: Key) -> Any | None:
        with self._lock:
            resident = self._residents.pop(key, None)
            return None if resident is None else resident.model

    def touch(self, key: Key) -> None:
        with self._lock:
            if key in self._residents:
                self._residents[key].last_used = time.monotonic()

    def used_bytes(self) -> int:
        with self._lock:
            return sum(r.bytes for r in self._residents.values())

    def evictions_for(self, need: int, busy: set[Key], reserved: int = 0) -> list[Key] | None:
        """The idle models to unload, least recently used first, so that ``need`` more bytes
        fit beside what stays (and ``reserved``: loads in flight). None: not possible now,
        because models in use hold the memory. Raises ``ModelTooLarge`` when ``need`` alone
        is over the budget."""
        budget = self.budget_bytes()
        if need > budget:
            raise ModelTooLarge(
                f"the model needs about {need // MIB} MiB, more than the memory budget of "
                f"{budget // MIB} MiB (Settings → Performance → Memory for models)"
            )
        with self._lock:
            used = reserved + sum(r.bytes for r in self._residents.values())
            idle = sorted((r.last_used, key) for key, r in self._residents.items() if key not in busy)
            sizes = {key: r.bytes for key, r in self._residents.items()}
        evict: list[Key] = []
        for _used, key in idle:
            if used + need <= budget:
                break
            evict.append(key)
            used -= sizes[key]
        return evict if used + need <= budget else None

    def idle_for(self, seconds: float, busy: set[Key]) -> list[Key]:
        """Models unused for longer than ``seconds`` and not in use now."""
        now = time.monotonic()
        with self._lock:
            return [key for key, r in self._residents.items() if key not in busy and now - r.last_used > seconds]


@dataclass
class LoadOutcome:
    key: Key
    record: ModelRecord
    size: int
    model: Any = None
    error: BaseException | None = None


class ModelLoader:
    """Loads one model at a time on its own thread and hands each outcome to ``done``.

    ``load(record, options, progress)`` builds the model (the scheduler's ``loader``);
    ``done(outcome)`` is called on the loader thread when it succeeded or failed."""

    def __init__(self, done: Callable[[LoadOutcome], None]) -> None:
        self._done = done
        self._pending: dict[Key, tuple[ModelRecord, int]] = {}
        self._lock = threading.Lock()
        self.unit: tuple[float, str] | None = None  # (start, what) of the load in progress

    def loading(self) -> dict[Key, tuple[ModelRecord, int]]:
        """Loads started and not yet handed over: key → (record, estimated bytes)."""
        with self._lock:
            return dict(self._pending)

    def reserved_bytes(self) -> int:
        with self._lock:
            return sum(size for _record, size in self._pending.values())

    def start(self, key: Key, record: ModelRecord, size: int, build: Callable[[Callable[[float], None]], Any]) -> bool:
        """Start loading ``key`` with ``build(progress)``; False when it is already loading."""
        with self._lock:
            if key in self._pending:
                return False
            self._pending[key] = (record, size)
        thread = threading.Thread(target=self._run, args=(key, record, size, build),
                                  name=f"inglenook-loader-{record.id}", daemon=True)
        thread.start()
        return True

    def _run(self, key: Key, record: ModelRecord, size: int, build: Callable[[Callable[[float], None]], Any]) -> None:
        outcome = LoadOutcome(key, record, size)
        self.unit = (time.monotonic(), f"loading the model {record.id}")

        def progress(_fraction: float) -> None:
            self.unit = (time.monotonic(), f"loading the model {record.id}")  # progress: not stuck

        try:
            outcome.model = build(progress)
        except BaseException as exc:  # every failure goes to the jobs waiting for it
            if not isinstance(exc, ModelLoadError):
                log.exception("loading %s failed", record.id)
            outcome.error = exc
        finally:
            self.unit = None
        # Handed over before it stops counting as loading: the scheduler always sees the
        # model either loading or in its inbox, never neither (which would start it again).
        self._done(outcome)
        with self._lock:
            self._pending.pop(key, None)

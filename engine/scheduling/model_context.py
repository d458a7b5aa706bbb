"""The context a model is loaded with: its own setting, the app-wide one, or "auto".

The scheduler builds a loaded model through ``load_with_context``, so a per-model setting
(``Settings.model_context``) or the automatic choice (``fit.auto_context``: the model's
training context as far as free memory allows) reaches llama.cpp without the scheduler
knowing about either.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..base import InglenookError, ModelRecord
from ..runtime import (
    RAM_HEADROOM, LoadOptions, LoadedModel, MachineMemory, ModelShape, ProgressCallback, auto_context,
    detect_machine, header_of, kv_cache_type_for, output_rows,
)
from ..store import AUTO_CONTEXT, Settings
from .model_pool import estimate_resident_bytes

log = logging.getLogger(__name__)


def context_for(record: ModelRecord, settings: Settings, options: LoadOptions,
                machine: MachineMemory | None = None) -> int:
    """Tokens per sequence for ``record``: its setting, else the app's, else the auto choice
    for ``machine`` (detected now when not given)."""
    wanted = settings.context_for(record.id)
    if wanted != AUTO_CONTEXT:
        return wanted
    info = header_of(record)
    chosen = auto_context(
        ModelShape.from_gguf(info), machine or detect_machine(), info.context_length,
        parallel=options.parallel, kv_type=options.kv_cache_type, n_ubatch=options.batch_size,
        outputs=output_rows(options, max(1, options.parallel)),
    )
    log.info("context for %s: %d tokens per sequence (auto; trained for %s)", record.id, chosen, info.context_length)
    return chosen


def context_loader(settings: Callable[[], Settings]) -> Callable[..., LoadedModel]:
    """A scheduler ``loader`` that loads each model with the context chosen for it."""

    def load(record: ModelRecord, options: LoadOptions, progress: ProgressCallback | None = None) -> LoadedModel:
        plan = plan_load(record, settings(), options)
        if plan.short or plan.beyond_training:  # the picker and the Models page said so before; the log says it again
            log.warning("loading %s: %s", record.id, plan.label)
        # A context from a setting is honoured even past the training context (with the
        # warning above); the automatic one never goes there.
        options = dataclasses.replace(options, context_size=plan.context, explicit_context=plan.explicit)
        return LoadedModel(record, options, progress=progress)

    return load


@dataclass(frozen=True)
class LoadPlan:
    """What loading a model will take, said before it loads (picker, Models page, ``show``)."""

    model_id: str
    context: int  # tokens per answer
    sequences: int  # answers it runs at once, each with its own KV cache of ``context``
    kv_cache_type: str  # "auto" resolved for this machine
    resident_bytes: int  # weights + every sequence's KV cache + scratch
    available_bytes: int  # free RAM now
    trained_context: int | None = None  # what the model was trained for, when its file says
    explicit: bool = False  # ``context`` comes from a setting (or ``serve --context``), not "auto"

    @property
    def beyond_training(self) -> bool:
        """True when the context asked for runs past what the model was trained for."""
        return self.explicit and bool(self.trained_context) and self.context > (self.trained_context or 0)

    @property
    def short(self) -> bool:
        """True when the load would leave the machine without memory to spare."""
        return self.resident_bytes > max(0, self.available_bytes - RAM_HEADROOM)

    @property
    def memory(self) -> str:
        """What it takes in memory: "~1.1 GB"."""
        return f"~{_gb(self.resident_bytes)}"

    @property
    def summary(self) -> str:
        """A badge: "~1.1 GB · 16,384 ctx × 4"."""
        return f"~{_gb(self.resident_bytes)} · {self.context:,} ctx × {self.sequences}"

    @property
    def label(self) -> str:
        text = (f"{self.context:,} tokens × {self.sequences} answers, {self.kv_cache_type} cache: "
                f"~{_gb(self.resident_bytes)} of {_gb(self.available_bytes)} free")
        if self.short:
            text += " (more than this machine has free: close other programs or choose a smaller context)"
        if self.beyond_training:
            text += (f"; the model was trained for {self.trained_context:,} tokens, so answers past that "
                     "may lose track or turn to nonsense")
        return text


def _gb(size: int) -> str:
    return f"{size / 1e9:.1f} GB"


def _trained_context(record: ModelRecord) -> int | None:
    try:
        return header_of(record).context_length
    except InglenookError:  # an unreadable file fails its load with its own error
        return None


def plan_load(record: ModelRecord, settings: Settings, options: LoadOptions,
              machine: MachineMemory | None = None) -> LoadPlan:
    """The context, sequences, cache type and memory ``record`` would load with now, on
    ``machine`` (detected now when not given; a caller planning several loads passes one)."""
    machine = machine or detect_machine()
    context = context_for(record, settings, options, machine)
    explicit = settings.context_for(record.id) != AUTO_CONTEXT
    trained = _trained_context(record) if explicit else None
    offloads = machine.has_gpu and options.gpu_layers != 0
    kv_type = kv_cache_type_for(options.kv_cache_type, offloads)
    planned = dataclasses.replace(options, context_size=context, kv_cache_type=kv_type)
    return LoadPlan(record.id, context, max(1, options.parallel), kv_type,
                    estimate_resident_bytes(record, planned), machine.ram_available_bytes,
                    trained_context=trained, explicit=explicit)

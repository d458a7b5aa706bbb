"""The quantization lab: compare a model's quantization levels on this machine.

``QuantLab`` is the front door: it groups installed variants of a model, creates new ones
with llama.cpp's quantizer, measures each (size, memory, speed, perplexity, KL divergence
against the most precise variant) in a background ``LabRun``, and keeps the results in
SQLite so they show again instantly, marked stale when a file or a setting changes.

May import: base, models, runtime, store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "evaltext": ("EvalText",),
    "lab": ("LabProgress", "LabReport", "LabRun", "QuantLab"),
    "measure": ("MeasureConfig",),
    "recommend": ("Recommendation",),
    "results": ("LabResult",),
    "variants": ("Variant", "VariantGroup"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .evaltext import EvalText as EvalText
    from .lab import (
        LabProgress as LabProgress, LabReport as LabReport, LabRun as LabRun, QuantLab as QuantLab,
    )
    from .measure import MeasureConfig as MeasureConfig
    from .recommend import Recommendation as Recommendation
    from .results import LabResult as LabResult
    from .variants import Variant as Variant, VariantGroup as VariantGroup

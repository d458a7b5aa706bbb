"""The quantization lab: compare a model's quantization levels on this machine.

``QuantLab`` is the front door: it groups installed variants of a model, creates new ones
with llama.cpp's quantizer, measures each (size, memory, speed, perplexity, KL divergence
against the most precise variant) in a background ``LabRun``, and keeps the results in
SQLite so they show again instantly, marked stale when a file or a setting changes.
"""

from __future__ import annotations

from .lab import LabProgress, LabReport, LabRun, QuantLab
from .results import LabResult
from .variants import Variant, VariantGroup

__all__ = ["LabProgress", "LabReport", "LabResult", "LabRun", "QuantLab", "Variant", "VariantGroup"]

"""A model in llama.cpp: the loaded model and its context, sequences and their saved states,
speculative drafts, sampling, the vocabulary, backends, the fit estimate and GGUF header cache,
images through a vision projector (libmtmd).

May import: base, text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "backends": ("Device", "cpu_model_name", "library_dir", "missing_cpu_features", "read_cpu_flags"),
    "fit": (
        "CPU_ONLY", "FITS_GPU", "FitEstimate", "GpuMemory", "MachineMemory", "ModelShape", "PARTIAL",
        "RAM_HEADROOM", "RpcSplit", "TOO_LARGE", "auto_context", "compute_bytes", "detect_machine",
        "estimate_fit", "kv_cache_bytes", "kv_cache_type_for", "rpc_split", "window_checkpoint_bytes",
    ),
    "gguf_headers": ("header_of",),
    "model": ("LoadedModel",),
    "model_loading": ("LoadOptions", "ProgressCallback", "flash_attention_for", "output_rows"),
    "native": ("backend_report", "llama", "llama_cpp_version", "physical_cores", "supports_gpu_offload"),
    "slots": ("DECODE", "KvSlot"),
    "speculative": ("DRAFT", "OFF"),
    "vision": ("mtmd_available",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .backends import (
        Device as Device, cpu_model_name as cpu_model_name, library_dir as library_dir,
        missing_cpu_features as missing_cpu_features, read_cpu_flags as read_cpu_flags,
    )
    from .fit import (
        CPU_ONLY as CPU_ONLY, FITS_GPU as FITS_GPU, PARTIAL as PARTIAL, RAM_HEADROOM as RAM_HEADROOM,
        TOO_LARGE as TOO_LARGE, FitEstimate as FitEstimate, GpuMemory as GpuMemory,
        MachineMemory as MachineMemory, ModelShape as ModelShape, RpcSplit as RpcSplit,
        auto_context as auto_context, compute_bytes as compute_bytes, detect_machine as detect_machine,
        estimate_fit as estimate_fit, kv_cache_bytes as kv_cache_bytes,
        kv_cache_type_for as kv_cache_type_for, rpc_split as rpc_split,
        window_checkpoint_bytes as window_checkpoint_bytes,
    )
    from .gguf_headers import header_of as header_of
    from .model import LoadedModel as LoadedModel
    from .model_loading import (
        LoadOptions as LoadOptions, ProgressCallback as ProgressCallback, flash_attention_for as flash_attention_for,
        output_rows as output_rows,
    )
    from .native import (
        backend_report as backend_report, llama as llama, llama_cpp_version as llama_cpp_version,
        physical_cores as physical_cores, supports_gpu_offload as supports_gpu_offload,
    )
    from .slots import DECODE as DECODE, KvSlot as KvSlot
    from .speculative import DRAFT as DRAFT, OFF as OFF
    from .vision import mtmd_available as mtmd_available

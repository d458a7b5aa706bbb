"""The few process-wide llama.cpp settings: backend start-up and where its log lines go.

Importing llama_cpp is deferred to the first call, so importing the engine stays cheap
(the CLI's ``--version`` and ``list`` never load the native library).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import psutil

from .backends import LLAMA_LOGGER, BackendReport, load_backends, refresh_devices

log = logging.getLogger(LLAMA_LOGGER)

_init_lock = threading.Lock()


@dataclass
class _NativeState:
    """What the first ``llama()`` call set up; all None before it."""

    module: ModuleType | None = None
    backends: BackendReport | None = None
    callback: object = None  # the C side keeps a pointer to the log callback: keep it alive
    mtmd_routed: bool = False  # libmtmd's own logger points at the callback too


_state = _NativeState()


def llama() -> ModuleType:
    """The llama_cpp low-level module, with its backend initialised and logs routed to us."""
    with _init_lock:
        if _state.module is None:
            import llama_cpp  # noqa: PLC0415 — heavy native import, deferred on purpose

            callback = llama_cpp.llama_log_callback(_forward_log)
            llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
            # The CPU variant and GPU modules are chosen here, before llama_backend_init,
            # which would otherwise look for backends beside the Python executable.
            _state.backends = load_backends()
            llama_cpp.llama_backend_init()
            _without_huge_page_advice()
            _state.callback = callback
            _state.module = llama_cpp
        return _state.module


def _without_huge_page_advice() -> None:
    """Stop numpy advising huge pages for its arrays of 4 MiB and more (``MADV_HUGEPAGE``).

    The engine's big arrays are copies on the token path: window checkpoints (gemma-3-270m:
    7.5 MiB, taken before a prompt's first token), their copies from a saved state, sequence
    states for the prompt cache. Where the kernel's THP ``defrag`` is ``madvise`` (its
    default), a fault in an advised region waits for the kernel to assemble a huge page:
    checkpoint copies here took 1 ms at the median but up to 45-55 ms with the advice, 6 ms at
    most without. The kernel still hands out huge pages it has ready (THP ``enabled``).
    numpy offers the switch for this (``NUMPY_MADVISE_HUGEPAGE``, read at its import; this is
    its runtime form).
    """
    import numpy as np  # noqa: PLC0415 — deferred, as llama_cpp is: importing the engine stays cheap

    core = getattr(np, "_core", None) or getattr(np, "core", None)  # numpy 2, numpy 1
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)


# ggml's log levels: NONE=0, DEBUG=1, INFO=2, WARN=3, ERROR=4, CONT=5 (continuation).
_LEVELS = {1: logging.DEBUG, 2: logging.DEBUG, 3: logging.WARNING, 4: logging.ERROR}


def _forward_log(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    if not text:
        return
    message = text.decode("utf-8", errors="replace").rstrip("\n")
    if message and message != ".":
        log.log(_LEVELS.get(level, logging.DEBUG), "%s", message)


def route_mtmd_log(mtmd: ModuleType) -> None:
    """Send libmtmd's log (its own logger, apart from llama.cpp's: it wrote each text piece of
    an image prompt, system prompts and user text included, to stderr as ``add_text:`` lines)
    through the same callback and levels as llama.cpp's, once per process."""
    llama()  # the callback is made there
    with _init_lock:
        if _state.mtmd_routed:
            return
        callback = _state.callback
        mtmd.mtmd_log_set(callback, ctypes.c_void_p(0))
        helper = getattr(mtmd, "mtmd_helper_log_set", None)
        if helper is not None:
            helper(callback, ctypes.c_void_p(0))
        _state.mtmd_routed = True


def physical_cores() -> int:
    """Threads for inference: one per physical core (hyper-threads only add contention)."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def supports_gpu_offload() -> bool:
    return bool(llama().llama_supports_gpu_offload())


def backend_report(refresh: bool = False) -> BackendReport:
    """What was loaded (CPU variant, GPU backends, devices); loads llama.cpp if needed."""
    llama()
    report = _state.backends
    assert report is not None, "llama() loads the backends before it returns"
    return refresh_devices(report) if refresh else report


def build_patches() -> frozenset[str]:
    """The names of the changes scripts/llama_build.py made to llama.cpp's source
    (``SOURCE_PATCHES``); empty for a llama.cpp built any other way."""
    patches = backend_report().build.get("patches") or {}
    return frozenset(patches) if isinstance(patches, (dict, list)) else frozenset()


def state_seq_end_at() -> Callable[[int], None] | None:
    """The recipe's ``inglenook_state_seq_end_at`` (patch ``state-seq-window-at``): given a
    position p, the next sequence-state copies on this thread hold what a copy taken when the
    sequence ended at p holds; -1 goes back to upstream's copies. None in a llama.cpp built
    without the patch."""
    function = getattr(llama().llama_cpp._lib, "inglenook_state_seq_end_at", None)
    if function is None:
        return None
    function.argtypes = [ctypes.c_int32]
    function.restype = None
    return function


@functools.cache
def logits_row_address() -> Callable[[ctypes.c_void_p, int], int]:
    """``llama_get_logits_ith`` returning the row's address as an int (0 for none). The
    binding's own returns a ctypes pointer that numpy must wrap anew for every token; an
    address lets a sampler keep one view of a buffer llama.cpp writes each step in place."""
    prototype = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)
    return prototype(("llama_get_logits_ith", llama().llama_cpp._lib))


def llama_cpp_version() -> tuple[str, str]:
    """(llama-cpp-python version, the llama.cpp commit it vendors, or "" when unknown)."""
    lib = llama()
    build = backend_report().build
    commit = str(build.get("llama_cpp_commit", "")) if build else ""
    return str(lib.__version__), commit


def system_info() -> str:
    return llama().llama_print_system_info().decode(errors="replace")

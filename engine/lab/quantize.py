"""Make a new quantization of a model with llama.cpp's quantizer (``llama_model_quantize``).

The quantizer runs in a child process (``python -m inglenook.engine.lab.quantize``) so a
cancel can stop it at once and its per-tensor warnings stay out of the app's output. It
writes to a temporary name in the models directory; progress is the temporary file's size
against the expected size; on success the file is fsynced and renamed into place.
Frozen builds (no separate Python to start) run it in-process instead, where a cancel
takes effect when the quantizer returns.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..base import FILE_TYPES, InvalidRequest, JobCancelled, ModelLoadError, read_gguf

log = logging.getLogger(__name__)

# Quantizations offered for creation, with their nominal bits per weight (for the size estimate).
CREATABLE: dict[str, float] = {
    "F16": 16.0, "Q8_0": 8.5, "Q6_K": 6.56, "Q5_K_M": 5.69, "Q5_K_S": 5.54, "Q5_1": 6.0, "Q5_0": 5.5,
    "Q4_K_M": 4.85, "Q4_K_S": 4.58, "Q4_1": 5.0, "Q4_0": 4.5, "Q3_K_L": 4.27, "Q3_K_M": 3.91,
    "Q3_K_S": 3.5, "Q2_K": 3.35,
}
_FTYPE_IDS = {name: ftype for ftype, name in FILE_TYPES.items()}
# Precision order of source types, so we can say which file to quantize from.
SOURCE_RANK = {"F32": 32.0, "BF16": 16.0, **CREATABLE}

ProgressCallback = Callable[[float], None]


def ftype_id(quant: str) -> int:
    name = quant.upper()
    if name not in CREATABLE:
        raise InvalidRequest(f"cannot create {quant}; choose one of {', '.join(CREATABLE)}", param="create")
    return _FTYPE_IDS[name]


def output_path(source: Path, quant: str, models_dir: Path) -> Path:
    """``<source stem without its quant>.<QUANT>.gguf`` in the models directory."""
    stem = source.name.removesuffix(".gguf")
    known = "|".join(re.escape(q) for q in sorted({*FILE_TYPES.values(), *CREATABLE}, key=len, reverse=True))
    stem = re.sub(rf"[-_. ]({known})$", "", stem, flags=re.IGNORECASE)
    return models_dir / f"{stem}.{quant.upper()}.gguf"


def expected_size(source: Path, quant: str) -> int:
    """Roughly the size of the quantized file: 2-D weights at the nominal rate, the rest kept."""
    info = read_gguf(source)
    bits = CREATABLE[quant.upper()]
    total: float = info.data_offset  # fractional bits per weight make it a float
    for tensor in info.tensors:
        total += tensor.n_elements * bits / 8 if len(tensor.shape) >= 2 else tensor.n_elements * 4
    return int(total)


def quantize(
    source: Path,
    target: Path,
    quant: str,
    threads: int = 0,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """Write ``target`` as ``quant`` of ``source``; raises JobCancelled or ModelLoadError."""
    ftype = ftype_id(quant)
    cancel = cancel or threading.Event()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        estimate = max(1, expected_size(source, quant))
        if getattr(sys, "frozen", False):
            _quantize_in_thread(source, tmp, ftype, threads, estimate, progress, cancel)
        else:
            _quantize_in_child(source, tmp, ftype, threads, estimate, progress, cancel)
        read_gguf(tmp)  # the result must be a valid GGUF before it gets the real name
        with tmp.open("rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    if progress is not None:
        progress(1.0)
    return target


def _report(progress: ProgressCallback | None, tmp: Path, estimate: int) -> None:
    if progress is None:
        return
    with contextlib.suppress(OSError):
        # The estimate is nominal; never claim to be done before the quantizer says so.
        progress(min(0.99, tmp.stat().st_size / estimate))


def _quantize_in_child(
    source: Path, tmp: Path, ftype: int, threads: int, estimate: int,
    progress: ProgressCallback | None, cancel: threading.Event,
) -> None:
    command = [sys.executable, "-m", "inglenook.engine.lab.quantize", str(source), str(tmp), str(ftype), str(threads)]
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            while child.poll() is None:
                if cancel.is_set():
                    child.kill()
                    child.wait()
                    raise JobCancelled("quantization cancelled")
                _report(progress, tmp, estimate)
                time.sleep(0.1)
        except BaseException:
            if child.poll() is None:
                child.kill()
                child.wait()
            raise
        if child.returncode != 0:
            errors.seek(0)
            tail = errors.read().decode(errors="replace").strip().splitlines()[-3:]
            raise ModelLoadError(f"llama.cpp could not quantize {source.name}: {' '.join(tail) or 'unknown error'}")


def _quantize_in_thread(
    source: Path, tmp: Path, ftype: int, threads: int, estimate: int,
    progress: ProgressCallback | None, cancel: threading.Event,
) -> None:
    outcome: list[int] = []
    worker = threading.Thread(target=lambda: outcome.append(run_quantizer(source, tmp, ftype, threads)), daemon=True)
    worker.start()
    while worker.is_alive():
        _report(progress, tmp, estimate)
        worker.join(0.1)
    if cancel.is_set():
        raise JobCancelled("quantization cancelled")
    if not outcome or outcome[0] != 0:
        raise ModelLoadError(f"llama.cpp could not quantize {source.name}")


def run_quantizer(source: Path, target: Path, ftype: int, threads: int) -> int:
    """Call llama.cpp's quantizer; 0 on success. Re-quantizing quantized weights is allowed."""
    from ..runtime import llama  # noqa: PLC0415 — loads the native library

    lib = llama()
    params = lib.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    # Sources are often already quantized (e.g. a Q4_1 starter); llama.cpp refuses those
    # unless asked. The result then carries the source's rounding too, which is the truth.
    params.allow_requantize = True
    return int(lib.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params)))


def _child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="inglenook.engine.lab.quantize")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("ftype", type=int)
    parser.add_argument("threads", type=int)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    return 0 if run_quantizer(Path(args.source), Path(args.target), args.ftype, args.threads) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(_child_main(sys.argv[1:]))

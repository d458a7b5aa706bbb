"""Which llama.cpp backends this process runs: the CPU variant for this processor, and GPUs.

Inglenook's llama.cpp is built with ggml's runtime dispatch (``scripts/llama_build.py``):
the CPU code exists once per instruction-set level (``libggml-cpu-haswell.so``, ``-zen4``,
…) and GPU code in its own modules (``libggml-cuda.so``). Before llama.cpp starts, this
module asks every CPU variant how well it fits the running CPU (ggml's own score, 0 when the
CPU lacks an instruction it needs), loads the best one, then loads each GPU module that can
load here. A GPU module whose driver is missing fails to load; that is noted, not fatal.

It must run before ``llama_backend_init``: that call loads "all backends" from the
executable's folder when none is registered yet, which for Python finds nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import platform
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import UnsupportedCpu

log = logging.getLogger(__name__)

# Variants left out even if a build contains them: ggml's AMX kernels die with SIGILL in
# worker threads on Linux (the AMX tile permission is per thread; llama.cpp PR #26954).
UNSAFE_VARIANTS = frozenset({"sapphirerapids"})
# Instructions the lowest x86 variant we ship (haswell) needs, by /proc/cpuinfo flag name.
X86_FLOOR = {"avx": "AVX", "avx2": "AVX2", "fma": "FMA", "f16c": "F16C", "bmi2": "BMI2"}
FORCE_VARIANT_ENV = "INGLENOOK_CPU_VARIANT"
#: The logger ``native`` forwards llama.cpp's own log to.
LLAMA_LOGGER = "inglenook.llama"

DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}
_LIB_SUFFIX = {"win32": ".dll", "darwin": ".so"}.get(sys.platform, ".so")


@dataclass(frozen=True)
class CpuVariant:
    name: str
    path: Path
    score: int  # ggml's score for this CPU; 0 means it cannot run here

    @property
    def runs_here(self) -> bool:
        return self.score > 0


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    kind: str  # cpu | gpu | igpu | accel
    backend: str
    free_bytes: int
    total_bytes: int


@dataclass
class BackendReport:
    """What was loaded, for ``inglenook doctor``, Settings → About and the fit estimate."""

    library_dir: Path
    dispatch: bool  # built with runtime CPU dispatch (GGML_BACKEND_DL)
    cpu_variant: str  # the chosen variant, or "built-in" for a build without dispatch
    cpu_variants: list[CpuVariant] = field(default_factory=list)
    cpu_features: dict[str, str] = field(default_factory=dict)
    backends: list[str] = field(default_factory=list)  # registered backends, e.g. ["CPU", "CUDA"]
    not_loaded: dict[str, str] = field(default_factory=dict)  # module file → why it did not load
    devices: list[Device] = field(default_factory=list)
    build: dict[str, object] = field(default_factory=dict)  # llama_cpp/inglenook_build.json
    ggml: "_Ggml | None" = field(default=None, repr=False, compare=False)  # to read devices again

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.kind in ("gpu", "igpu")]


# -- choosing ------------------------------------------------------------------------------


def variant_name(path: Path) -> str:
    """``libggml-cpu-zen4.so`` → ``zen4``."""
    stem = path.name.split(".")[0]
    return stem.removeprefix("lib").removeprefix("ggml-cpu-")


def choose_cpu_variant(variants: list[CpuVariant], forced: str | None = None,
                       cpu_flags: set[str] | None = None) -> CpuVariant:
    """The best-scoring safe variant; raises UnsupportedCpu naming what the CPU lacks."""
    usable = [v for v in variants if v.runs_here and v.name not in UNSAFE_VARIANTS]
    if forced:
        for variant in usable:
            if variant.name == forced:
                return variant
        names = ", ".join(v.name for v in usable) or "none"
        raise UnsupportedCpu(f"{FORCE_VARIANT_ENV}={forced} cannot run on this CPU (usable here: {names})")
    if usable:
        return max(usable, key=lambda v: v.score)
    missing = missing_cpu_features(cpu_flags if cpu_flags is not None else read_cpu_flags())
    if missing:
        raise UnsupportedCpu(
            f"This CPU lacks {', '.join(missing)}, which Inglenook's llama.cpp needs (x86-64 processors "
            "from 2013 on have it: Intel Haswell, AMD Excavator and Zen, and later)."
        )
    names = ", ".join(v.name for v in variants) or "none were found"
    raise UnsupportedCpu(f"None of llama.cpp's CPU builds can run on this processor (tried: {names}).")


def read_cpu_flags() -> set[str]:
    """The x86 feature flags Linux reports; empty where /proc/cpuinfo has none (macOS, arm)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return set()
    match = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    return set(match.group(1).split()) if match else set()


def missing_cpu_features(flags: set[str]) -> list[str]:
    if not flags or platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return []
    return [label for flag, label in X86_FLOOR.items() if flag not in flags]


def cpu_model_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
        match = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
        if match:
            return match.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# -- loading -------------------------------------------------------------------------------


class _Ggml:
    """The few ggml registry calls this module makes, typed once."""

    def __init__(self, library_dir: Path) -> None:
        lib = ctypes.CDLL(str(_ggml_path(library_dir)))
        p, s, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        self._sig(lib.ggml_backend_load, [ctypes.c_char_p], p)
        self._sig(lib.ggml_backend_reg_count, [], s)
        self._sig(lib.ggml_backend_reg_get, [s], p)
        self._sig(lib.ggml_backend_reg_name, [p], ctypes.c_char_p)
        self._sig(lib.ggml_backend_reg_get_proc_address, [p, ctypes.c_char_p], p)
        self._sig(lib.ggml_backend_dev_count, [], s)
        self._sig(lib.ggml_backend_dev_get, [s], p)
        self._sig(lib.ggml_backend_dev_name, [p], ctypes.c_char_p)
        self._sig(lib.ggml_backend_dev_description, [p], ctypes.c_char_p)
        self._sig(lib.ggml_backend_dev_memory, [p, ctypes.POINTER(s), ctypes.POINTER(s)], None)
        self._sig(lib.ggml_backend_dev_type, [p], i)
        self._sig(lib.ggml_backend_dev_backend_reg, [p], p)
        self.lib = lib

    @staticmethod
    def _sig(fn: Any, argtypes: list[Any], restype: Any) -> None:
        fn.argtypes = argtypes
        fn.restype = restype

    def registered(self) -> list[str]:
        return [self.lib.ggml_backend_reg_name(self.lib.ggml_backend_reg_get(i)).decode()
                for i in range(self.lib.ggml_backend_reg_count())]

    def devices(self) -> list[Device]:
        found = []
        for index in range(self.lib.ggml_backend_dev_count()):
            dev = self.lib.ggml_backend_dev_get(index)
            free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
            self.lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
            reg = self.lib.ggml_backend_dev_backend_reg(dev)
            found.append(Device(
                name=self.lib.ggml_backend_dev_name(dev).decode(errors="replace"),
                description=(self.lib.ggml_backend_dev_description(dev) or b"").decode(errors="replace"),
                kind=DEVICE_TYPES.get(self.lib.ggml_backend_dev_type(dev), "other"),
                backend=self.lib.ggml_backend_reg_name(reg).decode() if reg else "",
                free_bytes=int(free.value), total_bytes=int(total.value),
            ))
        return found

    def cpu_features(self) -> dict[str, str]:
        """The CPU backend's own list of what it was compiled for and uses (AVX2 = 1, …)."""
        for index in range(self.lib.ggml_backend_reg_count()):
            reg = self.lib.ggml_backend_reg_get(index)
            if self.lib.ggml_backend_reg_name(reg) != b"CPU":
                continue
            address = self.lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_get_features")
            if not address:
                return {}
            getter = ctypes.CFUNCTYPE(ctypes.POINTER(_Feature), ctypes.c_void_p)(address)
            features, table = {}, getter(reg)
            for i in range(64):  # the table ends with a NULL name; 64 bounds a broken one
                if not table[i].name:
                    break
                features[table[i].name.decode()] = (table[i].value or b"").decode()
            return features
        return {}


def _ggml_path(library_dir: Path) -> Path:
    """The very file libllama links (by its soname, e.g. ``libggml.so.0``).

    The wheel holds copies, not links, of ``libggml.so``, ``.so.0`` and ``.so.0.25.3``; the
    dynamic loader treats two copies as two libraries, and backends registered in one copy
    are invisible to llama.cpp, which uses the other.
    """
    if sys.platform == "win32":
        return library_dir / "ggml.dll"
    candidates = sorted(library_dir.glob("libggml.so.*"), key=lambda p: len(p.name))
    for candidate in candidates:
        if re.fullmatch(r"libggml\.so\.\d+", candidate.name):
            return candidate
    for name in ("libggml.so", "libggml.dylib", "libggml.0.dylib"):
        if (library_dir / name).exists():
            return library_dir / name
    return library_dir / f"libggml{_LIB_SUFFIX}"


class _Feature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


def library_dir() -> Path:
    """llama-cpp-python's library folder, found without importing (and so loading) it."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        return Path(override)
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise UnsupportedCpu("llama-cpp-python is not installed; run `make setup` (scripts/llama_build.py)")
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def read_build_info(lib_dir: Path) -> dict[str, object]:
    try:
        return json.loads((lib_dir.parent / "inglenook_build.json").read_text())
    except (OSError, ValueError):
        return {}


def score_variant(path: Path) -> int:
    """ggml's own verdict on ``path`` for this CPU (opening a module runs none of its kernels)."""
    try:
        module = ctypes.CDLL(str(path))
        scorer = module.ggml_backend_score
    except (OSError, AttributeError) as exc:
        log.warning("CPU variant %s cannot be opened: %s", path.name, exc)
        return 0
    scorer.restype = ctypes.c_int
    scorer.argtypes = []
    return int(scorer())


def load_backends(lib_dir: Path | None = None) -> BackendReport:
    """Register the CPU variant and GPU backends; call once, before llama_backend_init."""
    lib_dir = lib_dir or library_dir()
    ggml = _Ggml(lib_dir)
    build = read_build_info(lib_dir)
    cpu_modules = sorted(lib_dir.glob(f"libggml-cpu-*{_LIB_SUFFIX}*")) + sorted(lib_dir.glob("ggml-cpu-*.dll"))
    if not cpu_modules:
        # A build without runtime dispatch (plain `pip install llama-cpp-python`): its CPU code
        # is linked in and was compiled for whatever machine built it.
        if ggml.lib.ggml_backend_reg_count() == 0:
            raise UnsupportedCpu(f"no llama.cpp CPU backend was found in {lib_dir}")
        log.warning("llama.cpp was not built by scripts/llama_build.py: its CPU code targets the machine that built it")
        return _report(ggml, lib_dir, dispatch=False, variant="built-in", variants=[], build=build, not_loaded={})
    variants = [CpuVariant(variant_name(p), p, score_variant(p)) for p in cpu_modules]
    chosen = choose_cpu_variant(variants, forced=os.environ.get(FORCE_VARIANT_ENV) or None)
    if not ggml.lib.ggml_backend_load(str(chosen.path).encode()):
        raise UnsupportedCpu(f"llama.cpp's CPU backend {chosen.path.name} did not load")
    log.info("CPU backend: %s (score %d of %s)", chosen.name, chosen.score,
             ", ".join(f"{v.name}={v.score}" for v in variants))
    not_loaded = _load_gpu_modules(ggml, lib_dir)
    return _report(ggml, lib_dir, dispatch=True, variant=chosen.name, variants=variants, build=build,
                   not_loaded=not_loaded)


def _load_gpu_modules(ggml: _Ggml, lib_dir: Path) -> dict[str, str]:
    """Load every other backend module (CUDA, Vulkan, …); one that cannot load is noted."""
    not_loaded: dict[str, str] = {}
    # The RPC module is loaded only when workers are configured (rpc.py), not at every start.
    skip = {"ggml", "ggml-base", "ggml-rpc"}
    _preload_nvidia_wheels()
    for path in sorted(lib_dir.glob(f"libggml-*{_LIB_SUFFIX}")):
        stem = path.name.split(".")[0].removeprefix("lib")
        if stem in skip or stem.startswith("ggml-cpu"):
            continue
        reason = _dlopen_error(path)
        if reason is None:
            devices_before = _device_count(ggml)
            with _llama_errors() as errors:
                loaded = bool(ggml.lib.ggml_backend_load(str(path).encode()))
            if loaded and _device_count(ggml) > devices_before:
                log.info("backend module %s loaded", path.name)
                continue
            # Loaded with no device (CUDA without a driver new enough, say): its own error says why.
            reason = "it found no usable device" + (f" ({errors[-1]})" if errors else "")
        not_loaded[path.name] = reason
        log.warning("backend %s not used, running on the CPU: %s", path.name, reason)
    return not_loaded


def _device_count(ggml: _Ggml) -> int:
    """Devices other than the CPU (GPUs, and accelerators such as BLAS)."""
    return sum(1 for d in ggml.devices() if d.kind != "cpu")


@contextlib.contextmanager
def _llama_errors() -> Iterator[list[str]]:
    """What llama.cpp logs as errors meanwhile (``native`` forwards its log to this logger)."""
    errors: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            errors.append(record.getMessage().strip())

    handler = Keep(logging.ERROR)
    source = logging.getLogger(LLAMA_LOGGER)
    source.addHandler(handler)
    try:
        yield errors
    finally:
        source.removeHandler(handler)


def _preload_nvidia_wheels() -> None:
    """Make NVIDIA's PyPI libraries (``pip install inglenook[cuda]``: cuBLAS, the CUDA
    runtime) visible to libggml-cuda.so, which the dynamic loader would otherwise only look
    for in the system's folders."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return
    for root in spec.submodule_search_locations:
        # Load order matters: cuBLAS needs cuBLASLt and the runtime already mapped.
        for pattern in ("*/lib/libcudart.so.*", "*/lib/libcublasLt.so.*", "*/lib/libcublas.so.*"):
            for library in sorted(Path(root).glob(pattern)):
                try:
                    ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
                except OSError as exc:
                    log.debug("could not preload %s: %s", library, exc)


def _dlopen_error(path: Path) -> str | None:
    """Why the dynamic loader refuses ``path`` (a missing driver library, mostly), or None."""
    try:
        ctypes.CDLL(str(path))
    except OSError as exc:
        return str(exc)
    return None


def _report(ggml: _Ggml, lib_dir: Path, *, dispatch: bool, variant: str, variants: list[CpuVariant],
            build: dict[str, object], not_loaded: dict[str, str]) -> BackendReport:
    return BackendReport(
        library_dir=lib_dir, dispatch=dispatch, cpu_variant=variant, cpu_variants=variants,
        cpu_features=ggml.cpu_features(), backends=ggml.registered(), not_loaded=not_loaded,
        devices=ggml.devices(), build=build, ggml=ggml,
    )


def refresh_devices(report: BackendReport) -> BackendReport:
    """The same report with free memory read again (VRAM changes as models load)."""
    if report.ggml is None:
        report.ggml = _Ggml(report.library_dir)
    report.devices = report.ggml.devices()
    return report

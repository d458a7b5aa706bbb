"""``inglenook doctor`` and Settings → About: what this installation runs, in one report.

A user pastes it into a bug report, so it says what a maintainer asks first: versions
(with the llama.cpp commit), the CPU variant ggml chose and the features it uses, threads,
backends and GPUs with their memory, and a short self-test generation.
"""

from __future__ import annotations

import logging
import platform
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import psutil

from ..base import Finished, GenerateJob, InglenookError, PromptProgress, SamplingParams, human_size
from ..runtime import cpu_model_name, missing_cpu_features, read_cpu_flags

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger(__name__)

SELF_TEST_PROMPT = "Write a long story about a lighthouse keeper and a storm."


@dataclass
class SelfTest:
    model_id: str
    seconds: float = 0.0
    prompt_tokens: int = 0
    tokens: int = 0
    tokens_per_s: float = 0.0
    prompt_tokens_per_s: float = 0.0
    ttft_s: float = 0.0
    error: str = ""

    def line(self) -> str:
        if self.error:
            return f"{self.model_id}: failed: {self.error}"
        return (f"{self.model_id}: {self.tokens} tokens in {self.seconds:.1f} s, {self.tokens_per_s:.1f} tok/s "
                f"(prompt {self.prompt_tokens} tokens, first token after {self.ttft_s * 1000:.0f} ms)")


@dataclass
class DoctorReport:
    sections: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    self_test: SelfTest | None = None
    details: dict[str, Any] = field(default_factory=dict)  # machine-readable extras for --json

    def as_text(self) -> str:
        width = max((len(k) for _, rows in self.sections for k, _ in rows), default=10) + 2
        lines: list[str] = []
        for title, rows in self.sections:
            lines.append(title)
            lines.extend(f"  {key + ':':<{width}}{value}" for key, value in rows)
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {title: dict(rows) for title, rows in self.sections}
        out["details"] = self.details
        if self.self_test is not None:
            out["self_test"] = asdict(self.self_test)
        return out


def _vision_line(available: bool, why: str) -> str:
    """Whether images can be read: the build has libmtmd (a model also needs its projector)."""
    if available:
        return "available (libmtmd; a model reads images when an mmproj-*.gguf is beside it)"
    return f"not available: {why} (rebuild with scripts/llama_build.py)"


def collect(engine: "Engine", self_test_s: float = 2.0) -> DoctorReport:
    """Build the report; ``self_test_s`` 0 skips the generation."""
    from inglenook import __version__  # noqa: PLC0415 — the package above the engine

    from ..runtime import backend_report, llama_cpp_version, mtmd_available, physical_cores  # noqa: PLC0415 — loads llama.cpp

    report = DoctorReport()
    binding, commit = llama_cpp_version()
    backends = backend_report(refresh=True)
    build = backends.build
    report.sections.append(("Versions", [
        ("Inglenook", __version__),
        ("llama-cpp-python", binding),
        ("llama.cpp commit", commit or "unknown (not built by scripts/llama_build.py)"),
        ("build", _build_line(build, backends.dispatch)),
        ("vision", _vision_line(*mtmd_available())),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("system", f"{platform.platform()} {platform.machine()}"),
    ]))
    used = [name for name, value in backends.cpu_features.items() if value == "1" and name.isupper()]
    flags = read_cpu_flags()
    lacking = missing_cpu_features(flags)
    candidates = ", ".join(f"{v.name} ({v.score if v.runs_here else 'cannot run'})" for v in sorted(backends.cpu_variants, key=lambda v: -v.score))
    threads = engine.settings.threads or physical_cores()
    report.sections.append(("CPU", [
        ("processor", cpu_model_name()),
        ("cores", f"{physical_cores()} physical, {psutil.cpu_count(logical=True)} logical"),
        ("variant chosen", backends.cpu_variant),
        ("variants (score)", candidates or "none: the CPU code is built in"),
        ("features used", " ".join(used) or "unknown"),
        ("AMX on this CPU", "yes (not used: ggml's AMX kernels are unsafe in worker threads)"
         if {"amx_tile", "amx_int8"} <= flags else "no"),
        ("missing", ", ".join(lacking) or "nothing Inglenook needs"),
        ("threads", f"{threads}" + (" (one per physical core)" if not engine.settings.threads else " (Settings)")),
    ]))
    memory = psutil.virtual_memory()
    gpu_rows = [(f"GPU {i}", f"{d.description or d.name} ({d.backend}): {human_size(d.free_bytes)} free of "
                             f"{human_size(d.total_bytes)}") for i, d in enumerate(backends.gpus)]
    skipped = [(f"not used: {name}", reason) for name, reason in backends.not_loaded.items()]
    report.sections.append(("Backends", [
        ("loaded", ", ".join(backends.backends) or "none"),
        *gpu_rows,
        *(skipped or []),
        ("GPUs", "none found; running on the CPU" if not gpu_rows else f"{len(gpu_rows)}"),
        ("GPU layers setting", "auto (as many as fit)" if engine.settings.gpu_layers < 0
         else str(engine.settings.gpu_layers)),
        ("RAM", f"{human_size(memory.available)} free of {human_size(memory.total)}"),
    ]))
    report.sections.append(("Folders", [
        ("data", str(engine.paths.data)), ("models", str(engine.paths.models)),
        ("logs", str(engine.paths.logs)), ("cache", str(engine.paths.cache)),
    ]))
    report.details = {
        "cpu_variants": {v.name: v.score for v in backends.cpu_variants},
        "cpu_features": backends.cpu_features,
        "devices": [asdict(d) for d in backends.devices],
        "build": build,
    }
    if self_test_s > 0:
        report.self_test = run_self_test(engine, self_test_s)
        report.sections.append(("Self-test", [("generation", report.self_test.line())]))
    return report


def _build_line(build: dict[str, object], dispatch: bool) -> str:
    if not dispatch:
        return "not portable: CPU code compiled for the machine that built it (reinstall with `make setup`)"
    flavour = build.get("flavour", "?")
    return f"portable ({flavour}, runtime CPU dispatch, recipe {build.get('key', '?')})"


def run_self_test(engine: "Engine", seconds: float = 2.0) -> SelfTest:
    """Generate for about ``seconds`` with the starter (else the default) model."""
    try:
        model_id = engine.default_model_id()
    except InglenookError as exc:
        return SelfTest(model_id="(none)", error=str(exc))
    result = SelfTest(model_id=model_id)
    job = GenerateJob(model_id=model_id, messages=[{"role": "user", "content": SELF_TEST_PROMPT}], use_cache=False,
                      sampling=SamplingParams(temperature=0.0, max_tokens=2048))
    handle = engine.scheduler.submit(job)
    timer: threading.Timer | None = None
    started = time.perf_counter()
    try:
        for event in handle.events():
            if timer is None and not isinstance(event, PromptProgress):
                # The clock starts at the first token, after the model loaded and read the prompt.
                timer = threading.Timer(seconds, handle.cancel)
                timer.start()
            if isinstance(event, Finished):
                result.seconds = event.timings.decode_s
                result.prompt_tokens = event.usage.prompt_tokens
                result.tokens = event.usage.completion_tokens
                result.tokens_per_s = event.tokens_per_s
                result.ttft_s = event.timings.ttft_s
                result.prompt_tokens_per_s = event.timings.prompt_tps(event.usage.prompt_tokens)
    except InglenookError as exc:
        result.error = str(exc)
    finally:
        if timer is not None:
            timer.cancel()
    log.info("self-test took %.1f s in all (model load included)", time.perf_counter() - started)
    return result

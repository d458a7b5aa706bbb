"""What this machine is (for keying results) and how much memory a process uses."""

from __future__ import annotations

import logging
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

import psutil

from ..runtime import supports_gpu_offload

log = logging.getLogger(__name__)


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _nvidia_smi(*query: str) -> list[str]:
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        done = subprocess.run([tool, *query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def gpu_name() -> str:
    """The GPU llama.cpp can offload to, or "none" (a CPU-only build counts as none)."""
    if not supports_gpu_offload():
        return "none"
    names = _nvidia_smi("--query-gpu=name")
    return names[0] if names else "gpu"


def machine_key() -> str:
    return f"{socket.gethostname()} | {cpu_model()} | {gpu_name()}"


def rss_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


def vram_bytes() -> int | None:
    """GPU memory this process holds (NVIDIA only), or None when it cannot be known."""
    pid = str(os.getpid())
    for line in _nvidia_smi("--query-compute-apps=pid,used_memory"):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == pid and parts[1].isdigit():
            return int(parts[1]) * 1024 * 1024
    return None


def available_ram() -> int:
    return int(psutil.virtual_memory().available)

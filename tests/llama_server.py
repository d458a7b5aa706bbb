"""llama-server from the same vendored llama.cpp, for tests that compare with it or use it
as a remote engine: started on a free loopback port, skipped where it was not built."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def running_llama_server(model: Path, *extra: str) -> Iterator[str]:
    """llama-server on ``model`` (context 1024, 2 threads, plus ``extra`` arguments); yields
    its OpenAI base URL. Skips the test when the binary is not built."""
    info = subprocess.run([sys.executable, str(ROOT / "scripts" / "llama_build.py"), "info"],
                          capture_output=True, text=True)
    binary = Path(json.loads(info.stdout)["folder"]) / "cmake" / "bin" / "llama-server" if info.returncode == 0 else None
    if binary is None or not binary.is_file():  # building it takes minutes: only use it when it is there
        pytest.skip("llama-server is not built here (scripts/llama_build.py llama-server builds it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                                "-c", "1024", "-t", "2", *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            assert process.poll() is None and time.monotonic() < deadline, "llama-server did not start"
            time.sleep(0.3)
        yield url + "/v1"
    finally:
        process.terminate()
        process.wait(10)

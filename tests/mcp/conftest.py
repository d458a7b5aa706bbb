"""Fixtures for the MCP tests: real servers (mcp-server-time from PyPI, the SDK test servers of
``servers.py``), started as a person's config would start them."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from inglenook.engine.tools import McpServerConfig

ROOT = Path(__file__).resolve().parents[2]


def served(name: str, mode: str, **extra: object) -> McpServerConfig:
    """A stdio config that runs ``servers.py`` in ``mode``."""
    return McpServerConfig(name, command=sys.executable, args=("-m", "tests.mcp.servers", mode), cwd=str(ROOT),
                           **extra)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def time_server_command() -> list[str]:
    found = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent)) or shutil.which("mcp-server-time")
    if found is None:
        pytest.fail("mcp-server-time is not installed; it is in the dev extra (pip install -e '.[dev]')")
    return [found, "--local-timezone", "UTC"]


@pytest.fixture
def http_server() -> Iterator[str]:
    """The SDK test server over Streamable HTTP on a free loopback port; its /mcp URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "tests.mcp.servers", "http", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(300):
            if process.poll() is not None:
                pytest.fail(f"the HTTP test server ended: {process.stderr.read().decode() if process.stderr else ''}")
            try:
                httpx.get(url, timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)

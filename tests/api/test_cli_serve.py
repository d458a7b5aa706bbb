"""`inglenook serve`: the headless server as a person starts and stops it."""

from __future__ import annotations

import signal
import subprocess
import sys

import httpx
import pytest

from .conftest import STARTER

pytestmark = pytest.mark.api


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "inglenook", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_serve_answers_and_stops_on_ctrl_c(home, smollm2_path) -> None:
    process = start("--port", "0", "--model", "smollm2", "--api-key", "k")
    try:
        line = process.stdout.readline()
        assert line.startswith("Serving the OpenAI-compatible API at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].strip()
        models = httpx.get(url + "/models", headers={"authorization": "Bearer k"}, timeout=60)
        assert models.status_code == 200 and STARTER in [m["id"] for m in models.json()["data"]]
        assert httpx.get(url + "/models", timeout=60).status_code == 401
        reply = httpx.post(
            url + "/chat/completions", headers={"authorization": "Bearer k"}, timeout=600,
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "temperature": 0},
        )
        assert reply.json()["model"] == STARTER  # --model answers for unknown names
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "Traceback" not in err


def test_serve_refuses_a_network_address_without_a_key(home) -> None:
    process = start("--host", "0.0.0.0", "--port", "0")
    _, err = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "API key" in err and "Traceback" not in err

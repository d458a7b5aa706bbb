"""``inglenook run`` tells a long prompt's reading on a terminal, and only there: one line on
stderr, redrawn in place and erased before the answer prints; a pipe gets none of it."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

WORDS = ("alpha", "beta", "gamma", "delta", "omega", "sigma")
LONG = " ".join(WORDS[i % len(WORDS)] for i in range(700)) + ". Say one word."  # ~740 tokens


def run(home: Path, stderr: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "INGLENOOK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "inglenook", "run", "smollm2", LONG, "--temperature", "0",
                           "--max-tokens", "4"], stdout=subprocess.PIPE, stderr=stderr, env=env, timeout=300)


def read_all(fd: int) -> str:
    data = b""
    while True:
        try:
            piece = os.read(fd, 4096)
        except OSError:  # Linux: EIO once the other side is closed
            break
        if not piece:
            break
        data += piece
    return data.decode(errors="replace")


def test_a_terminal_sees_the_reading_then_the_line_is_erased(home: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        result = run(home, stderr=terminal)
        os.close(terminal)
        shown = read_all(controller)
    finally:
        os.close(controller)
    assert result.returncode == 0, shown
    assert "\rReading 0 of " in shown  # drawn as soon as the prompt was admitted
    last = shown.rindex("Reading")
    line = shown[last:].split("\r")[0]
    assert shown[last + len(line):].startswith("\r" + " " * len(line) + "\r"), "erased before the answer"
    assert "Reading" not in result.stdout.decode()


def test_a_pipe_gets_no_progress(home: Path) -> None:
    result = run(home, stderr=subprocess.PIPE)
    assert result.returncode == 0, result.stderr
    assert b"Reading" not in result.stderr

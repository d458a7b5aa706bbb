"""The engine's side of the Piper helper: starts ``piper_helper.py`` in a child process and
reads its audio back over the pipe (the protocol is in that file's docstring).

One process per voice, started on first use and kept (loading a voice takes about a second);
requests to it run one at a time. A request abandoned half-way is drained before the next.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..base import InglenookError

log = logging.getLogger(__name__)

HELPER = Path(__file__).with_name("piper_helper.py")
# The packaged app carries the helper as a program of its own beside the main one
# (packaging/inglenook.spec): piper and espeak-ng are GPL-3.0, so they ship as a separate
# executable with its own archive of Python modules, never inside Inglenook's.
BUNDLED_HELPER = "inglenook-voice.exe" if sys.platform == "win32" else "inglenook-voice"


class VoiceUnavailable(InglenookError):
    """Speech cannot be made: piper-tts (the optional ``voice`` extra) or the voice is missing,
    or its helper process failed."""

    code = "voice_unavailable"


def bundled_helper() -> Path | None:
    """The packaged app's voice program, where this is the packaged app and it has one."""
    if not getattr(sys, "frozen", False):
        return None
    program = Path(sys.executable).with_name(BUNDLED_HELPER)
    return program if program.is_file() else None


def piper_installed() -> bool:
    """Whether Piper can run: the packaged app's voice program, or ``piper-tts`` installed
    beside this Python (found without importing it into this process)."""
    if getattr(sys, "frozen", False):
        return bundled_helper() is not None
    try:
        return importlib.util.find_spec("piper") is not None
    except (ImportError, ValueError):
        return False


def helper_command(python: str) -> list[str]:
    """How the helper is started: the bundled program, or ``python piper_helper.py`` — run
    by path, not as a module of ours, since it imports piper and nothing of Inglenook."""
    program = bundled_helper()
    return [str(program)] if program is not None else [python, str(HELPER)]


class VoiceProcess:
    """A running Piper helper for one voice file."""

    def __init__(self, model: Path, threads: int = 1, python: str | None = None) -> None:
        self.model = model
        self.threads = threads
        self.python = python or sys.executable
        self.sample_rate = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _started(self) -> subprocess.Popen[bytes]:
        process = self._process
        if process is not None and process.poll() is None:
            return process
        if not piper_installed():
            raise VoiceUnavailable("text to speech needs piper-tts: pip install 'inglenook[voice]'")
        process = subprocess.Popen(
            [*helper_command(self.python), "--model", str(self.model), "--threads", str(self.threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        assert process.stdout is not None
        ready = _message(process.stdout)
        if not ready or not ready.get("ready"):
            process.kill()
            process.wait()
            raise VoiceUnavailable(f"the voice {self.model.stem} could not be loaded by Piper")
        self.sample_rate = int(ready["sample_rate"])
        self._process = process
        return process

    def start(self) -> int:
        """Start the helper now (else the first request does); its sample rate."""
        with self._lock:
            self._started()
            return self.sample_rate

    def speak(self, text: str, length_scale: float = 1.0) -> Iterator[bytes]:
        """Mono int16 PCM at ``sample_rate``, a sentence at a time as Piper makes it."""
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(json.dumps({"text": text, "length_scale": length_scale}).encode() + b"\n")
                process.stdin.flush()
            except BrokenPipeError:
                self._process = None
                raise VoiceUnavailable("the Piper helper process ended") from None
            finished = False
            try:
                while True:
                    message = _message(process.stdout)
                    if message is None:
                        self._process = None
                        raise VoiceUnavailable("the Piper helper process ended")
                    if "audio" in message:
                        yield _exactly(process.stdout, int(message["audio"]))
                    elif "error" in message:
                        finished = True
                        raise VoiceUnavailable(f"Piper could not speak this text: {message['error']}")
                    else:
                        finished = True
                        return
            finally:
                if not finished and self._process is process:
                    _drain(process.stdout)

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()  # the helper's loop ends at end of input
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _message(stream: IO[bytes]) -> dict[str, Any] | None:
    line = stream.readline()
    if not line:
        return None
    value = json.loads(line)
    return value if isinstance(value, dict) else None


def _exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise VoiceUnavailable("the Piper helper process ended mid-sentence")
    return data


def _drain(stream: IO[bytes]) -> None:
    """Read and drop the rest of an abandoned request, so the next one starts at its own reply."""
    while True:
        message = _message(stream)
        if message is None or "audio" not in message:
            return
        _exactly(stream, int(message["audio"]))

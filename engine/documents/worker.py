"""Converting a document off the caller's thread and out of its process.

``convert_file`` starts the conversion worker (``child.py``) with ``sys.executable -m`` (the
packaged app's one program runs ``-m`` modules too), hands it the path and the limits, and
waits at most ``Limits.timeout_s``: a file that hangs a parser, eats memory or crashes native
code ends that process, and the caller gets a ``DocumentError`` saying which. A file over the
size limit is refused from its size alone, before anything reads it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from ..base import DocumentError
from .document import Document, Limits

log = logging.getLogger(__name__)
CHILD = "inglenook.engine.documents.child"


def convert_file(path: Path | str, limits: Limits | None = None, name: str | None = None) -> Document:
    """The document in ``path`` as text, converted in a worker process under ``limits``."""
    limits = limits or Limits()
    path = Path(path)
    name = name or path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DocumentError(f"{name} cannot be read: {exc.strerror or exc}") from None
    if not path.is_file():
        raise DocumentError(f"{name} is not a file")
    if size > limits.max_file_bytes:
        raise DocumentError(f"{name} is {size // (1024 * 1024)} MB; documents are limited to "
                            f"{limits.max_file_bytes // (1024 * 1024)} MB")
    request = json.dumps({"path": str(path.resolve()), "name": name, "limits": asdict(limits)})
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", CHILD], input=request + "\n", capture_output=True, text=True,
            timeout=limits.timeout_s,  # wall time, start included; the child's CPU limit is a second guard
            env=env, check=False,
        )
    except subprocess.TimeoutExpired:
        raise DocumentError(f"{name} took longer than {limits.timeout_s:g} s to convert; it was stopped") from None
    reply = _reply(done.stdout)
    if reply is None:
        log.info("document worker for %s ended with %s; stderr: %s", name, done.returncode, done.stderr[-2000:])
        raise DocumentError(_death(name, done.returncode, limits))
    if "error" in reply:
        raise DocumentError(str(reply["error"]))
    return Document.from_dict(reply["document"])


def convert_bytes_safely(name: str, data: bytes, limits: Limits | None = None) -> Document:
    """``convert_file`` for bytes in memory (an API request's base64 file): written to a
    private temporary file for the worker, removed after."""
    limits = limits or Limits()
    if len(data) > limits.max_file_bytes:
        raise DocumentError(f"{name} is {len(data) // (1024 * 1024)} MB; documents are limited to "
                            f"{limits.max_file_bytes // (1024 * 1024)} MB")
    with tempfile.TemporaryDirectory(prefix="inglenook-doc-") as folder:
        path = Path(folder) / "document"
        path.write_bytes(data)
        return convert_file(path, limits, name=name)


def _reply(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and ("document" in value or "error" in value):
            return value
    return None


def _death(name: str, returncode: int, limits: Limits) -> str:
    """Why a worker ended without a reply, for a person."""
    if returncode in (-9, -24, 137, 152):  # SIGKILL / SIGXCPU: a limit
        return f"{name} could not be converted within {limits.timeout_s:.0f} s of CPU time"
    if returncode in (-11, -6, 134, 139):
        return f"{name} crashed the document converter (a damaged or hostile file)"
    return (f"{name} could not be converted: the converter stopped (status {returncode}), "
            f"possibly over its {limits.memory_bytes // 2**20} MB memory limit")

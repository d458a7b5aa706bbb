"""The conversion worker: ``python -m inglenook.engine.documents.child`` reads a request (JSON
on stdin: the file's path and the limits), converts the file, and writes one JSON line on
stdout: the document, or the error. Conversion libraries parse untrusted files in native
code, so they run here, under an address-space and CPU-time limit, where a hang or a crash
costs this process and not the engine (``worker.py`` kills it past the time limit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _limit_resources(memory_bytes: int, cpu_s: float) -> None:
    try:
        import resource  # noqa: PLC0415 — POSIX only
    except ImportError:  # Windows: the parent's timeout still ends a runaway conversion
        return
    for kind, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_CPU, int(cpu_s) + 1)):
        try:
            _, hard = resource.getrlimit(kind)
            resource.setrlimit(kind, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
        except (ValueError, OSError):
            pass


def main() -> int:
    request = json.loads(sys.stdin.readline())
    from .document import Limits  # noqa: PLC0415 — after the limits are set, nothing heavy before

    limits = Limits(**request["limits"])
    _limit_resources(limits.memory_bytes, limits.timeout_s)
    from ..base import DocumentError  # noqa: PLC0415
    from .convert import convert_bytes  # noqa: PLC0415

    reply: dict[str, Any]
    try:
        data = Path(request["path"]).read_bytes()
        document = convert_bytes(request["name"], data, limits)
        reply = {"document": document.as_dict()}
    except DocumentError as exc:
        reply = {"error": str(exc)}
    except MemoryError:
        reply = {"error": f"{request['name']} needs more than {limits.memory_bytes // 2**20} MB to convert"}
    except OSError as exc:
        reply = {"error": f"{request['name']} cannot be read: {exc.strerror or exc}"}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

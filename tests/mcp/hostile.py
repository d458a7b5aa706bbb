"""Hostile stdio MCP servers written in raw JSON-RPC (no SDK: they do what a broken or
malicious server does), run as ``python -m tests.mcp.hostile MODE [ARG]``.

leak_token: prints ``token=$API_TOKEN`` to stderr and exits before answering anything.
long_line MB: one stderr line of MB megabytes, then exits.
flood MB: MB megabytes of stderr lines, then exits.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> None:
    mode = argv[0]
    err = sys.stderr.buffer
    if mode == "leak_token":
        err.write(f"starting with token={os.environ.get('API_TOKEN', '')}\n".encode())
        err.flush()
        sys.exit(1)
    if mode == "long_line":
        err.write(b"x" * (int(argv[1]) << 20) + b"\n")
        err.flush()
        sys.exit(1)
    if mode == "flood":
        line = b"the same complaint, over and over, to fill the disk " * 19 + b"\n"  # ~1 KB
        for _ in range((int(argv[1]) << 20) // len(line)):
            err.write(line)
        err.write(b"the last words\n")
        err.flush()
        sys.exit(1)
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""MCP test servers written with the SDK's MCPServer (FastMCP), one behaviour each, run as
``python -m tests.mcp.servers MODE`` (stdio) or ``... http PORT`` (Streamable HTTP on loopback).

ok: echo/add tools. fail_start: exits at once with a message on stderr. hang_init: never
answers initialize. hang_call, crash_call, big (a 10 MB answer) and image behave so in their
one tool. malformed: writes non-JSON-RPC lines on stdout instead of answers.
"""

from __future__ import annotations

import base64
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent

BIG_CHARS = 10 * 1024 * 1024


def build() -> MCPServer:
    server = MCPServer("inglenook-test")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Never answers.")
    def hang() -> str:
        time.sleep(3600)
        return "late"

    @server.tool(description="Ends the server's process mid-call.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Answers 10 MB of text.")
    def big() -> str:
        return "x" * BIG_CHARS

    @server.tool(description="Answers a picture.")
    def picture() -> list[ImageContent]:
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
        return [ImageContent(type="image", data=png, mime_type="image/png")]

    return server


def main(argv: list[str]) -> None:
    mode = argv[0] if argv else "ok"
    if mode == "fail_start":
        print("cannot open the database: /nowhere/db.sqlite", file=sys.stderr, flush=True)
        sys.exit(2)
    if mode == "hang_init":
        print("warming up forever", file=sys.stderr, flush=True)
        time.sleep(3600)
    if mode == "malformed":
        for line in sys.stdin:
            sys.stdout.write("this is not JSON-RPC: " + line[:20] + "\n")
            sys.stdout.flush()
        return
    if mode == "http":
        build().run("streamable-http", host="127.0.0.1", port=int(argv[1]))
        return
    build().run()


if __name__ == "__main__":
    main(sys.argv[1:])

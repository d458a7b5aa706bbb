"""What an MCP server's connection is doing, as the manager, Settings and the CLI name it.

Apart from ``connection.py`` so that reading a state does not load what running a server
needs (asyncio, the SDK): a terminal chat without tools never starts one.
"""

from __future__ import annotations

STARTING, READY, FAILED, CLOSED = "starting", "ready", "failed", "closed"
#: A Streamable HTTP server that asks for OAuth, and no tokens (or none that refresh) here.
NEEDS_SIGN_IN = "needs sign-in"

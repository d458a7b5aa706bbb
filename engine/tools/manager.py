"""The running MCP servers of one engine: started on first use, one connection per server,
all ended when the engine closes (and at interpreter exit: no orphaned processes)."""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..store import Store
from .config import HTTP, McpError, McpServerConfig
from .oauth_tokens import forget_sign_in, signed_in
from .registry import McpServers
from .secrets import SecretBox
from .states import FAILED, NEEDS_SIGN_IN, READY, STARTING

if TYPE_CHECKING:
    from .connection import McpConnection, McpTool
    from .oauth import Opener

log = logging.getLogger(__name__)

_LIVE: weakref.WeakSet[McpManager] = weakref.WeakSet()


@atexit.register
def _close_everything() -> None:
    for manager in list(_LIVE):
        manager.close()


@dataclass(frozen=True)
class ServerState:
    """What Settings → Tools and ``mcp list`` show of a server."""

    name: str
    state: str  # "stopped", "starting", "ready", "failed", "needs sign-in"
    tools: tuple[McpTool, ...]
    error: str
    stderr: tuple[str, ...]
    signed_in: bool = False  # OAuth tokens are kept for it (a Streamable HTTP server that asked)


class McpManager:
    def __init__(self, store: Store) -> None:
        self.servers = McpServers(store)
        self._connections: dict[str, McpConnection] = {}
        self._lock = threading.Lock()
        _LIVE.add(self)

    def connection(self, name: str, wait: bool = True) -> McpConnection:
        """The running connection to ``name``, started now if it is not (or failed before)."""
        config = self.servers.get(name)
        with self._lock:
            found = self._connections.get(name)
            if found is None or found.state not in (READY, STARTING) or found.config != config:
                if found is not None:
                    found.close()
                found = _started(config, self.servers.secrets)
                self._connections[name] = found
        return found.wait_ready() if wait else found

    def test(self, config: McpServerConfig, opener: Opener | None = None,
             on_url: Callable[[str], None] | None = None) -> McpConnection:
        """Start ``config`` apart from the running ones, wait until ready (or ``McpError``);
        the caller closes it. With ``opener`` a server that asks for OAuth is signed in to."""
        connection = _started(config, self.servers.secrets, opener, on_url)
        try:
            return connection.wait_ready()
        except McpError:
            connection.close()
            raise

    def sign_in(self, name: str, opener: Opener, on_url: Callable[[str], None] | None = None) -> McpConnection:
        """Connect to ``name`` allowing the OAuth sign-in (``opener`` shows the authorization
        URL in a browser); the connection, when ready, becomes the running one."""
        config = self.servers.get(name)
        connection = _started(config, self.servers.secrets, opener, on_url)
        with self._lock:
            previous = self._connections.get(name)
            self._connections[name] = connection
        if previous is not None:
            previous.close()
        return connection.wait_ready()

    def sign_out(self, name: str) -> bool:
        """Forget ``name``'s OAuth tokens and registered client and stop it; whether there were any."""
        self.servers.get(name)
        had = signed_in(self.servers.secrets, name)
        forget_sign_in(self.servers.secrets, name)
        self.stop(name)
        return had

    def state(self, name: str) -> ServerState:
        with self._lock:
            found = self._connections.get(name)
        config = found.config if found is not None else self.servers.find(name)
        kept = config is not None and config.transport == HTTP and signed_in(self.servers.secrets, name)
        if found is None:
            return ServerState(name, "stopped", (), "", (), kept)
        return ServerState(name, found.state, tuple(found.tools),
                           found.error if found.state in (FAILED, NEEDS_SIGN_IN) else "",
                           tuple(found.stderr_lines()), kept)

    def stop(self, name: str) -> None:
        with self._lock:
            found = self._connections.pop(name, None)
        if found is not None:
            found.close()

    def close(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.close()

    # -- tools for a chat ------------------------------------------------------------------

    def tools_for(self, names: list[str]) -> ToolSet:
        """The enabled tools of servers ``names``, started as needed; a server that fails is
        left out (its state says why) and the others are offered."""
        offered: dict[str, McpTool] = {}
        problems: list[str] = []
        for name in names:
            try:
                config = self.servers.get(name)
                if not config.enabled:
                    continue
                connection = self.connection(name)
            except McpError as exc:
                problems.append(str(exc))
                continue
            for tool in connection.tools:
                if tool.name in config.disabled_tools:
                    continue
                key = tool.name if tool.name not in offered else f"{name}__{tool.name}"
                offered[key[:64]] = tool
        return ToolSet(offered, problems)


@dataclass(frozen=True)
class ToolSet:
    """Tools offered to a model, by the name the model sees (a clash is ``server__tool``)."""

    tools: dict[str, McpTool]
    problems: list[str]

    def definitions(self) -> list[dict[str, Any]]:
        """OpenAI-shaped function tools, as the engine's templates and grammars take them."""
        return [
            {"type": "function", "function": {"name": key, "description": tool.description[:2000],
                                              "parameters": tool.input_schema or {"type": "object", "properties": {}}}}
            for key, tool in self.tools.items()
        ]


def _started(config: McpServerConfig, secrets: SecretBox, opener: Opener | None = None,
             on_url: Callable[[str], None] | None = None) -> McpConnection:
    """A connection to ``config``, starting. Its module brings asyncio, http.server and the
    SDK, so it loads when a server first starts, not with every engine: a terminal chat
    without tools never needs it (50 ms of `inglenook run`'s start)."""
    from .connection import McpConnection  # noqa: PLC0415

    return McpConnection(config, secrets=secrets, opener=opener, on_url=on_url).start()

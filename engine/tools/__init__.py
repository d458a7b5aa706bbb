"""Tools from MCP servers: their configs (SQLite, secrets in the keyring), live connections
through the official ``mcp`` SDK (OAuth sign-ins for Streamable HTTP servers that ask), results cut to fit, the person's approvals, and what rounds of
calls share.

May import: base, store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "approval": ("ALWAYS", "APPROVE", "DENY", "IN_CHAT", "ONCE", "Approver", "CallRequest", "Decision",
                 "Permissions", "approve_all"),
    "config": ("HTTP", "STDIO", "McpError", "McpServerConfig", "other_app_configs", "parse_mcp_servers",
               "parse_pairs", "read_mcp_file"),
    "connection": ("McpConnection", "McpTool"),
    "manager": ("McpManager", "ServerState", "ToolSet"),
    "registry": ("McpServers",),
    "results": ("ToolResult", "error_result"),
    "rounds": ("ANSWER_ONLY_GRAMMAR", "DEFAULT_MAX_ROUNDS"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .approval import (
        ALWAYS as ALWAYS, APPROVE as APPROVE, DENY as DENY, IN_CHAT as IN_CHAT, ONCE as ONCE, Approver as Approver,
        CallRequest as CallRequest, Decision as Decision, Permissions as Permissions, approve_all as approve_all,
    )
    from .config import (
        HTTP as HTTP, STDIO as STDIO, McpError as McpError, McpServerConfig as McpServerConfig,
        other_app_configs as other_app_configs, parse_mcp_servers as parse_mcp_servers, parse_pairs as parse_pairs,
        read_mcp_file as read_mcp_file,
    )
    from .connection import McpConnection as McpConnection, McpTool as McpTool
    from .manager import McpManager as McpManager, ServerState as ServerState, ToolSet as ToolSet
    from .registry import McpServers as McpServers
    from .results import ToolResult as ToolResult, error_result as error_result
    from .rounds import ANSWER_ONLY_GRAMMAR as ANSWER_ONLY_GRAMMAR, DEFAULT_MAX_ROUNDS as DEFAULT_MAX_ROUNDS

"""MCP tools named in a Responses request, run by this server (as OpenAI and LM Studio do).

A request's ``{"type": "mcp", "server_label": "time", ...}`` names a server the person added
(``inglenook mcp add``, Settings → Tools) by its name. It is refused (400, in the Responses
shape) unless the server exists, is enabled and the person allowed it for API clients
(``allow_api``, off by default); a ``server_url`` (a remote server the client brings) is not
supported. ``allowed_tools`` narrows the server's enabled tools; they reach the model as
function tools.

A call the model writes runs here without asking when the person set "always allow" for that
tool, or the request's ``require_approval`` says ``never`` for it; otherwise it becomes an
``mcp_approval_request`` item the client answers with an ``mcp_approval_response`` in a
request that continues this one (``previous_response_id``).
"""

from __future__ import annotations

import json
import threading
import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from ...base import InvalidRequest, NamedFunction, NamedToolChoice, Tool
from ...store import Store
from ...tools import McpError, McpManager, McpTool, Permissions, ToolResult, error_result
from ..shared import ApiError
from .output import McpApprovalRequestItem, McpCallItem, McpListedTool, McpListToolsItem, new_id
from .protocol import MCP_APPROVAL_REQUEST, MCP_APPROVAL_RESPONSE, MCP_CALL, MCP_LIST_TOOLS, ResponsesTool

log = logging.getLogger(__name__)

_ALWAYS_ID = 0  # mcp_permissions' conversation id for "always allow"


def _refuse(message: str, code: str = "invalid_value", status: int = 400) -> ApiError:
    return ApiError(status, message, code=code, param="tools")


@dataclass
class McpServerUse:
    """One server as this request uses it: its offered tools and the request's approval words."""

    label: str
    tools: list[McpTool]
    never: frozenset[str]  # tools the request runs without approval
    listed: bool  # the chain already holds its mcp_list_tools item


@dataclass
class McpRequest:
    """The MCP servers of one request, their tools by the name the model sees them by."""

    manager: McpManager
    store: Store
    servers: dict[str, McpServerUse]
    by_name: dict[str, McpTool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for use in self.servers.values():
            for tool in use.tools:
                key = tool.name if tool.name not in self.by_name else f"{use.label}__{tool.name}"
                self.by_name[key[:64]] = tool

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.by_name)

    def functions(self, taken: set[str]) -> list[Tool]:
        """The tools as function tools (a name a client's function already has is refused)."""
        clash = sorted(taken & set(self.by_name))
        if clash:
            raise _refuse(f"the MCP tool {clash[0]!r} has the name of a function tool in this request; "
                          "rename the function or leave the tool out with allowed_tools")
        return [Tool.model_validate({"type": "function", "function": {
            "name": key, "description": tool.description[:2000] or None,
            "parameters": tool.input_schema or {"type": "object", "properties": {}}}})
            for key, tool in self.by_name.items()]

    def choice(self, wanted: dict[str, Any]) -> NamedToolChoice | Literal["required"]:
        """``tool_choice: {"type": "mcp", "server_label": ..., "name": ...}`` in the chat shape."""
        label, name = wanted.get("server_label"), wanted.get("name")
        if label not in self.servers:
            raise ApiError(400, f"tool_choice names the MCP server {label!r}, which this request's tools do not",
                           code="invalid_value", param="tool_choice")
        if not name:
            return "required"
        for key, tool in self.by_name.items():
            if tool.server == label and tool.name == name:
                return NamedToolChoice(function=NamedFunction(name=key))
        raise ApiError(400, f"tool_choice names {name!r}, which is not among {label}'s offered tools",
                       code="invalid_value", param="tool_choice")

    def listing_items(self) -> list[McpListToolsItem]:
        """An ``mcp_list_tools`` item per server this chain has not listed yet."""
        return [McpListToolsItem(id=new_id("mcpl"), server_label=use.label, tools=[
            McpListedTool(name=t.name, description=t.description or None, input_schema=t.input_schema or {})
            for t in use.tools]) for use in self.servers.values() if not use.listed]

    def runs_unasked(self, tool: McpTool) -> bool:
        """The person allowed it always, or the request said ``never`` (the server is allowed
        for API clients, or the request was refused before now)."""
        return tool.name in self.servers[tool.server].never or Permissions(self.store).allowed(
            tool.server, tool.name, _ALWAYS_ID)

    def approval_request(self, tool: McpTool, arguments: str) -> McpApprovalRequestItem:
        return McpApprovalRequestItem(id=new_id("mcpr"), server_label=tool.server, name=tool.name,
                                      arguments=arguments or "{}")

    def server_of(self, label: str, what: str) -> McpServerUse:
        found = self.servers.get(label)
        if found is None:
            raise ApiError(400, f"{what} is a call of the MCP server {label!r}, which this request's tools do not "
                           "name: send the same mcp tool again with the approval", code="invalid_value", param="input")
        return found

    def call(self, item: McpCallItem, cancel: threading.Event | None = None) -> McpCallItem:
        """Run the call ``item`` describes (blocking: a worker thread's job); the item done,
        failed when the tool failed or ``cancel`` was set (the client went away)."""
        arguments = _arguments(item.arguments)
        if arguments is None:
            result: ToolResult = error_result(f"the arguments are not a JSON object: {item.arguments[:200]}")
        else:
            try:
                result = self.manager.connection(item.server_label).call(item.name, arguments, cancel=cancel)
            except McpError as exc:  # the client sees the public words; the log has the server's own
                result = error_result(exc.public)
        log.info("responses: MCP call %s/%s %s", item.server_label, item.name, "failed" if result.is_error else "ran")
        if result.is_error:
            return item.model_copy(update={"status": "failed", "error": result.text.removeprefix("Error: ")})
        return item.model_copy(update={"status": "completed", "output": result.text})


def _arguments(text: str) -> dict[str, Any] | None:
    try:
        found = json.loads(text) if text.strip() else {}
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def mcp_request(tools: list[ResponsesTool] | None, history: list[dict[str, Any]], manager: McpManager,
                store: Store) -> McpRequest | None:
    """The request's MCP servers, started and listed (blocking), or None when it names none.
    Raises ``ApiError`` (400) for a server that cannot be used, saying how to allow it."""
    named = [(index, tool) for index, tool in enumerate(tools or []) if tool.type == "mcp"]
    if not named:
        return None
    listed_before = {item.get("server_label") for item in history if item.get("type") == MCP_LIST_TOOLS}
    servers: dict[str, McpServerUse] = {}
    for index, tool in named:
        label = tool.server_label or ""
        if tool.server_url or tool.connector_id or tool.tunnel_id:
            raise _refuse(f"tools[{index}]: remote MCP servers given by the client (server_url, connector_id, "
                          "tunnel_id) are not supported; add the server to Inglenook (inglenook mcp add NAME URL), "
                          "allow it for API clients, and name it with server_label alone", "unsupported_value")
        if not label:
            raise _refuse(f"tools[{index}]: an mcp tool needs server_label, the name of a server added to Inglenook")
        if label in servers:
            raise _refuse(f"tools[{index}]: the MCP server {label!r} is named twice")
        config = manager.servers.find(label)
        if config is None:
            names = ", ".join(c.name for c in manager.servers.all()) or "none yet"
            raise _refuse(f"tools[{index}]: there is no MCP server named {label!r} here (servers: {names}); add it "
                          "with inglenook mcp add or in Settings → Tools")
        if not config.allow_api:
            raise _refuse(f"tools[{index}]: the MCP server {label!r} is not allowed for API clients; allow it in "
                          f"Settings → Tools (\"Allow for API clients\") or with: inglenook mcp allow-api {label} on",
                          "mcp_server_not_allowed")
        if not config.enabled:
            raise _refuse(f"tools[{index}]: the MCP server {label!r} is switched off; enable it in Settings → Tools")
        try:
            connection = manager.connection(label)
        except McpError as exc:
            raise _refuse(f"tools[{index}]: {exc.public}", "mcp_server_unavailable", status=424) from None
        offered = [t for t in connection.tools if t.name not in config.disabled_tools]
        allowed = _tool_names(tool.allowed_tools, f"tools[{index}].allowed_tools")
        if allowed is not None:
            offered = [t for t in offered if t.name in allowed]
        servers[label] = McpServerUse(label, offered, _never(tool.require_approval, offered, index),
                                      label in listed_before)
    return McpRequest(manager, store, servers)


def _tool_names(value: list[str] | dict[str, Any] | None, where: str) -> set[str] | None:
    """A tool filter (a list of names, or ``{"tool_names": [...]}``) as names; None: all."""
    if value is None:
        return None
    names = value if isinstance(value, list) else value.get("tool_names")
    if names is None:  # a filter by read_only alone: tools here carry no such hint, so all
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ApiError(400, f"{where} must list tool names", code="invalid_value", param="tools")
    return set(names)


def _never(value: str | dict[str, Any] | None, offered: list[McpTool], index: int) -> frozenset[str]:
    """The tools ``require_approval`` exempts: all for ``never``, none for ``always`` (the
    default), else the ``never`` filter's names less the ``always`` filter's."""
    names = {t.name for t in offered}
    if value is None or value == "always":
        return frozenset()
    if value == "never":
        return frozenset(names)
    if isinstance(value, dict):
        never = _tool_names(value.get("never"), f"tools[{index}].require_approval.never") or set()
        always = _tool_names(value.get("always"), f"tools[{index}].require_approval.always") or set()
        return frozenset((never & names) - always)
    raise ApiError(400, f"tools[{index}].require_approval must be always, never or a filter",
                   code="invalid_value", param="tools")


def approved_calls(items: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The approval requests this request's ``mcp_approval_response`` items approve, not yet run."""
    asked = {item["id"]: item for item in history if item.get("type") == MCP_APPROVAL_REQUEST and item.get("id")}
    ran = {item.get("approval_request_id") for item in history if item.get("type") == MCP_CALL}
    approved = []
    for index, item in enumerate(items):
        if item.get("type") != MCP_APPROVAL_RESPONSE or not item.get("approve"):
            continue
        request_id = item.get("approval_request_id")
        found = asked.get(request_id or "")
        if found is None:
            raise InvalidRequest(f"input[{index}] approves {request_id!r}, which is not an approval request of "
                                 "this response's chain (previous_response_id)", param="input")
        if request_id not in ran:
            approved.append(found)
    return approved

"""What an MCP server is: how to start or reach it, read from a form, a command line or the
``mcpServers`` JSON that Claude Desktop, Cursor and LM Studio (``mcp.json``) share.

A config carries its secrets (environment values, header values) while it is being added;
``registry`` splits them off into the keyring before anything is written to SQLite.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

from ..base import InglenookError, read_bounded

STDIO, HTTP = "stdio", "http"
#: How long a call may run before it is given up, unless the server's config says otherwise.
DEFAULT_TIMEOUT_S = 60.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")
#: An mcpServers file is a few kilobytes; anything far larger is not one.
MAX_CONFIG_BYTES = 1 << 20


class McpError(InglenookError):
    """An MCP server cannot be added, started or called; the message says why, in one line."""

    code = "mcp_error"

    def __init__(self, message: str, public: str | None = None) -> None:
        super().__init__(message)
        #: What an API client may be told: no words of the server's own (its stderr may hold
        #: a token it was given), where ``str(error)`` is for the person who runs it.
        self.public = message if public is None else public


@dataclass(frozen=True)
class McpServerConfig:
    """One server: stdio (``command`` + ``args``, ``env``, ``cwd``) or Streamable HTTP (``url``,
    ``headers``). ``env`` and ``headers`` values are secrets: never logged, never in SQLite."""

    name: str
    transport: str = STDIO
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    disabled_tools: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    allow_api: bool = False  # API clients may have it run (off by default)

    def __post_init__(self) -> None:
        validated_name(self.name)
        if self.transport == STDIO:
            if not self.command.strip():
                raise McpError(f"MCP server {self.name!r} has no command to start")
        elif self.transport == HTTP:
            if not re.match(r"^https?://[^\s/]+", self.url):
                raise McpError(f"MCP server {self.name!r} needs an http:// or https:// URL, not {self.url!r}")
        else:
            raise McpError(f"MCP server {self.name!r} has an unknown transport {self.transport!r}")
        if not self.timeout_s > 0:
            raise McpError(f"MCP server {self.name!r}: the call timeout must be above 0 seconds")

    def __repr__(self) -> str:  # secrets stay out of logs and tracebacks
        where = self.target
        return f"McpServerConfig({self.name!r}, {self.transport}, {where!r}, env={sorted(self.env)}, " \
               f"headers={sorted(self.headers)})"

    __str__ = __repr__

    def with_secrets(self, env: dict[str, str], headers: dict[str, str]) -> McpServerConfig:
        return replace(self, env=dict(env), headers=dict(headers))

    @property
    def target(self) -> str:
        """Where it runs, for lists: the command line or the URL (its credentials masked)."""
        return masked_url(self.url) if self.transport == HTTP else " ".join([self.command, *self.args])

    @property
    def url_secret(self) -> bool:
        """Whether the URL carries credentials (kept with the secrets, not in SQLite)."""
        return bool(url_credentials(self.url))

    def secret_values(self) -> list[str]:
        """The values this server was given in secret (env, headers, the URL's credentials),
        longest first, for masking wherever the server's own words are shown or logged."""
        found = [*self.env.values(), *self.headers.values(), *url_credentials(self.url)]
        # A value of a character or two would mask half a message and hides nothing.
        return sorted({v for v in found if len(v) >= 4}, key=len, reverse=True)


def _split(url: str) -> SplitResult | None:
    try:
        return urlsplit(url)
    except ValueError:
        return None


def url_credentials(url: str) -> list[str]:
    """The secret parts of ``url``: its user, password and query values (``?token=…``)."""
    parts = _split(url)
    if parts is None:
        return []
    found = [v for v in (parts.username, parts.password) if v]
    return found + [v for _k, v in parse_qsl(parts.query, keep_blank_values=False)]


def public_url(url: str) -> str:
    """``url`` without its credentials (user, password, query): what SQLite keeps; the whole
    URL goes to the secrets with env and header values."""
    parts = _split(url)
    if parts is None or not url_credentials(url):
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", parts.fragment))


def masked_url(url: str) -> str:
    """``url`` as lists show it: user, password and query values as ``***``."""
    parts = _split(url)
    if parts is None or not url_credentials(url):
        return url
    host = parts.netloc.rpartition("@")[2]
    netloc = f"***@{host}" if "@" in parts.netloc else host
    query = urlencode([(k, "***") for k, _v in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_secrets(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (longest first) replaced by ``***``."""
    for value in secrets:
        text = text.replace(value, "***")
    return text


def validated_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise McpError(f"{name!r} is not a usable server name: letters, digits, '.', '_' or '-', "
                       "at most 40, starting with a letter or digit")
    return name


def parse_pairs(pairs: list[str], what: str) -> dict[str, str]:
    """``K=V`` (or ``K: V`` for headers) strings from a command line -> a dict."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep and what == "header":
            key, sep, value = pair.partition(":")
        if not sep or not key.strip():
            raise McpError(f"{what} {pair.split('=')[0]!r} must be written KEY=VALUE")
        found[key.strip()] = value.strip() if what == "header" else value
    return found


def parse_mcp_servers(text: str) -> list[McpServerConfig]:
    """The servers in an ``mcpServers`` JSON document (the whole file, or just its object).

    Entries with ``command`` are stdio; with ``url`` (or ``serverUrl``) Streamable HTTP. A
    disabled entry (``"disabled": true``, Cursor and Cline write it) is kept, disabled."""
    if len(text) > MAX_CONFIG_BYTES or len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise McpError("this is too large to be an mcpServers file (over 1 MB)")
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise McpError(f"this is not JSON: {exc}") from None
    except RecursionError:  # the json module recurses once per level: 100,000 "[" end it
        raise McpError("this is not an mcpServers file: its JSON is nested too deeply") from None
    if not isinstance(document, dict):
        raise McpError('expected a JSON object with "mcpServers"')
    servers = document.get("mcpServers", document.get("servers", document))
    if not isinstance(servers, dict) or not servers:
        raise McpError('no servers found: expected {"mcpServers": {"name": {"command": ...}}}')
    return [_entry(name, entry) for name, entry in servers.items()]


def read_mcp_file(file: str | Path) -> list[McpServerConfig]:
    """The servers of the ``mcpServers`` file ``file`` (``-``: standard input), read with a
    bound: a device, a FIFO or a file over ``MAX_CONFIG_BYTES`` is refused before it is read."""
    if str(file) == "-":
        import sys  # noqa: PLC0415

        data = sys.stdin.buffer.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            raise McpError("this is too large to be an mcpServers file (over 1 MB)")
    else:
        data = read_bounded(file, MAX_CONFIG_BYTES, f"{file} (an mcpServers file)", error=McpError)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise McpError(f"cannot read {file}: it is not UTF-8 text") from None
    return parse_mcp_servers(text)


def _entry(name: str, entry: Any) -> McpServerConfig:
    if not isinstance(entry, dict):
        raise McpError(f"server {name!r} must be a JSON object")
    url = entry.get("url") or entry.get("serverUrl") or ""
    kind = str(entry.get("type") or entry.get("transport") or "")
    if kind == "sse":
        raise McpError(f"server {name!r} uses the old SSE transport; only stdio and Streamable HTTP are supported")
    common: dict[str, Any] = {"enabled": not bool(entry.get("disabled", False))}
    if entry.get("timeout") is not None:
        common["timeout_s"] = _number(name, entry["timeout"]) / (1000.0 if entry["timeout"] > 1000 else 1.0)
    if url:
        return McpServerConfig(name, HTTP, url=str(url), headers=_strings(name, entry.get("headers"), "headers"),
                               **common)
    command = entry.get("command")
    if not isinstance(command, str):
        raise McpError(f"server {name!r} has neither a command nor a url")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise McpError(f"server {name!r}: args must be a list of strings")
    return McpServerConfig(name, STDIO, command=command, args=tuple(str(a) for a in args),
                           env=_strings(name, entry.get("env"), "env"), cwd=str(entry.get("cwd") or ""), **common)


def _strings(name: str, value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise McpError(f"server {name!r}: {what} must be an object of strings")
    return {str(k): str(v) for k, v in value.items()}


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise McpError(f"server {name!r}: timeout must be a number")
    return float(value)


def other_app_configs(home: Path | None = None) -> list[tuple[str, Path]]:
    """The ``mcpServers`` files of other apps on this machine, (app, path), where they exist:
    Claude Desktop, Cursor, LM Studio. Nothing is read into Inglenook without the person's say."""
    home = Path.home() if home is None else home
    appdata = Path(os.environ.get("APPDATA", home / "AppData" / "Roaming"))
    candidates = [
        ("Claude Desktop", home / ".config" / "Claude" / "claude_desktop_config.json"),
        ("Claude Desktop", home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"),
        ("Claude Desktop", appdata / "Claude" / "claude_desktop_config.json"),
        ("Cursor", home / ".cursor" / "mcp.json"),
        ("LM Studio", home / ".lmstudio" / "mcp.json"),
    ]
    return [(app, path) for app, path in candidates if path.is_file()]

"""The MCP servers a person added, kept in SQLite (``mcp_servers``) with their secrets split
off into the keyring (``secrets``): env and header values, and a URL's credentials (SQLite
keeps the URL without user, password or query; the whole URL is a secret), and which of them
each chat has switched on."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Any

from ..store import Store, table_named
from .config import McpError, McpServerConfig, public_url, validated_name
from .oauth_tokens import forget_sign_in
from .secrets import SecretBox

log = logging.getLogger(__name__)


class McpServers:
    """Add, list, change and remove servers; every read goes to the store (front ends share it)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.secrets = SecretBox(store.path.parent)

    def add(self, config: McpServerConfig, replace: bool = False) -> McpServerConfig:
        """Keep ``config``; its env and header values go to the keyring. An existing name is
        refused unless ``replace``."""
        if not replace and self.find(config.name) is not None:
            raise McpError(f"there is already an MCP server named {config.name!r} (remove it first)")
        kept = {"env": config.env, "headers": config.headers}
        if config.url_secret:  # https://user:pass@host/mcp?token=…: the whole URL is a secret
            kept["url"] = {"full": config.url}
        where = self.secrets.save(config.name, kept)
        row = {
            "name": config.name, "transport": config.transport, "command": config.command,
            "args": json.dumps(list(config.args)), "cwd": config.cwd, "url": public_url(config.url),
            "env_keys": json.dumps(sorted(config.env)), "header_keys": json.dumps(sorted(config.headers)),
            "secrets_in": where, "enabled": int(config.enabled), "disabled_tools": json.dumps(list(config.disabled_tools)),
            "timeout_s": config.timeout_s, "allow_api": int(config.allow_api), "created_at": time.time(),
        }
        with self.store.writing():
            table_named(self.store.db, "mcp_servers").upsert(row, pk="name")
        log.info("MCP server %r added (%s)", config.name, config.transport)
        return config

    def import_json(self, configs: list[McpServerConfig]) -> tuple[list[str], list[str]]:
        """Add each of ``configs`` not already here; returns (added, skipped) names."""
        added, skipped = [], []
        for config in configs:
            if self.find(config.name) is not None:
                skipped.append(config.name)
            else:
                self.add(config)
                added.append(config.name)
        return added, skipped

    def all(self) -> list[McpServerConfig]:
        with self.store.reading():
            rows = list(self.store.db["mcp_servers"].rows_where(order_by="name"))
        return [self._config(row) for row in rows]

    def find(self, name: str) -> McpServerConfig | None:
        with self.store.reading():
            rows = list(self.store.db["mcp_servers"].rows_where("name = ?", [name]))
        return self._config(rows[0]) if rows else None

    def get(self, name: str) -> McpServerConfig:
        found = self.find(name)
        if found is None:
            raise McpError(f"there is no MCP server named {name!r} (see: inglenook mcp list)")
        return found

    def remove(self, name: str) -> None:
        self.get(name)
        with self.store.writing():
            self.store.db.conn.execute("DELETE FROM mcp_servers WHERE name = ?", [name])
            self.store.db.conn.execute("DELETE FROM mcp_permissions WHERE server = ?", [name])
            self.store.db.conn.execute("DELETE FROM mcp_chat_servers WHERE server = ?", [name])
        self.secrets.forget(name)
        forget_sign_in(self.secrets, name)

    def update(self, name: str, **fields: Any) -> McpServerConfig:
        """Change plain fields (``enabled``, ``disabled_tools``, ``timeout_s``, ``allow_api``)."""
        allowed = {"enabled", "disabled_tools", "timeout_s", "allow_api"}
        if set(fields) - allowed:
            raise McpError(f"only {', '.join(sorted(allowed))} can be changed in place")
        current = self.get(name)
        changes: dict[str, Any] = {k: tuple(v) if k == "disabled_tools" else v for k, v in fields.items()}
        changed = dataclasses.replace(current, **changes)
        row = {"enabled": int(changed.enabled), "disabled_tools": json.dumps(list(changed.disabled_tools)),
               "timeout_s": changed.timeout_s, "allow_api": int(changed.allow_api)}
        with self.store.writing():
            table_named(self.store.db, "mcp_servers").update(name, row)
        return changed

    def set_tool_enabled(self, name: str, tool: str, enabled: bool) -> McpServerConfig:
        off = [t for t in self.get(name).disabled_tools if t != tool]
        if not enabled:
            off.append(tool)
        return self.update(name, disabled_tools=sorted(off))

    # -- per chat --------------------------------------------------------------------------

    def chat_servers(self, conversation_id: int) -> list[str]:
        with self.store.reading():
            rows = self.store.db.conn.execute(
                "SELECT server FROM mcp_chat_servers WHERE conversation_id = ? ORDER BY server", [conversation_id])
            return [r[0] for r in rows]

    def set_chat_servers(self, conversation_id: int, names: list[str]) -> None:
        for name in names:
            self.get(validated_name(name))
        with self.store.writing():
            self.store.db.conn.execute("DELETE FROM mcp_chat_servers WHERE conversation_id = ?", [conversation_id])
            table_named(self.store.db, "mcp_chat_servers").insert_all(
                [{"conversation_id": conversation_id, "server": n} for n in sorted(set(names))])

    def _config(self, row: dict[str, Any]) -> McpServerConfig:
        secrets = self.secrets.read(row["name"], row.get("secrets_in") or "")
        env = {k: secrets.get("env", {}).get(k, "") for k in json.loads(row["env_keys"] or "[]")}
        headers = {k: secrets.get("headers", {}).get(k, "") for k in json.loads(row["header_keys"] or "[]")}
        url = secrets.get("url", {}).get("full") or row["url"] or ""
        return McpServerConfig(
            row["name"], row["transport"], command=row["command"] or "", args=tuple(json.loads(row["args"] or "[]")),
            env=env, cwd=row["cwd"] or "", url=url, headers=headers, enabled=bool(row["enabled"]),
            disabled_tools=tuple(json.loads(row["disabled_tools"] or "[]")), timeout_s=float(row["timeout_s"]),
            allow_api=bool(row["allow_api"]),
        )

"""An MCP server's secrets (environment values, header values): the system keyring, like a
remote engine's key, never SQLite or a log.

Where this machine has no keyring (a headless box, CI) they go to ``mcp-secrets.json`` beside
the database, readable by its owner only, with a warning: SQLite is copied into backups and
salvaged files, a secrets file is not.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..base import atomic_write_text

log = logging.getLogger(__name__)

KEYRING_SERVICE = "inglenook"
IN_KEYRING, IN_FILE, NOWHERE = "keyring", "file", ""
Secrets = dict[str, dict[str, str]]  # {"env": {...}, "headers": {...}}


def _entry(name: str) -> str:
    return f"mcp-server:{name}"


def keyring_usable() -> bool:
    try:
        import keyring  # noqa: PLC0415 — optional at import time
    except ImportError:
        return False
    return float(getattr(keyring.get_keyring(), "priority", 0)) > 0


class SecretBox:
    """Where the secrets of the servers in one store are kept."""

    def __init__(self, folder: Path) -> None:
        self.file = Path(folder) / "mcp-secrets.json"

    def save(self, name: str, secrets: Secrets) -> str:
        """Keep ``secrets`` of server ``name``; returns where they went (nothing when empty)."""
        if not any(secrets.values()):
            self.forget(name)
            return NOWHERE
        text = json.dumps(secrets)
        if keyring_usable():
            import keyring  # noqa: PLC0415
            from keyring.errors import KeyringError  # noqa: PLC0415

            try:
                keyring.set_password(KEYRING_SERVICE, _entry(name), text)
                return IN_KEYRING
            except KeyringError as exc:
                log.warning("the system keyring refused the secrets of MCP server %r (%s); "
                            "keeping them in %s", name, type(exc).__name__, self.file)
        else:
            log.warning("no system keyring on this machine: the secrets of MCP server %r are kept in %s "
                        "(readable by you only)", name, self.file)
        stored = self._file()
        stored[name] = secrets
        self._write(stored)
        return IN_FILE

    def read(self, name: str, where: str) -> Secrets:
        if where == IN_KEYRING:
            try:
                import keyring  # noqa: PLC0415

                text = keyring.get_password(KEYRING_SERVICE, _entry(name))
            except Exception as exc:  # noqa: BLE001 — a locked keyring: say so, start without secrets
                log.warning("cannot read the secrets of MCP server %r from the keyring: %s", name, type(exc).__name__)
                return {}
            return _checked(json.loads(text)) if text else {}
        if where == IN_FILE:
            return _checked(self._file().get(name))
        return {}

    def read_anywhere(self, name: str) -> Secrets:
        """``name``'s secrets from the keyring, else the file (for entries whose place SQLite
        does not record: a server's sign-in)."""
        found = self.read(name, IN_KEYRING) if keyring_usable() else {}
        return found or self.read(name, IN_FILE)

    def forget(self, name: str) -> None:
        if keyring_usable():
            try:
                import keyring  # noqa: PLC0415

                keyring.delete_password(KEYRING_SERVICE, _entry(name))
            except Exception:  # noqa: BLE001 — nothing there is fine
                pass
        stored = self._file()
        if stored.pop(name, None) is not None:
            self._write(stored)

    def _file(self) -> dict[str, Secrets]:
        try:
            found = json.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except ValueError:
            log.warning("%s is not readable JSON; its secrets are ignored (the file is left as it is)", self.file)
            return {}
        return found if isinstance(found, dict) else {}

    def _write(self, stored: dict[str, Secrets]) -> None:
        atomic_write_text(self.file, json.dumps(stored, indent=1))
        os.chmod(self.file, 0o600)


def _checked(value: object) -> Secrets:
    if not isinstance(value, dict):
        return {}
    return {k: {str(a): str(b) for a, b in v.items()} for k, v in value.items() if isinstance(v, dict)}

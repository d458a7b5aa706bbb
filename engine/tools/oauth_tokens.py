"""Where an MCP server's OAuth tokens and registered client live: the keyring, through
``SecretBox`` (never SQLite or a log), in the shape the SDK's ``TokenStorage`` asks for.

Apart from the sign-in flow (oauth.py, which runs an HTTP listener) so that asking whether
a server is signed in, or forgetting it, loads neither that nor the SDK.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING

from .secrets import SecretBox

if TYPE_CHECKING:
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

log = logging.getLogger("inglenook.engine.tools.oauth")


def _entry(name: str) -> str:
    # "/" is not allowed in a server's name, so this never meets another server's secrets.
    return f"{name}/oauth"


class KeyringTokens:
    """The SDK's ``TokenStorage`` for one server: tokens (with the time they expire, so a token
    read back after a restart is refreshed rather than sent stale) and the registered client."""

    def __init__(self, box: SecretBox, name: str) -> None:
        self.box = box
        self.name = name

    def _read(self) -> dict[str, str]:
        return self.box.read_anywhere(_entry(self.name)).get("oauth", {})

    def _write(self, **changes: str) -> None:
        kept = {**self._read(), **changes}
        self.box.save(_entry(self.name), {"oauth": kept})

    def expires_at(self) -> float | None:
        found = self._read().get("expires_at", "")
        return float(found) if found else None

    def registered_redirect(self) -> str:
        """The redirect URI the stored client was registered with ("" when none)."""
        client = self._read().get("client")
        if not client:
            return ""
        uris = json.loads(client).get("redirect_uris") or [""]
        return str(uris[0])

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken  # noqa: PLC0415

        text = self._read().get("tokens")
        return OAuthToken.model_validate_json(text) if text else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires = "" if tokens.expires_in is None else str(time.time() + tokens.expires_in)
        self._write(tokens=tokens.model_dump_json(exclude_none=True), expires_at=expires)
        log.info("MCP server %r: signed in (tokens kept in the keyring)", self.name)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull  # noqa: PLC0415

        text = self._read().get("client")
        return OAuthClientInformationFull.model_validate_json(text) if text else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._write(client=client_info.model_dump_json(exclude_none=True))

    def forget(self) -> None:
        self.box.forget(_entry(self.name))


def signed_in(box: SecretBox, name: str) -> bool:
    return bool(KeyringTokens(box, name)._read().get("tokens"))


def forget_sign_in(box: SecretBox, name: str) -> None:
    KeyringTokens(box, name).forget()

"""An OAuth-protected MCP test server: the SDK's MCPServer with its own authorization server
routes (``mcp.server.auth``: discovery metadata, dynamic client registration, /authorize,
/token) over an in-memory provider that approves every request at once (no login page: the
redirect goes straight back with a code). Run as ``python -m tests.mcp.oauth_server PORT``.

Each access token lives ``TOKEN_SECONDS``; refresh tokens are rotated. ``/stats`` (no auth)
says how many codes and refreshes were handed out, so a test can tell a sign-in from a refresh.
"""

from __future__ import annotations

import secrets
import sys
import time

from mcp.server.auth.provider import AccessToken, AuthorizationCode, AuthorizationParams, RefreshToken, \
    construct_redirect_uri
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse

TOKEN_SECONDS = 3600


class ApprovingProvider:
    """Everything in memory; every authorization request approved."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.counts = {"registered": 0, "codes": 0, "refreshed": 0}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.counts["registered"] += 1

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [], expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource)
        self.counts["codes"] += 1
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(code.code, None)
        return self._tokens(code.client_id, code.scopes)

    async def load_refresh_token(self, client: OAuthClientInformationFull, token: str) -> RefreshToken | None:
        return self.refresh.get(token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        self.refresh.pop(token.token, None)
        self.counts["refreshed"] += 1
        return self._tokens(token.client_id, scopes or token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _tokens(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + TOKEN_SECONDS)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(access_token=access, expires_in=TOKEN_SECONDS, refresh_token=refresh,
                          scope=" ".join(scopes) or None)


def build(port: int) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    provider = ApprovingProvider()
    server = MCPServer(
        "inglenook-oauth-test", auth_server_provider=provider,
        auth=AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False,
                          client_registration_options=ClientRegistrationOptions(enabled=True)),
    )

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    @server.custom_route("/stats", methods=["GET"])
    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(provider.counts)

    return server


if __name__ == "__main__":
    port = int(sys.argv[1])
    build(port).run("streamable-http", host="127.0.0.1", port=port)

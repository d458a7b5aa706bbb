"""Signing in to a Streamable HTTP MCP server that asks for OAuth, with the official ``mcp``
SDK's ``OAuthClientProvider`` doing the protocol (discovery, dynamic client registration, PKCE,
the token exchange, refreshes).

What this module adds: where the tokens live (``KeyringTokens`` in oauth_tokens.py: the
keyring through ``SecretBox``, never SQLite or a log), the redirect URI (``LoopbackCallback``: a one-shot HTTP
listener on 127.0.0.1 that catches the code), and the choice of who may open a browser. A
connection made for a chat or an API request has no ``opener``: a server that needs a sign-in
ends it at once as ``SignInNeeded`` (Settings → Tools shows "needs sign-in" and a button); the
Sign in button and ``inglenook mcp login``/``test`` pass one (``webbrowser.open``).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from .config import McpError
from .oauth_tokens import KeyringTokens
from .secrets import SecretBox

if TYPE_CHECKING:
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull

log = logging.getLogger(__name__)

#: Opens the authorization URL for the person (``webbrowser.open``, or a test's stand-in).
Opener = Callable[[str], Any]
CALLBACK_PATH = "/callback"
#: How long a person has to finish signing in before the attempt is given up.
SIGN_IN_TIMEOUT_S = 300.0
CLIENT_NAME = "Inglenook"


class SignInNeeded(McpError):
    """The server asks for OAuth and this connection may not open a browser."""

    code = "mcp_sign_in_needed"


def _free_port(preferred: int = 0) -> int:
    """``preferred`` when it is free now, else any free loopback port."""
    for port in (preferred, 0) if preferred else (0,):
        with socket.socket() as probe:
            # As HTTPServer binds: the last sign-in's closed connection (TIME_WAIT) keeps no one out.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise McpError("no free loopback port for the sign-in's redirect")


class LoopbackCallback:
    """The redirect URI: ``http://127.0.0.1:PORT/callback``, listening only while a sign-in
    waits for its code, and only for one answer. The port is the one the stored client was
    registered with when it is free (an authorization server compares redirect URIs exactly),
    else a new one (and the client registers again)."""

    def __init__(self, preferred_port: int = 0) -> None:
        self.port = _free_port(preferred_port)
        self.redirect_uri = f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"
        self._answer: dict[str, str] | None = None
        self._got = threading.Event()
        self._server: HTTPServer | None = None

    def listen(self) -> None:
        callback = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the http.server name
                url = urlparse(self.path)
                if url.path != CALLBACK_PATH or callback._got.is_set():
                    self.send_error(404)
                    return
                callback._answer = {k: v[0] for k, v in parse_qs(url.query).items()}
                callback._got.set()
                body = b"<html><body><h2>Inglenook: signed in.</h2><p>You can close this tab.</p></body></html>"
                if "error" in callback._answer:
                    body = b"<html><body><h2>Inglenook: the sign-in was refused.</h2></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — the query holds the code
                pass

        try:
            self._server = HTTPServer(("127.0.0.1", self.port), Handler)
        except OSError as exc:
            raise McpError(f"cannot listen on 127.0.0.1:{self.port} for the sign-in: {exc.strerror}") from None
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                         name="mcp-oauth-callback", daemon=True).start()

    async def wait(self, timeout_s: float = SIGN_IN_TIMEOUT_S) -> AuthorizationCodeResult:
        import anyio  # noqa: PLC0415

        from mcp.shared.auth import AuthorizationCodeResult  # noqa: PLC0415

        try:
            with anyio.move_on_after(timeout_s):
                while not self._got.is_set():
                    await anyio.sleep(0.1)
        finally:
            self.close()
        answer = self._answer
        if answer is None:
            raise McpError(f"the sign-in was not finished within {timeout_s:g} s")
        if "error" in answer:
            words = answer.get("error_description") or answer["error"]
            raise McpError(f"the sign-in was refused: {words}")
        if not answer.get("code"):
            raise McpError("the sign-in's redirect carried no authorization code")
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


def oauth_provider(box: SecretBox, name: str, url: str, opener: Opener | None,
                   on_url: Callable[[str], None] | None = None,
                   on_needed: Callable[[], None] | None = None) -> OAuthClientProvider:
    """The SDK's provider for server ``name`` at ``url``. Without ``opener`` a sign-in calls
    ``on_needed`` and raises ``SignInNeeded``; with one, the authorization URL goes to ``opener`` (and ``on_url``, which
    shows it) and the code comes back to a ``LoopbackCallback``."""
    from mcp.client.auth import OAuthClientProvider  # noqa: PLC0415
    from mcp.shared.auth import OAuthClientMetadata  # noqa: PLC0415

    storage = KeyringTokens(box, name)
    registered = storage.registered_redirect()
    callback = LoopbackCallback(urlparse(registered).port or 0 if registered else 0)

    class Tokens(KeyringTokens):
        async def get_client_info(self) -> OAuthClientInformationFull | None:
            found = await super().get_client_info()
            if found is not None and callback.redirect_uri not in [str(u) for u in found.redirect_uris or ()]:
                return None  # registered for a port that is taken now: register again
            return found

    async def redirect(authorization_url: str) -> None:
        if opener is None:
            if on_needed is not None:
                on_needed()
            raise SignInNeeded(f"MCP server {name!r} needs sign-in (Settings → Tools, or: inglenook mcp login {name})")
        callback.listen()
        if on_url is not None:
            on_url(authorization_url)
        # Not awaited: a browser (or a test's stand-in) may hold on until the redirect is served.
        threading.Thread(target=_open, args=(opener, authorization_url), name="mcp-oauth-browser",
                         daemon=True).start()

    class Provider(OAuthClientProvider):
        async def _initialize(self) -> None:
            # The SDK keeps a token's expiry only in memory; the stored one lets a token read
            # back after a restart be refreshed when it has run out instead of sent and refused.
            await super()._initialize()
            expires = storage.expires_at()
            if self.context.current_tokens is not None and expires is not None:
                self.context.token_expiry_time = expires

    metadata = OAuthClientMetadata(client_name=CLIENT_NAME, redirect_uris=[callback.redirect_uri],  # type: ignore[list-item]
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none")
    return Provider(url, metadata, Tokens(box, name), redirect_handler=redirect, callback_handler=callback.wait)


def _open(opener: Opener, url: str) -> None:
    try:
        opener(url)
    except Exception as exc:  # noqa: BLE001 — the URL is shown too; the person can open it by hand
        log.warning("could not open the browser for the sign-in: %s", exc)

"""OAuth for Streamable HTTP MCP servers, against a real OAuth-protected server on loopback
(``oauth_server.py``: the SDK's own authorization server routes, approving at once). The only
stand-in is the browser: it GETs the authorization URL and follows the redirect to our
loopback listener, as a person's browser would after they click "Allow".
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from PySide6.QtCore import Qt
import pytest

from inglenook.cli import main
from inglenook.engine import Paths, Store
from inglenook.engine.tools import McpError, McpManager, McpServerConfig, McpServers
from inglenook.engine.tools.oauth_tokens import KeyringTokens, signed_in

from .conftest import ROOT

pytestmark = pytest.mark.timeout(120)


class Browser:
    """Stands in for ``webbrowser.open``: follows the authorization URL's redirects, the last
    of which lands on the loopback listener."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.landed: list[int] = []

    def __call__(self, url: str) -> bool:
        self.opened.append(url)
        self.landed.append(httpx.get(url, follow_redirects=True, timeout=30).status_code)
        return True


def never(url: str) -> bool:
    raise AssertionError(f"the browser was opened: {url}")


@pytest.fixture
def oauth_server() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "tests.mcp.oauth_server", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if process.poll() is not None:
                pytest.fail(f"the OAuth test server ended: {process.stderr.read().decode() if process.stderr else ''}")
            try:
                httpx.get(f"{base}/stats", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    paths = Paths.default().ensure()
    store = Store(paths.database)
    yield store
    store.close()


def stats(base: str) -> dict[str, int]:
    return dict(httpx.get(f"{base}/stats").json())


def kept(store: Store, name: str) -> dict[str, str]:
    """What the secrets helper (the keyring, or its owner-only file here) holds of a sign-in."""
    return McpServers(store).secrets.read_anywhere(f"{name}/oauth").get("oauth", {})


def test_sign_in_then_reuse_then_refresh_then_logout(oauth_server: str, store: Store) -> None:
    servers = McpServers(store)
    servers.add(McpServerConfig("guarded", "http", url=f"{oauth_server}/mcp"))
    manager = McpManager(store)
    try:
        # A chat's connection may not open a browser: it says the server needs a sign-in.
        with pytest.raises(McpError, match="needs sign-in"):
            manager.connection("guarded")
        assert manager.state("guarded").state == "needs sign-in"
        assert stats(oauth_server)["codes"] == 0

        browser = Browser()
        shown: list[str] = []
        connection = manager.sign_in("guarded", browser, shown.append)
        assert [t.name for t in connection.tools] == ["echo"]
        assert connection.call("echo", {"text": "hi"}).text == "hi"
        assert len(browser.opened) == 1 and browser.landed == [200] and shown == browser.opened
        assert "code_challenge=" in shown[0] and "code_challenge_method=S256" in shown[0]  # PKCE
        assert stats(oauth_server) == {"registered": 1, "codes": 1, "refreshed": 0}  # dynamic registration
        assert manager.state("guarded").state == "ready"
        tokens = kept(store, "guarded")
        access = json.loads(tokens["tokens"])["access_token"]
        assert access and json.loads(tokens["client"])["client_id"]
        store.db.conn.commit()
        assert access not in store.path.read_bytes().decode("latin-1")  # never in SQLite
        secrets_file = store.path.parent / "mcp-secrets.json"
        if secrets_file.exists():  # no keyring on this machine: the owner-only file
            assert secrets_file.stat().st_mode & 0o077 == 0
    finally:
        manager.close()

    # A second start (a new manager, as after a restart) reuses the tokens: no browser.
    manager = McpManager(store)
    try:
        connection = manager.test(servers.get("guarded"), opener=never)
        assert [t.name for t in connection.tools] == ["echo"]
        connection.close()
        assert manager.connection("guarded").call("echo", {"text": "again"}).text == "again"
        assert stats(oauth_server) == {"registered": 1, "codes": 1, "refreshed": 0}
    finally:
        manager.close()

    # A token that has run out by the stored clock is refreshed, not sent stale, and no browser.
    storage = KeyringTokens(servers.secrets, "guarded")
    stored = kept(store, "guarded")
    servers.secrets.save("guarded/oauth", {"oauth": {**stored, "expires_at": str(time.time() - 60)}})
    assert storage.expires_at() is not None
    manager = McpManager(store)
    try:
        assert manager.connection("guarded").call("echo", {"text": "fresh"}).text == "fresh"
        assert stats(oauth_server)["refreshed"] == 1 and stats(oauth_server)["codes"] == 1
        assert json.loads(kept(store, "guarded")["tokens"])["access_token"] != access
        assert manager.sign_out("guarded") is True
        assert not signed_in(servers.secrets, "guarded") and kept(store, "guarded") == {}
        with pytest.raises(McpError, match="needs sign-in"):
            manager.connection("guarded")
    finally:
        manager.close()


def test_cli_login_test_logout(oauth_server: str, store: Store, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    browser = Browser()
    monkeypatch.setattr("webbrowser.open", browser)
    McpServers(store).add(McpServerConfig("guarded", "http", url=f"{oauth_server}/mcp"))
    assert main(["mcp", "login", "guarded"]) == 0
    out, _ = capsys.readouterr()
    assert browser.opened and browser.opened[0] in out and "Signed in" in out and "echo" in out
    assert main(["mcp", "test", "guarded"]) == 0  # the kept tokens: no second browser
    assert capsys.readouterr().out.split() == ["echo"] and len(browser.opened) == 1
    assert main(["mcp", "logout", "guarded"]) == 0
    assert "Signed out" in capsys.readouterr().out
    assert not signed_in(McpServers(store).secrets, "guarded")


def test_a_refused_sign_in_says_so(oauth_server: str, store: Store) -> None:
    """The browser lands on the listener with an error (the person clicked "Deny")."""
    McpServers(store).add(McpServerConfig("guarded", "http", url=f"{oauth_server}/mcp"))

    def deny(url: str) -> None:
        redirect = dict(httpx.QueryParams(url.split("?", 1)[1]))["redirect_uri"]
        httpx.get(redirect, params={"error": "access_denied", "error_description": "the person said no"})

    manager = McpManager(store)
    try:
        with pytest.raises(McpError, match="refused: the person said no"):
            manager.sign_in("guarded", deny)
        assert not signed_in(McpServers(store).secrets, "guarded")
    finally:
        manager.close()


def test_settings_tools_shows_needs_sign_in_and_signs_in(qtbot, oauth_server: str, store: Store) -> None:
    from inglenook.app.pages.settings.tools import ToolsPage
    from inglenook.app.services.operations import Operations
    from inglenook.app.services.workers import Workers

    McpServers(store).add(McpServerConfig("guarded", "http", url=f"{oauth_server}/mcp"))
    manager, workers = McpManager(store), Workers()
    page = ToolsPage(manager, Operations(workers))
    qtbot.addWidget(page)
    page.show()
    try:
        page.start_server("guarded")
        qtbot.waitUntil(lambda: (item := page.item_named("guarded")) is not None
                        and item.text(1).startswith("needs sign-in"), timeout=30_000)
        page.tree.setCurrentItem(page.item_named("guarded"))
        assert page.sign_in.isVisible() and not page.sign_out.isVisible()
        browser = Browser()
        page.sign_in_to("guarded", browser)
        qtbot.waitUntil(lambda: (item := page.item_named("guarded")) is not None
                        and item.text(1).startswith("ready"), timeout=30_000)
        assert len(browser.opened) == 1 and "Signed in to guarded" in page.message.text()
        page.tree.setCurrentItem(page.item_named("guarded"))
        assert not page.sign_in.isVisible() and page.sign_out.isVisible()
        qtbot.mouseClick(page.sign_out, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "Signed out" in page.message.text(), timeout=30_000)
        assert not signed_in(McpServers(store).secrets, "guarded")
    finally:
        manager.close()
        workers.close()

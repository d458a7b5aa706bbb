"""Screenshot of an MCP server that asks for OAuth (issue 29): Settings → Tools with the
server "needs sign-in", selected, its Sign in button showing; then, signed in through a
stand-in browser (the test servers' auto-approving authorization server), ready with its tool
and a Sign out button. The server is tests/mcp/oauth_server.py on a loopback port.

    .venv/bin/python scripts/oauth_shot.py [--out docs]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from screenshots import settle, shoot_alone, wait  # noqa: E402 — after the path it is found on


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tests.mcp.oauth_server", str(port)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{base}/stats", timeout=0.5)
            break
        except httpx.HTTPError:
            time.sleep(0.1)

    def shoot(app, window) -> None:  # noqa: ANN001
        from inglenook.engine import McpServerConfig

        window.engine.chats.tools.servers.add(McpServerConfig("team-docs", "http", url=f"{base}/mcp"))
        dialog = window.open_settings("Tools")
        page = dialog.tools_page
        page.start_server("team-docs")
        wait(app, lambda: (item := page.item_named("team-docs")) is not None and item.text(1).startswith("needs"))
        page.tree.setCurrentItem(page.item_named("team-docs"))
        settle(app)
        dialog.grab().save(str(out / "tools-sign-in.png"))
        page.sign_in_to("team-docs", lambda url: httpx.get(url, follow_redirects=True, timeout=30))
        wait(app, lambda: (item := page.item_named("team-docs")) is not None and item.text(1).startswith("ready"))
        page.tree.setCurrentItem(page.item_named("team-docs"))
        settle(app)
        dialog.grab().save(str(out / "tools-signed-in.png"))
        dialog.reject()

    try:
        shoot_alone("inglenook-oauth-shots-", shoot)
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""MCP servers, real ones: configs kept in SQLite with secrets out of it, the mcpServers JSON,
connections through the SDK (stdio and Streamable HTTP), and every bad behaviour the issue
lists ending in one clear message while other servers keep working."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import psutil
import pytest

from inglenook.engine import Paths, Store
from inglenook.engine.tools import McpConnection, McpError, McpManager, McpServerConfig, McpServers, parse_mcp_servers

from .conftest import served

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cret-token-value"


@pytest.fixture
def store(home: Path) -> Store:
    paths = Paths.default().ensure()
    store = Store(paths.database)
    yield store
    store.close()


def test_mcp_servers_json_of_other_apps_is_read() -> None:
    text = json.dumps({"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Paris"]},
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                  "env": {"TOKEN": SECRET}, "disabled": True},
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": f"Bearer {SECRET}"}},
    }})
    found = {c.name: c for c in parse_mcp_servers(text)}
    assert found["time"].args == ("mcp-server-time", "--local-timezone=Europe/Paris")
    assert found["files"].env == {"TOKEN": SECRET} and not found["files"].enabled
    assert found["remote"].transport == "http" and found["remote"].headers["Authorization"].endswith(SECRET)
    assert SECRET not in repr(found["remote"]) and SECRET not in str(found["files"])


@pytest.mark.parametrize("text, words", [
    ("{not json", "not JSON"),
    ("[]", "mcpServers"),
    ('{"mcpServers": {}}', "no servers"),
    ('{"mcpServers": {"x": {"args": []}}}', "neither a command nor a url"),
    ('{"mcpServers": {"bad name!": {"command": "x"}}}', "not a usable server name"),
    ('{"mcpServers": {"x": {"url": "ftp://a"}}}', "http:// or https://"),
    ('{"mcpServers": {"x": {"command": "a", "args": "b"}}}', "args must be a list"),
])
def test_bad_json_is_refused_with_a_reason(text: str, words: str) -> None:
    with pytest.raises(McpError, match=words):
        parse_mcp_servers(text)


def test_secrets_stay_out_of_sqlite(store: Store) -> None:
    servers = McpServers(store)
    servers.add(McpServerConfig("files", command="npx", args=("server",), env={"API_TOKEN": SECRET}))
    servers.add(McpServerConfig("remote", "http", url="https://example.com/mcp", headers={"X-Key": SECRET}))
    store.db.conn.commit()
    dump = "\n".join(sqlite3.connect(store.path).iterdump())
    assert "API_TOKEN" in dump and "X-Key" in dump  # the names are kept...
    assert SECRET not in dump  # ...never the values
    assert servers.get("files").env == {"API_TOKEN": SECRET}  # read back from the keyring (or the owner-only file)
    assert servers.get("remote").headers == {"X-Key": SECRET}
    secrets_file = store.path.parent / "mcp-secrets.json"
    if secrets_file.exists():  # no keyring on this machine
        assert secrets_file.stat().st_mode & 0o077 == 0
    servers.remove("files")
    assert servers.find("files") is None
    assert not secrets_file.exists() or "files" not in json.loads(secrets_file.read_text())
    with pytest.raises(McpError, match="already an MCP server named 'remote'"):
        servers.add(McpServerConfig("remote", "http", url="https://example.com/other"))


def test_mcp_server_time_lists_and_answers(time_server_command: list[str]) -> None:
    command, *args = time_server_command
    connection = McpConnection(McpServerConfig("time", command=command, args=tuple(args))).start()
    try:
        connection.wait_ready()
        assert {t.name for t in connection.tools} >= {"get_current_time", "convert_time"}
        result = connection.call("get_current_time", {"timezone": "Asia/Tokyo"})
        assert not result.is_error and json.loads(result.text)["timezone"] == "Asia/Tokyo"
        bad = connection.call("get_current_time", {"timezone": "Nowhere/Else"})
        assert bad.is_error and "Nowhere/Else" in bad.text  # the server's own error, as a result
    finally:
        pid = _child_pid()
        connection.close()
    assert pid is None or not _alive(pid)  # no orphan


def test_streamable_http_on_loopback(http_server: str) -> None:
    connection = McpConnection(McpServerConfig("web", "http", url=http_server, headers={"X-Test": "1"})).start()
    try:
        connection.wait_ready()
        assert "echo" in {t.name for t in connection.tools}
        assert connection.call("add", {"a": 2, "b": 40}).text == "42"
    finally:
        connection.close()


def test_a_server_that_fails_to_start_says_why() -> None:
    connection = McpConnection(served("broken", "fail_start")).start()
    with pytest.raises(McpError) as caught:
        connection.wait_ready()
    connection.close()
    assert "broken" in str(caught.value)
    assert any("cannot open the database" in line for line in connection.stderr_lines() or [str(caught.value)])


def test_a_missing_command_says_so() -> None:
    connection = McpConnection(McpServerConfig("ghost", command="/no/such/mcp-server")).start()
    with pytest.raises(McpError, match="cannot start it"):
        connection.wait_ready()
    connection.close()


def test_a_server_that_hangs_at_initialize_times_out_and_is_ended() -> None:
    connection = McpConnection(served("sleepy", "hang_init"), connect_timeout_s=3).start()
    with pytest.raises(McpError, match="initialize"):
        connection.wait_ready()
    connection.close()
    assert _child_pid() is None


def test_malformed_output_is_a_failure_not_a_hang() -> None:
    connection = McpConnection(served("garbled", "malformed"), connect_timeout_s=3).start()
    with pytest.raises(McpError, match="garbled"):
        connection.wait_ready()
    connection.close()


def test_bad_calls_give_clear_errors_and_the_server_lives_on() -> None:
    connection = McpConnection(served("tests", "ok", timeout_s=2)).start().wait_ready()
    other = McpConnection(served("other", "ok")).start().wait_ready()
    try:
        with pytest.raises(McpError, match="did not answer within 2 s"):
            connection.call("hang", {})
        assert connection.call("echo", {"text": "still here"}).text == "still here"
        big = connection.call("big", {}, timeout_s=60)
        assert big.cut_from == 10 * 1024 * 1024 and len(big.text) < 100_000 and "only the first" in big.text
        picture = connection.call("picture", {})
        assert picture.images and picture.images[0][0] == "image/png"
        stop = threading.Event()
        threading.Timer(0.5, stop.set).start()
        with pytest.raises(McpError, match="stopped"):
            connection.call("hang", {}, timeout_s=60, cancel=stop)
        with pytest.raises(McpError):
            connection.call("crash", {}, timeout_s=30)
        assert other.call("add", {"a": 1, "b": 2}).text == "3"  # another server is untouched
    finally:
        connection.close()
        other.close()


def test_manager_starts_lazily_and_reports_state(store: Store) -> None:
    manager = McpManager(store)
    manager.servers.add(served("tests", "ok"))
    manager.servers.add(served("broken", "fail_start"))
    assert manager.state("tests").state == "stopped"
    tools = manager.tools_for(["tests", "broken"])
    assert "echo" in tools.tools and any("broken" in p for p in tools.problems)
    assert manager.state("tests").state == "ready" and len(manager.state("tests").tools) >= 5
    failed = manager.state("broken")
    assert failed.state == "failed" and any("cannot open the database" in line for line in failed.stderr)
    manager.servers.set_tool_enabled("tests", "hang", False)
    assert "hang" not in manager.tools_for(["tests"]).tools
    manager.close()
    assert _child_pid() is None


def _child_pid() -> int | None:
    """A still-running child process of this test process (an MCP server), if any."""
    deadline = time.monotonic() + 10
    while True:
        children = [c for c in psutil.Process(os.getpid()).children(recursive=True) if c.is_running()
                    and c.status() != psutil.STATUS_ZOMBIE and "servers" in " ".join(c.cmdline()) + "mcp-server-time"]
        if not children or time.monotonic() > deadline:
            return children[0].pid if children else None
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

"""What a hostile MCP server can do (issue 45): servers written in raw JSON-RPC
(``hostile.py``) that print a secret they were given, one enormous line or a flood to stderr,
run as real processes; the configs they come from (deep JSON, credentials in a URL)."""

from __future__ import annotations

import json
import logging
import sqlite3
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from inglenook.cli import main
from inglenook.engine.core.engine import Engine
from inglenook.engine.store import Store
from inglenook.engine.tools import McpError, McpManager, McpServerConfig, McpServers, parse_mcp_servers
from inglenook.engine.tools.stderr_tail import LINE_CHARS, TAIL_BYTES

from ..api.conftest import STARTER, serving
from .conftest import ROOT, served

pytestmark = pytest.mark.timeout(180)

TOKEN = "sk-live-4f9a8c7e2d1b0a9f8e7d6c5b"


def hostile(name: str, *mode: str, **extra: object) -> McpServerConfig:
    return McpServerConfig(name, command=sys.executable, args=("-m", "tests.mcp.hostile", *mode), cwd=str(ROOT),
                           **extra)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data" / "inglenook.db")
    yield opened
    opened.close()


def failure(store: Store, config: McpServerConfig) -> McpError:
    McpServers(store).add(config)
    manager = McpManager(store)
    try:
        with pytest.raises(McpError) as caught:
            manager.connection(config.name)
    finally:
        manager.close()
    return caught.value


def test_a_token_the_server_prints_is_masked_for_the_person_and_absent_for_clients(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    error = failure(store, hostile("leaky", "leak_token", env={"API_TOKEN": TOKEN}))

    assert TOKEN not in str(error) and "token=***" in str(error)  # the person sees what it said, masked
    assert TOKEN not in error.public and "starting with" not in error.public and "leaky" in error.public
    assert all(TOKEN not in record.getMessage() for record in caplog.records)


def test_one_enormous_stderr_line_makes_a_short_message(store: Store) -> None:
    error = failure(store, hostile("shouty", "long_line", "5"))
    assert len(str(error)) < LINE_CHARS + 200 and len(error.public) < 300


def test_a_flood_of_stderr_is_kept_as_a_bounded_tail(store: Store) -> None:
    McpServers(store).add(hostile("flood", "flood", "64"))  # 64 MB, then its last words, then exit
    manager = McpManager(store)
    try:
        with pytest.raises(McpError):
            manager.connection("flood")
        tracemalloc.start()
        try:
            state = manager.state("flood")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        manager.close()
    assert state.stderr[-1] == "the last words"
    assert peak < 4 * TAIL_BYTES  # the 64 MB written was never read back whole (it was, before)


def test_mcp_test_prints_the_masked_line(capsys: pytest.CaptureFixture[str], home: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    # Options after NAME, then the command after --, as `mcp add --help` shows them.
    assert main(["mcp", "add", "leaky", "--env", f"API_TOKEN={TOKEN}", "--timeout", "15", "--", sys.executable,
                 "-m", "tests.mcp.hostile", "leak_token"]) == 0
    kept = Store(home / "data" / "inglenook.db")
    try:
        assert McpServers(kept).get("leaky").timeout_s == 15
    finally:
        kept.close()
    capsys.readouterr()
    assert main(["mcp", "test", "leaky"]) == 1
    out, err = capsys.readouterr()
    assert TOKEN not in out + err and "token=***" in err and len(err.strip().splitlines()) == 1


@pytest.mark.integration
def test_the_responses_api_answers_424_without_the_servers_words(home: Path, smollm2_path: Path) -> None:
    engine = Engine()
    try:
        engine.tools.servers.add(hostile("leaky", "leak_token", env={"API_TOKEN": TOKEN}, allow_api=True))
        engine.tools.servers.add(hostile("shouty", "long_line", "5", allow_api=True))
        with serving(engine) as server:
            client = openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=120)
            for label in ("leaky", "shouty"):
                with pytest.raises(openai.APIStatusError) as caught:
                    client.responses.create(model=STARTER, input="hi", max_output_tokens=4,
                                            tools=[{"type": "mcp", "server_label": label,  # type: ignore[list-item]
                                                    "require_approval": "never"}])
                body = caught.value.response.text
                assert caught.value.status_code == 424
                assert TOKEN not in body and "starting with" not in body and len(body) < 1000, body
                assert label in json.loads(body)["error"]["message"]
    finally:
        engine.close()


# -- configs -------------------------------------------------------------------------------


def test_deeply_nested_json_is_refused_in_one_line() -> None:
    with pytest.raises(McpError, match="nested too deeply"):
        parse_mcp_servers("[" * 200_000 + "]" * 200_000)
    with pytest.raises(McpError, match="nested too deeply"):
        parse_mcp_servers('{"mcpServers": ' + '{"a":' * 150_000 + "1" + "}" * 150_001)


def test_mcp_import_of_deep_json_is_one_line_not_a_traceback(capsys: pytest.CaptureFixture[str], home: Path,
                                                            tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    assert main(["mcp", "import", str(deep)]) == 1
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "Traceback" not in err


def test_credentials_in_a_url_go_to_the_secrets_not_sqlite(store: Store, capsys: pytest.CaptureFixture[str],
                                                           home: Path) -> None:
    url = "https://alice:hunter2-pass@mcp.example.com/mcp?token=tok-9f8e7d6c&team=blue"
    servers = McpServers(store)
    servers.add(McpServerConfig("docs", "http", url=url))

    assert servers.get("docs").url == url  # the connection still gets the whole URL
    raw = sqlite3.connect(store.path)
    try:
        dumped = "\n".join(raw.iterdump())
    finally:
        raw.close()
    assert "hunter2-pass" not in dumped and "tok-9f8e7d6c" not in dumped and "alice" not in dumped
    assert "https://mcp.example.com/mcp" in dumped
    assert "hunter2-pass" not in repr(servers.get("docs"))

    # The same through the command line: `mcp list` shows where, never the credentials.
    assert main(["mcp", "add", "web", "--url", url]) == 0
    capsys.readouterr()
    assert main(["mcp", "list"]) == 0
    out = capsys.readouterr().out
    assert "hunter2-pass" not in out and "tok-9f8e7d6c" not in out and "URL credentials" in out
    assert "https://***@mcp.example.com/mcp?token=***&team=***" in out


@pytest.mark.integration
def test_a_streamed_response_stays_alive_while_a_slow_tool_runs(home: Path, smollm2_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: no byte for 75 s while a tool ran. The SDK test server's ``hang`` tool never
    answers; the call's timeout (3 keep-alive periods) ends it."""
    from inglenook.engine.api.responses import mcp_rounds

    monkeypatch.setattr(mcp_rounds, "CALL_KEEPALIVE_S", 1.0, raising=False)
    engine = Engine()
    try:
        engine.update_settings(context_size=2048)
        engine.tools.servers.add(served("slow", "ok", timeout_s=3.0, allow_api=True))
        with serving(engine) as server:
            body = {"model": STARTER, "input": "Run the hang tool.", "temperature": 0, "max_output_tokens": 64,
                    "stream": True, "max_tool_calls": 1,
                    "tools": [{"type": "mcp", "server_label": "slow", "allowed_tools": ["hang"],
                               "require_approval": "never"}],
                    "tool_choice": {"type": "mcp", "server_label": "slow", "name": "hang"}}
            with httpx.Client(timeout=300) as http:
                reply = http.post(f"{server.url}/responses", json=body)
    finally:
        engine.close()
    assert reply.status_code == 200
    blocks = reply.text.split("\n\n")
    started = next(i for i, b in enumerate(blocks) if "response.mcp_call.in_progress" in b)
    ended = next(i for i, b in enumerate(blocks) if "response.mcp_call.failed" in b)
    assert any(b.startswith(": keep-alive") for b in blocks[started:ended]), blocks[started:ended + 1]


@pytest.mark.integration
def test_a_client_that_leaves_during_a_tool_call_stops_the_call(home: Path, smollm2_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: the call ran to its timeout after the client had gone. The ``hang`` tool
    never answers and its timeout is long; the client reads until the call starts, then
    closes the connection: the call ends as stopped, not timed out."""
    from inglenook.engine.api.responses import mcp_rounds
    from inglenook.engine.api.responses.mcp_tools import McpRequest

    monkeypatch.setattr(mcp_rounds, "CALL_KEEPALIVE_S", 0.5, raising=False)
    ended: list[object] = []
    done = threading.Event()
    real_call = McpRequest.call

    def watched_call(self: McpRequest, item: object, cancel: threading.Event | None = None) -> object:
        result = real_call(self, item, cancel)  # type: ignore[arg-type]
        ended.append(result)
        done.set()
        return result

    monkeypatch.setattr(McpRequest, "call", watched_call)
    engine = Engine()
    try:
        engine.update_settings(context_size=2048)
        engine.tools.servers.add(served("slow", "ok", timeout_s=600.0, allow_api=True))
        with serving(engine) as server:
            body = {"model": STARTER, "input": "Run the hang tool.", "temperature": 0, "max_output_tokens": 64,
                    "stream": True, "max_tool_calls": 1,
                    "tools": [{"type": "mcp", "server_label": "slow", "allowed_tools": ["hang"],
                               "require_approval": "never"}],
                    "tool_choice": {"type": "mcp", "server_label": "slow", "name": "hang"}}
            with httpx.Client(timeout=300) as http, http.stream("POST", f"{server.url}/responses", json=body) as reply:
                assert reply.status_code == 200
                for line in reply.iter_lines():
                    if "response.mcp_call.in_progress" in line:
                        break  # leaving the block closes the connection mid-stream
            # Well inside the 600 s timeout: the disconnect, seen at the next keep-alive, ends it.
            assert done.wait(120), "the call was not stopped when its client left"
    finally:
        engine.close()
    (item,) = ended
    assert getattr(item, "status") == "failed"
    assert "stopped" in str(getattr(item, "error")) and "did not answer" not in str(getattr(item, "error"))


def test_replies_that_are_not_mcp_are_named_not_taken_for_silence(store: Store,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("inglenook.engine.tools.connection.CONNECT_TIMEOUT_S", 3.0)
    McpServers(store).add(McpServerConfig("garbled", command=sys.executable, cwd=str(ROOT),
                                          args=("-m", "tests.mcp.servers", "malformed")))
    manager = McpManager(store)
    try:
        with pytest.raises(McpError) as caught:
            manager.connection("garbled")
    finally:
        manager.close()
    assert "not MCP (JSON-RPC)" in str(caught.value) and "this is not JSON-RPC" in str(caught.value)
    assert "not MCP" not in caught.value.public  # the client gets the fixed sentence

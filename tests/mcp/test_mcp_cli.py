"""``inglenook mcp``: add (stdio and URL), import, list, remove, and test on a good server and
on each failing one (one clear line, non-zero)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from inglenook.cli import main

from .conftest import ROOT

pytestmark = pytest.mark.timeout(120)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["mcp", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_test_remove(capsys: pytest.CaptureFixture[str], time_server_command: list[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert run(capsys, "add", "time", "--", *time_server_command)[0] == 0
    code, out, _ = run(capsys, "add", "web", "--url", "http://127.0.0.1:9/mcp", "--header", "Authorization=Bearer xyz")
    assert code == 0
    code, out, _ = run(capsys, "list")
    assert "time" in out and "mcp-server-time" in out and "Authorization" in out and "xyz" not in out
    code, out, err = run(capsys, "test", "time")
    assert code == 0, err
    assert out.split() == sorted(out.split()) or "get_current_time" in out.splitlines()
    assert set(out.split()) >= {"get_current_time", "convert_time"}
    code, out, err = run(capsys, "test", "web")  # nothing listens on port 9
    assert code == 1 and len(err.strip().splitlines()) == 1 and "web" in err
    assert run(capsys, "remove", "time")[0] == 0
    code, _, err = run(capsys, "test", "time")
    assert code == 1 and "no MCP server named 'time'" in err


@pytest.mark.parametrize("mode, words", [
    ("fail_start", "cannot open the database"),
    ("hang_init", "initialize"),
    ("malformed", "'bad'"),  # lines that are not JSON-RPC: no answer to initialize
])
def test_test_on_a_failing_server_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, mode: str, words: str) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr("inglenook.engine.tools.connection.CONNECT_TIMEOUT_S", 3.0)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"bad": {"command": sys.executable,
                                                          "args": ["-m", "tests.mcp.servers", mode]}}}))
    code, out, _ = run(capsys, "import", str(config))
    assert code == 0 and "Added bad" in out
    code, out, err = run(capsys, "import", str(config))
    assert "Skipped bad" in out
    code, out, err = run(capsys, "test", "bad")
    assert code == 1 and len(err.strip().splitlines()) == 1 and words in err, err


def test_bad_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["mcp", "add", "x"])  # neither a command nor a URL
    capsys.readouterr()
    code, _, err = run(capsys, "import", str(tmp_path / "missing.json"))
    assert code == 1 and "cannot read" in err
    (tmp_path / "bad.json").write_text("{oops")
    code, _, err = run(capsys, "import", str(tmp_path / "bad.json"))
    assert code == 1 and "not JSON" in err


def test_import_without_a_file_lists_other_apps_settings(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = run(capsys, "import")
    assert code == 0 and "No Claude Desktop, Cursor or LM Studio" in out
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"time": {"command": "uvx"}}}))
    code, out, _ = run(capsys, "import")
    assert code == 0 and "Cursor" in out and "(time)" in out and "inglenook mcp import" in out
    assert run(capsys, "list")[1].startswith("No MCP servers")  # nothing was added


def test_allow_api_switches_and_lists(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "add", "web", "--url", "http://127.0.0.1:9/mcp")[0] == 0
    assert run(capsys, "add", "open", "--allow-api", "--url", "http://127.0.0.1:9/mcp")[0] == 0
    rows = {line.split()[0]: line.split() for line in run(capsys, "list")[1].splitlines()[1:]}
    assert rows["web"][3] == "no" and rows["open"][3] == "yes"  # off unless asked for
    code, out, _ = run(capsys, "allow-api", "web", "on")
    assert code == 0 and "may now be run by API clients" in out
    assert run(capsys, "allow-api", "open", "off")[0] == 0
    rows = {line.split()[0]: line.split() for line in run(capsys, "list")[1].splitlines()[1:]}
    assert rows["web"][3] == "yes" and rows["open"][3] == "no"
    code, _, err = run(capsys, "allow-api", "nothing", "on")
    assert code == 1 and "no MCP server named 'nothing'" in err
    with pytest.raises(SystemExit):
        main(["mcp", "allow-api", "web", "maybe"])

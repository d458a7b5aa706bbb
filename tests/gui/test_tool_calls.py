"""Tools in the window, driven as a person would: Settings → Tools adds mcp-server-time by
pasting its JSON and shows it ready with its tools; in a chat with its tools switched on, the
call appears as a block, the person corrects the arguments and approves, the result shows
and the model answers; a second call is denied and goes back as a refusal."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from tests.mcp.conftest import time_server_command  # noqa: F401 — the fixture

from .conftest import ANSWER_TIMEOUT_MS, new_chat, type_and_send, wait_answer

pytestmark = pytest.mark.timeout(900)


def _state(window, cid: int) -> str:
    chats = window.engine.chats
    return (f"streams={window.chat.streams} widgets={[(w.role, w.streaming, w.text[:40]) for w in window.view.widgets]} "
            f"messages={[(m.role, m.content[:40]) for m in chats.open(cid)[1]]} calls={chats.tool_calls(cid)}")


def scroll_to(qtbot, window, button) -> None:
    """Scroll the conversation until ``button`` is on screen, as a person would before clicking
    (a click goes to whatever is at that point of the window)."""
    window.view.ensureWidgetVisible(button)
    qtbot.waitUntil(lambda: not button.visibleRegion().isEmpty())


def _time_json(command: list[str]) -> str:
    return json.dumps({"mcpServers": {"time": {"command": command[0], "args": command[1:]}}})


def test_settings_tools_page_adds_by_pasted_json_and_lists_tools(qtbot, window, time_server_command) -> None:  # noqa: F811
    dialog = window.open_settings("Tools")
    page = dialog.tools_page
    page.pasted.setFocus()
    page.pasted.setPlainText(_time_json(time_server_command))
    qtbot.mouseClick(page.add_json, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: (item := page.item_named("time")) is not None and item.text(1).startswith("ready"),
                    timeout=60_000)
    item = page.item_named("time")
    tools = {item.child(i).text(0): item.child(i) for i in range(item.childCount())}
    assert {"get_current_time", "convert_time"} <= set(tools)
    assert "IANA timezone" not in tools["get_current_time"].text(1)  # the tool's description, not its schema
    assert tools["get_current_time"].text(1).startswith("Get current time")
    tools["convert_time"].setCheckState(0, Qt.CheckState.Unchecked)  # switch one tool off
    qtbot.waitUntil(lambda: "convert_time" in window.engine.chats.tools.servers.get("time").disabled_tools)
    page.pasted.setPlainText("{not json")
    qtbot.mouseClick(page.add_json, Qt.MouseButton.LeftButton)
    assert "not JSON" in page.message.text()
    dialog.reject()


def test_import_from_other_apps_fills_the_box_and_adds_nothing(qtbot, window, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"fetch": {"command": "uvx",
                                                                                       "args": ["mcp-server-fetch"]}}}))
    dialog = window.open_settings("Tools")
    page = dialog.tools_page
    qtbot.mouseClick(page.from_apps, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Cursor" in page.message.text())
    assert json.loads(page.pasted.toPlainText())["mcpServers"]["fetch"]["command"] == "uvx"
    assert window.engine.chats.tools.servers.all() == []  # nothing added before the person says so
    dialog.reject()


def test_approve_with_edited_arguments_then_deny(qtbot, window, time_server_command) -> None:  # noqa: F811
    from inglenook.app.tool_call_widget import ToolCallWidget
    from inglenook.engine import McpServerConfig

    chats = window.engine.chats
    chats.tools.servers.add(McpServerConfig("time", command=time_server_command[0], args=tuple(time_server_command[1:])))
    cid = new_chat(qtbot, window, max_tokens=40)
    box = window.active.tools_box
    qtbot.waitUntil(lambda: "time" in box.boxes)
    box.boxes["time"].click()  # this chat's tools: on
    qtbot.waitUntil(lambda: chats.chat_tools(cid) == ["time"])
    window.chat.tool_choice, window.chat.tool_rounds = "get_current_time", 2

    type_and_send(qtbot, window, "What time is it in Tokyo?")
    qtbot.waitUntil(lambda: bool(window.view.tool_calls) and window.view.tool_calls[0].approve.isVisible(),
                    timeout=ANSWER_TIMEOUT_MS)  # a block added to the shown page appears on the next event
    block = window.view.tool_calls[0]
    assert isinstance(block, ToolCallWidget) and block.waiting
    assert block.toggle.text().startswith("get_current_time") and "time" in block.toggle.text()
    block.arguments.selectAll()
    qtbot.keyClicks(block.arguments, '{"timezone": "Asia/Tokyo"}')
    scroll_to(qtbot, window, block.approve)
    qtbot.mouseClick(block.approve, Qt.MouseButton.LeftButton)
    assert block.state.text() == "running…"
    try:
        wait_answer(qtbot, window, cid)
    except Exception as exc:
        raise AssertionError(_state(window, cid)) from exc
    assert block.done and block.state.text().startswith("done")
    assert json.loads(block.result.toPlainText())["timezone"] == "Asia/Tokyo"
    answers = [w for w in window.view.widgets if w.role == "assistant"]
    assert len(answers) == 2 and answers[-1].text.strip()  # the model answered after the result

    type_and_send(qtbot, window, "And in Paris?")
    qtbot.waitUntil(lambda: len(window.view.tool_calls) == 2 and window.view.tool_calls[1].deny.isVisible(),
                    timeout=ANSWER_TIMEOUT_MS)
    second = window.view.tool_calls[1]
    scroll_to(qtbot, window, second.deny)
    qtbot.mouseClick(second.deny, Qt.MouseButton.LeftButton)
    assert second.state.text() == "denied"
    try:
        wait_answer(qtbot, window, cid)
    except Exception as exc:
        raise AssertionError(_state(window, cid)) from exc
    assert second.state.text() == "denied"
    saved = chats.tool_calls(cid)
    assert [c.status for c in saved] == ["ran", "denied"]
    assert "declined" in second.result.toPlainText()

    window.open_conversation(cid)  # reopened, the calls show as saved blocks
    window.new_chat()
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: len(window.view.tool_calls) == 2 and window.view.tool_calls[0].done)

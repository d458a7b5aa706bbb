"""Tools in the window, driven as a person would: Settings → Tools adds mcp-server-time by
pasting its JSON and shows it ready with its tools, and switches it on for API clients; in a
chat with its tools switched on (its rounds and tool choice set in Chat settings), the call
appears as a block, the person corrects the arguments and approves, the result shows and the
model answers; a second call is denied and goes back as a refusal. A call waiting in a chat
the person left marks it in the sidebar and shows again when it is reopened."""

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
    item.setCheckState(2, Qt.CheckState.Checked)  # "API clients": allowed
    qtbot.waitUntil(lambda: window.engine.chats.tools.servers.get("time").allow_api)
    qtbot.waitUntil(lambda: (found := page.item_named("time")) is not None and found.text(2) == "allowed")
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


def time_chat(qtbot, window, time_server_command: list[str]) -> int:  # noqa: F811
    """A greedy chat with mcp-server-time's tools switched on in its settings panel."""
    from inglenook.engine import McpServerConfig

    chats = window.engine.chats
    if chats.tools.servers.find("time") is None:
        chats.tools.servers.add(McpServerConfig("time", command=time_server_command[0],
                                                args=tuple(time_server_command[1:])))
    cid = new_chat(qtbot, window, max_tokens=40)
    box = window.active.tools_box
    qtbot.waitUntil(lambda: "time" in box.boxes and box.conversation_id == cid)
    box.boxes["time"].click()  # this chat's tools: on
    qtbot.waitUntil(lambda: chats.chat_tools(cid) == ["time"])
    return cid


def choose_tool_settings(qtbot, window, cid: int, tool: str, rounds: int) -> None:
    """In Chat settings → Tools: the first round must call ``tool``; at most ``rounds`` rounds."""
    panel = window.panel
    qtbot.waitUntil(lambda: panel.tool_choice.findData(tool) >= 0, timeout=60_000)  # listed once the server runs
    panel.tool_choice.setCurrentIndex(panel.tool_choice.findData(tool))
    panel.tool_rounds.setValue(rounds)
    panel.flush()  # as switching chats or sending does
    qtbot.waitUntil(lambda: {k: window.engine.conversation(cid).sampling.get(k) for k in ("tool_choice", "tool_rounds")}
                    == {"tool_choice": tool, "tool_rounds": rounds})


def waiting_block(qtbot, window, index: int):
    """The ``index``-th call block once it shows its Approve / Deny."""
    qtbot.waitUntil(lambda: len(window.view.tool_calls) > index and window.view.tool_calls[index].approve.isVisible(),
                    timeout=ANSWER_TIMEOUT_MS)  # a block added to the shown page appears on the next event
    return window.view.tool_calls[index]


def decide(qtbot, window, cid: int, block, button, state: str) -> None:
    """Click ``block``'s Approve or Deny as a person would (it then says ``state``), and wait
    for the model's answer after it."""
    scroll_to(qtbot, window, button)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert block.state.text() == state
    try:
        wait_answer(qtbot, window, cid)
    except Exception as exc:
        raise AssertionError(_state(window, cid)) from exc


def test_approve_with_edited_arguments_then_deny(qtbot, window, time_server_command) -> None:  # noqa: F811
    from inglenook.app.pages.chat.tool_call_widget import ToolCallWidget

    chats = window.engine.chats
    cid = time_chat(qtbot, window, time_server_command)
    choose_tool_settings(qtbot, window, cid, "get_current_time", rounds=2)

    type_and_send(qtbot, window, "What time is it in Tokyo?")
    block = waiting_block(qtbot, window, 0)
    assert isinstance(block, ToolCallWidget) and block.waiting
    assert block.toggle.text().startswith("get_current_time") and "time" in block.toggle.text()
    block.arguments.selectAll()
    qtbot.keyClicks(block.arguments, '{"timezone": "Asia/Tokyo"}')
    decide(qtbot, window, cid, block, block.approve, "running…")
    assert block.done and block.state.text().startswith("done")
    assert json.loads(block.result.toPlainText())["timezone"] == "Asia/Tokyo"
    answers = [w for w in window.view.widgets if w.role == "assistant"]
    assert len(answers) == 2 and answers[-1].text.strip()  # the model answered after the result

    type_and_send(qtbot, window, "And in Paris?")
    second = waiting_block(qtbot, window, 1)
    decide(qtbot, window, cid, second, second.deny, "denied")
    assert second.state.text() == "denied"
    saved = chats.tool_calls(cid)
    assert [c.status for c in saved] == ["ran", "denied"]
    assert "declined" in second.result.toPlainText()

    window.open_conversation(cid)  # reopened, the calls show as saved blocks
    window.new_chat()
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: len(window.view.tool_calls) == 2 and window.view.tool_calls[0].done)


def test_tool_choice_none_and_one_round_are_kept_per_chat(qtbot, window, time_server_command) -> None:  # noqa: F811
    chats = window.engine.chats
    cid = time_chat(qtbot, window, time_server_command)
    panel = window.panel
    qtbot.waitUntil(lambda: panel.tool_choice.findData("convert_time") >= 0, timeout=60_000)
    panel.tool_choice.setCurrentIndex(panel.tool_choice.findData("none"))
    panel.tool_rounds.setValue(1)
    other = new_chat(qtbot, window)  # switching chats saves the edits
    assert panel.chosen_tool() == "auto" and panel.tool_rounds.value() == 5  # the other chat's own
    assert {k: window.engine.conversation(cid).sampling.get(k) for k in ("tool_choice", "tool_rounds")} == {
        "tool_choice": "none", "tool_rounds": 1}
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == cid)
    assert panel.chosen_tool() == "none" and panel.tool_rounds.value() == 1
    # "None": the model answers without offering tools, so no call waits.
    turn = chats.send_with_tools(cid, "What time is it?", lambda request: pytest.fail(f"asked: {request}"))
    assert turn.tool_choice == "none" and turn.max_rounds == 1
    turn.run()
    assert chats.tool_calls(cid) == [] and other != cid


def test_a_call_waiting_in_another_chat_is_marked_and_shown_again(qtbot, window, time_server_command) -> None:  # noqa: F811
    from inglenook.app.pages.sidebar.panel import APPROVAL_ROLE, ID_ROLE

    cid = time_chat(qtbot, window, time_server_command)
    choose_tool_settings(qtbot, window, cid, "get_current_time", rounds=2)
    type_and_send(qtbot, window, "What time is it in Tokyo?")
    first = waiting_block(qtbot, window, 0)
    first.arguments.selectAll()
    qtbot.keyClicks(first.arguments, '{"timezone": "Asia/Tokyo"}')  # edited, then left before approving

    def marked() -> set[int]:
        items = [window.sidebar.list.item(row) for row in range(window.sidebar.list.count())]
        return {item.data(ID_ROLE) for item in items if item.data(APPROVAL_ROLE)}

    qtbot.waitUntil(lambda: marked() == {cid})
    window.new_chat()  # the person looks elsewhere: the block leaves the view, the call still waits
    qtbot.waitUntil(lambda: window.view.tool_calls == [])
    new_chat(qtbot, window)
    assert marked() == {cid} and window.chat.is_streaming(cid)
    window.sidebar.list.setCurrentRow(window.sidebar.ids().index(cid))  # opened from the sidebar
    block = waiting_block(qtbot, window, 0)
    assert block.waiting and block.toggle.text().startswith("get_current_time")
    assert json.loads(block.arguments.toPlainText()) == {"timezone": "Asia/Tokyo"}  # the edit was kept
    decide(qtbot, window, cid, block, block.approve, "running…")
    assert block.done and json.loads(block.result.toPlainText())["timezone"] == "Asia/Tokyo"
    assert window.engine.chats.tool_calls(cid)[0].status == "ran"
    qtbot.waitUntil(lambda: marked() == set())


def test_the_needs_approval_badge_keeps_each_row_tooltip(qtbot) -> None:
    from inglenook.app.pages.sidebar.panel import APPROVAL_ROLE, Sidebar
    from inglenook.engine import Conversation

    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    chats = [Conversation(n, f"Chat {n}", None, None, {}, 0.0, float(n)) for n in (1, 2)]
    sidebar.set_conversations(chats, None, set(), summaries={1: "About clocks."})
    sidebar.set_needs_approval({1})
    first, second = sidebar.list.item(0), sidebar.list.item(1)
    assert first.data(APPROVAL_ROLE) and not second.data(APPROVAL_ROLE)
    assert first.toolTip() == "Chat 1\n\nAbout clocks.\n\nA tool call waits for your approval"
    sidebar.set_conversations(chats, None, set(), summaries={1: "About clocks."})  # a refresh keeps the mark
    assert sidebar.list.item(0).data(APPROVAL_ROLE) and sidebar.list.item(0).toolTip().endswith("approval")
    sidebar.show()
    sidebar.grab()  # the badge paints
    sidebar.set_needs_approval(set())
    assert not sidebar.list.item(0).data(APPROVAL_ROLE) and sidebar.list.item(0).toolTip() == "Chat 1\n\nAbout clocks."


def _add_time_server(window, time_server_command: list[str]) -> None:  # noqa: F811
    from inglenook.engine import McpServerConfig

    servers = window.engine.chats.tools.servers
    if servers.find("time") is None:
        servers.add(McpServerConfig("time", command=time_server_command[0], args=tuple(time_server_command[1:])))


def _next_waiting(qtbot, window, before: int):
    """The call block that waits for the person, once more calls than ``before`` have been asked."""
    def waiting():
        blocks = [b for b in window.view.tool_calls if b.waiting]
        return blocks[-1] if blocks and len(window.view.tool_calls) > before else None

    qtbot.waitUntil(lambda: waiting() is not None, timeout=ANSWER_TIMEOUT_MS)
    return waiting()


def test_a_new_chats_tool_switch_works_before_its_first_message(qtbot, window, time_server_command) -> None:  # noqa: F811
    """New chat → tool server switched on → tool chosen → the first question calls the tool."""
    _add_time_server(window, time_server_command)
    window.new_chat()
    box, panel = window.active.tools_box, window.panel
    qtbot.waitUntil(lambda: "time" in box.boxes and box.conversation_id is None)
    assert box.boxes["time"].isEnabled()
    box.boxes["time"].click()
    qtbot.waitUntil(lambda: panel.tool_choice.findData("get_current_time") >= 0, timeout=60_000)  # listed already
    panel.tool_choice.setCurrentIndex(panel.tool_choice.findData("get_current_time"))
    panel.tool_rounds.setValue(1)
    panel.temperature.setValue(0.0)
    panel.max_tokens.setValue(40)
    type_and_send(qtbot, window, "What time is it?")
    block = _next_waiting(qtbot, window, 0)
    cid = window.current_id
    assert cid is not None and window.engine.chats.chat_tools(cid) == ["time"]
    decide(qtbot, window, cid, block, block.deny, "denied")
    assert [c.tool for c in window.engine.chats.tool_calls(cid)] == ["get_current_time"]


def test_regenerate_and_edit_and_resend_answer_with_the_chats_tools(qtbot, window, time_server_command) -> None:  # noqa: F811
    chats = window.engine.chats
    cid = time_chat(qtbot, window, time_server_command)
    choose_tool_settings(qtbot, window, cid, "get_current_time", rounds=1)
    type_and_send(qtbot, window, "What time is it?")
    block = _next_waiting(qtbot, window, 0)
    decide(qtbot, window, cid, block, block.deny, "denied")
    assert len(chats.tool_calls(cid)) == 1

    answer = [w for w in window.view.widgets if w.role == "assistant"][-1]
    scroll_to(qtbot, window, answer.regenerate_button)
    qtbot.mouseClick(answer.regenerate_button, Qt.MouseButton.LeftButton)
    block = _next_waiting(qtbot, window, 0)
    assert len(window.view.tool_calls) == 1  # the earlier version's block went with its answer
    decide(qtbot, window, cid, block, block.deny, "denied")
    assert len(chats.tool_calls(cid)) == 2  # regenerate called the tool again
    assert len(chats.versions(chats.open(cid)[1][1].id)) == 2  # two answers to the question

    question = window.view.widgets[0]
    scroll_to(qtbot, window, question.edit_button)
    qtbot.mouseClick(question.edit_button, Qt.MouseButton.LeftButton)
    question.editor.setPlainText("What time is it in UTC?")
    qtbot.mouseClick(question.resend_button, Qt.MouseButton.LeftButton)
    block = _next_waiting(qtbot, window, 0)
    decide(qtbot, window, cid, block, block.deny, "denied")
    messages = chats.open(cid)[1]
    assert messages[0].content == "What time is it in UTC?"
    assert [c.tool for c in chats.tool_calls(cid)] == ["get_current_time"] * 3  # and so did the edited question


def test_a_round_that_only_called_takes_no_empty_row(qtbot) -> None:
    """Around a call's block, no empty answer row repeating the figures of the next."""
    from PySide6.QtWidgets import QLabel

    from inglenook.app.pages.chat.message_view import ConversationView
    from inglenook.engine import Message

    view = ConversationView()
    qtbot.addWidget(view)
    view.show()
    figures = {"completion_tokens": 12, "tokens_per_s": 9.0}
    messages = [Message(id=1, conversation_id=1, role="user", content="Time?"),
                Message(id=2, conversation_id=1, role="assistant", content="", **figures),
                Message(id=3, conversation_id=1, role="tool", content="{}"),
                Message(id=4, conversation_id=1, role="assistant", content="It is noon.", **figures)]
    view.set_messages(messages, tool_block=lambda m: QLabel("get_current_time"))
    qtbot.wait(20)  # a widget laid out in a shown page shows on the next event
    assert [w.isVisible() for w in view.widgets] == [True, False, True] and len(view.tool_calls) == 1

    view.begin_answer("model")  # streamed: the round ends with only a call
    view.add_tool_call(QLabel("get_current_time"))
    view.finish_round(Message(id=5, conversation_id=1, role="assistant", content="", **figures))
    view.begin_answer("model")
    qtbot.wait(20)
    assert not view.widgets[-2].isVisible() and view.widgets[-1].isVisible() and len(view.tool_calls) == 2

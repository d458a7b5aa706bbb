"""Screenshots of tools (issue 29): Settings → Tools with mcp-server-time ready (and allowed for
API clients), a call waiting for Approve in the conversation, the same call marked "needs
approval" in the sidebar while another chat is open (its Chat settings showing the tools'
rounds and tool choice), and the finished call with the model's answer.

Runs like scripts/screenshots.py (offscreen, 1280x800, a throwaway INGLENOOK_HOME, the
starter model answering live); mcp-server-time comes from PyPI (the dev extra).

    .venv/bin/python scripts/tools_shot.py [--out docs]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from screenshots import settle, shoot_alone, wait


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    server = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent)) or shutil.which("mcp-server-time")
    if server is None:
        print("mcp-server-time is not installed (pip install mcp-server-time)", file=sys.stderr)
        return 1

    def shoot(app, window) -> None:  # noqa: ANN001
        dialog = window.open_settings("Tools")
        page = dialog.tools_page
        page.pasted.setPlainText(json.dumps({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}},
                                            indent=1))
        # The pasted JSON is what a person has; this machine runs the installed copy.
        configs = [("time", [server, "--local-timezone", "Europe/Lisbon"])]
        from inglenook.engine import McpServerConfig

        for name, command in configs:
            window.engine.chats.tools.servers.add(McpServerConfig(name, command=command[0], args=tuple(command[1:])))
        window.engine.chats.tools.servers.update("time", allow_api=True)
        page.start_server("time")
        wait(app, lambda: (item := page.item_named("time")) is not None and item.text(1).startswith("ready"))
        settle(app)
        dialog.grab().save(str(out / "tools-settings.png"))
        dialog.reject()

        chats = window.engine.chats
        chat = chats.new_conversation(title="Time in Tokyo", sampling={"temperature": 0.0, "max_tokens": 60},
                                      system_prompt="You are a helpful assistant.")
        chats.set_chat_tools(chat.id, ["time"])
        window.conversations.refresh()
        window.open_conversation(chat.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == chat.id)
        panel = window.panel
        wait(app, lambda: panel.tool_choice.findData("get_current_time") >= 0)
        panel.tool_choice.setCurrentIndex(panel.tool_choice.findData("get_current_time"))
        panel.tool_rounds.setValue(2)
        panel.flush()
        window.send("What time is it in Tokyo?")
        wait(app, lambda: bool(window.view.tool_calls))
        block = window.view.tool_calls[0]
        block.arguments.setPlainText('{\n  "timezone": "Asia/Tokyo"\n}')
        settle(app)
        window.view.scroll_to_bottom()
        settle(app)
        window.grab().save(str(out / "tool-approval.png"))

        # Elsewhere meanwhile: the sidebar marks the waiting chat; its Chat settings show the tools.
        other = chats.new_conversation(title="Packing list", sampling={"temperature": 0.0})
        chats.set_chat_tools(other.id, ["time"])
        window.conversations.refresh()
        window.open_conversation(other.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == other.id)
        window.chat_page.settings_toggle.setChecked(True)
        wait(app, lambda: panel.tool_choice.findData("convert_time") >= 0)
        panel.tool_choice.setCurrentIndex(panel.tool_choice.findData("none"))
        panel.tool_rounds.setValue(3)
        from PySide6.QtWidgets import QScrollArea

        panel.findChild(QScrollArea).ensureWidgetVisible(panel.tool_controls)
        settle(app)
        window.grab().save(str(out / "tool-pending-sidebar.png"))
        window.chat_page.settings_toggle.setChecked(False)
        window.open_conversation(chat.id)
        wait(app, lambda: bool(window.view.tool_calls) and window.view.tool_calls[0].waiting)
        block = window.view.tool_calls[0]  # shown again, with the edited arguments
        block.approve.click()
        wait(app, lambda: not window.chat.is_streaming(chat.id) and window.view.streaming_widget() is None)
        block.toggle.setChecked(True)  # open, to show the result
        settle(app)
        window.view.scroll_to_bottom()
        settle(app)
        window.grab().save(str(out / "tool-call-done.png"))

    shoot_alone("inglenook-tools-shots-", shoot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

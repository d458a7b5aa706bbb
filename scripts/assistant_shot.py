"""The assistant editor's screenshot (docs/assistant-editor.png): an assistant with its tool
servers and document collections, opened from Chat settings in the real window. The servers
are configured (never started) and the collection is a real converted file, in a throwaway home.

Used by scripts/screenshots.py; on its own: ``.venv/bin/python scripts/assistant_shot.py [--out docs]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def shoot_assistant(app: Any, window: Any, out: Path, wait: Any, settle: Any) -> None:
    from inglenook.engine import Assistant
    from inglenook.engine.tools import McpServerConfig

    chats = window.engine.chats
    for name in ("time", "fetch"):
        if chats.tools.servers.find(name) is None:
            chats.tools.servers.add(McpServerConfig(name, command=f"mcp-server-{name}"))
    manual = Path(tempfile.mkdtemp(prefix="inglenook-shot-docs-")) / "boiler-manual.txt"
    manual.write_text("The boiler is serviced every October. Reset: hold the red button for five seconds.\n")
    chats.add_to_collection("House manuals", [manual])
    chats.assistants.save(Assistant(
        "Handyman", "You help with repairs around the house. Ask what tools the person has before "
        "suggesting a fix, and say when to call a professional.", {"temperature": 0.4},
        description="Repairs, with the house manuals", tool_servers=("time",), collections=("House manuals",)))
    window.new_chat()
    window.settings_toggle.setChecked(True)
    picker = window.chat_page.panel.assistant
    picker.refresh(select="Handyman")
    picker.edit_chosen()
    wait(app, lambda: picker.editor is not None and picker.editor.isVisible())
    settle(app)
    picker.editor.grab().save(str(out / "assistant-editor.png"))
    picker.editor.reject()
    window.settings_toggle.setChecked(False)


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("docs")
    out.mkdir(parents=True, exist_ok=True)
    from screenshots import settle, shoot_alone, wait

    shoot_alone("inglenook-assistant-shot-", lambda app, window: shoot_assistant(app, window, out, wait, settle))
    print(out / "assistant-editor.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

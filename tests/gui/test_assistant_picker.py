"""Assistants in Chat settings: picking one fills in its system prompt and sampling (and a
new chat starts with them), the current settings can be saved as one, and assistants
export to a JSON file and import from it."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QInputDialog

from .conftest import type_and_send, wait_answer

pytestmark = pytest.mark.gui


def _pick(panel, name: str) -> None:
    combo = panel.assistant.combo
    index = combo.findText(name)
    assert index > 0, [combo.itemText(i) for i in range(combo.count())]
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def test_a_new_chat_starts_with_the_picked_assistant(qtbot, window) -> None:
    window.new_chat()
    panel = window.chat_page.panel
    _pick(panel, "Concise")
    assert panel.system_prompt.toPlainText().startswith("Answer briefly")
    assert panel.temperature.value() == pytest.approx(0.3)
    panel.max_tokens.setValue(6)
    type_and_send(qtbot, window, "What is rye?")
    qtbot.waitUntil(lambda: window.current_id is not None)
    cid = window.current_id
    wait_answer(qtbot, window, cid)
    stored = window.engine.store.get_conversation(cid)
    assert stored.system_prompt.startswith("Answer briefly")
    assert stored.sampling["temperature"] == pytest.approx(0.3) and stored.sampling["max_tokens"] == 6


def test_save_export_and_import_assistants(qtbot, window, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    window.new_chat()
    panel = window.chat_page.panel
    panel.system_prompt.setPlainText("Reply like a ship's captain.")
    panel.temperature.setValue(1.1)
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Captain", True))
    panel.assistant.save_current()
    library = window.engine.chats.assistants
    assert library.get("Captain").system_prompt == "Reply like a ship's captain."
    assert library.get("Captain").sampling["temperature"] == pytest.approx(1.1)
    assert panel.assistant.combo.currentText() == "Captain"

    exported = tmp_path / "mine.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(exported), ""))
    panel.assistant.export()
    names = [a["name"] for a in json.loads(exported.read_text())["assistants"]]
    assert "Captain" in names and "Concise" in names

    library.delete("Captain")
    assert panel.assistant.combo.findText("Captain") >= 0  # still listed until refreshed
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(exported), ""))
    panel.assistant.import_file()
    assert library.get("Captain").system_prompt == "Reply like a ship's captain."

    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    warnings: list[str] = []
    from PySide6.QtWidgets import QMessageBox

    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text: warnings.append(text))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(bad), ""))
    panel.assistant.import_file()
    assert warnings and "not JSON" in warnings[0]


def _handyman(window, tmp_path) -> None:
    """A tool server (never started: no message is answered with it) and a collection, and an
    assistant that names both plus one of each that this machine does not have."""
    from inglenook.engine import Assistant
    from inglenook.engine.tools import McpServerConfig

    chats = window.engine.chats
    chats.tools.servers.add(McpServerConfig("clock", command="clock-server"))
    manual = tmp_path / "boiler.txt"
    manual.write_text("The boiler is serviced every October.")
    chats.add_to_collection("house", [manual])
    chats.assistants.save(Assistant("Handyman", "Help with the house.", tool_servers=("clock", "elsewhere"),
                                    collections=("house", "gone")))
    window.chat_page.panel.assistant.refresh()


def test_a_new_chat_picked_with_an_assistant_starts_with_its_tools_and_documents(qtbot, window, tmp_path) -> None:
    _handyman(window, tmp_path)
    window.new_chat()
    panel = window.chat_page.panel
    _pick(panel, "Handyman")
    assert "Tools: clock, elsewhere" in panel.assistant.combo.itemData(
        panel.assistant.combo.currentIndex(), Qt.ItemDataRole.ToolTipRole)
    # The first file attached creates the chat, as its first message would: with the assistant.
    note = tmp_path / "note.txt"
    note.write_text("Ring the landlord first.")
    window.attachments.attach([note])
    qtbot.waitUntil(lambda: window.current_id is not None and len(window.attachments.documents) == 2, timeout=60_000)
    cid = window.current_id
    chats = window.engine.chats
    assert chats.chat_tools(cid) == ["clock"]
    assert sorted(d.name for d in chats.attached_documents(cid)) == ["boiler.txt", "note.txt"]
    assert window.engine.store.get_conversation(cid).system_prompt == "Help with the house."
    qtbot.waitUntil(lambda: "clock" in window.active.tools_box.boxes and window.active.tools_box.boxes["clock"].isChecked())

    # A new chat after it starts plain again.
    window.new_chat()
    assert window.active.draft_assistant is None


def test_an_open_chat_takes_a_picked_assistants_tools_and_documents(qtbot, window, tmp_path) -> None:
    _handyman(window, tmp_path)
    chats = window.engine.chats
    conversation = chats.new_conversation(title="Leaky tap")
    window.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: window.current_id == conversation.id and "clock" in window.active.tools_box.boxes)
    assert not window.active.tools_box.boxes["clock"].isChecked()
    _pick(window.chat_page.panel, "Handyman")
    qtbot.waitUntil(lambda: [d.name for d in window.attachments.documents] == ["boiler.txt"], timeout=30_000)
    qtbot.waitUntil(lambda: window.active.tools_box.boxes["clock"].isChecked())
    assert chats.chat_tools(conversation.id) == ["clock"]


def test_the_editor_changes_an_assistants_tools_and_documents(qtbot, window, tmp_path) -> None:
    from inglenook.app.pages.chat.assistant_editor import NOT_HERE

    _handyman(window, tmp_path)
    window.new_chat()
    picker = window.chat_page.panel.assistant
    _pick(window.chat_page.panel, "Handyman")
    picker.edit_chosen()
    qtbot.waitUntil(lambda: picker.editor is not None and picker.editor.isVisible())
    editor = picker.editor
    tools = {editor.tool_servers.item(r).text(): editor.tool_servers.item(r) for r in range(editor.tool_servers.count())}
    assert set(tools) == {"clock", "elsewhere" + NOT_HERE}  # kept, marked, not dropped unseen
    tools["elsewhere" + NOT_HERE].setCheckState(Qt.CheckState.Unchecked)
    documents = [editor.collections.item(r) for r in range(editor.collections.count())]
    assert [d.text() for d in documents] == ["house", "gone" + NOT_HERE]
    documents[0].setCheckState(Qt.CheckState.Unchecked)
    editor.description.setText("Fixes things")
    editor.save()
    saved = window.engine.chats.assistants.get("Handyman")
    assert saved.tool_servers == ("clock",) and saved.collections == ("gone",)
    assert saved.description == "Fixes things" and saved.system_prompt == "Help with the house."
    assert picker.combo.currentText() == "Handyman"

    # Renamed in the editor: one assistant under the new name, not a copy.
    picker.edit_chosen()
    qtbot.waitUntil(lambda: picker.editor is not editor and picker.editor.isVisible())
    picker.editor.name.setText("Fixer")
    picker.editor.save()
    names = [a.name for a in window.engine.chats.assistants.all()]
    assert "Fixer" in names and "Handyman" not in names


def test_save_as_keeps_the_chats_tools(qtbot, window, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    _handyman(window, tmp_path)
    chats = window.engine.chats
    conversation = chats.new_conversation(title="Clock chat")
    chats.set_chat_tools(conversation.id, ["clock"])
    window.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: "clock" in window.active.tools_box.boxes and window.active.tools_box.boxes["clock"].isChecked())
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Timekeeper", True))
    window.chat_page.panel.assistant.save_current()
    assert chats.assistants.get("Timekeeper").tool_servers == ("clock",)

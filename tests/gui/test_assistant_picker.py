"""Assistants in Chat settings: picking one fills in its system prompt and sampling (and a
new chat starts with them), the current settings can be saved as one, and assistants
export to a JSON file and import from it."""

from __future__ import annotations

import json

import pytest
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

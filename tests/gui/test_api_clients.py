"""Settings (offscreen, the real window and engine): the API page's coding-agent settings with
Copy buttons, and the Models & context page's aliases and per-model context, saved for real."""

from __future__ import annotations

import json
import tomllib

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QComboBox

from inglenook.engine.api.shared.requests import ModelNames

pytestmark = pytest.mark.gui

STARTER = "smollm2-135m-instruct:q4_1"


def test_the_api_page_shows_each_client_with_a_copy_button(qtbot, window) -> None:
    dialog = window.open_settings("API server")
    card = dialog.api_clients
    dialog.api_port.setValue(9393)
    dialog.api_key.setText("s3cret")
    codex = tomllib.loads(card.texts["codex"].toPlainText())
    assert codex["model_providers"]["inglenook"]["base_url"] == "http://127.0.0.1:9393/v1"
    assert codex["model_providers"]["inglenook"]["wire_api"] == "responses"
    assert codex["model"] == STARTER
    assert "export INGLENOOK_API_KEY=s3cret" in card.texts["codex"].toPlainText()
    claude = card.texts["claude"].toPlainText()
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:9393\n" in claude and "ANTHROPIC_AUTH_TOKEN=s3cret" in claude
    opencode = json.loads(card.texts["opencode"].toPlainText())
    assert opencode["provider"]["inglenook"]["options"]["baseURL"] == "http://127.0.0.1:9393/v1"
    for client in ("codex", "claude", "opencode"):
        qtbot.mouseClick(card.copy_buttons[client], Qt.MouseButton.LeftButton)
        assert QGuiApplication.clipboard().text() == card.texts[client].toPlainText()
    dialog.reject()


def test_aliases_and_a_models_context_are_saved_from_settings(qtbot, window, engine) -> None:
    assert engine.settings.context_size == 0  # a fresh installation: automatic
    dialog = window.open_settings("Models & context")
    assert dialog.context_size.text() .startswith("Automatic")
    page = dialog.model_names
    for name in ("Claude-Sonnet-4-5", "not valid!"):
        page.add_alias("", None)
        row = page.aliases.rowCount() - 1
        page.aliases.item(row, 0).setText(name)
        combo = page.aliases.cellWidget(row, 1)
        assert isinstance(combo, QComboBox)
        combo.setCurrentIndex(combo.findData(STARTER))
    page.context_boxes[STARTER].setValue(3072)
    changes = dialog.changes()
    assert changes["model_aliases"] == {"claude-sonnet-4-5": STARTER}  # the invalid name is left out...
    assert "not valid!" in page.problem.text()  # ...and said why
    assert changes["model_context"] == {STARTER: 3072}
    assert "context_size" not in changes  # "Automatic" stays 0, not the spin box's minimum
    dialog._save()  # the Save button's slot
    qtbot.waitUntil(lambda: engine.settings.model_aliases == {"claude-sonnet-4-5": STARTER}, timeout=30_000)
    assert engine.settings.context_for(STARTER) == 3072
    assert ModelNames(engine, strict=True).resolve("claude-sonnet-4-5").id == STARTER

    reopened = window.open_settings("Models & context")
    assert reopened.model_names.context_boxes[STARTER].value() == 3072
    assert reopened.model_names.alias_map() == {"claude-sonnet-4-5": STARTER}
    reopened.reject()

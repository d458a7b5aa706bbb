"""The window's controllers and pages, each asked through the class that does the job (the real
window on the real engine and model): what the next message carries, the conversations and
models lists, saving settings, the models' load state, the status line and the Settings pages."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QFileDialog

from inglenook.app.controllers.conversations import ConversationList
from inglenook.app.controllers.message_history import MessageHistory
from inglenook.app.controllers.documents import Attachments
from inglenook.app.controllers.images import WaitingImages
from inglenook.app.controllers.model_list import ModelList
from inglenook.app.controllers.next_message import NextMessage
from inglenook.app.desktop import install_tray
from inglenook.app.pages.chat.assistant_picker import AssistantPicker, describe
from inglenook.app.pages.chat.composer import Composer
from inglenook.app.pages.chat.page import ChatPage
from inglenook.app.pages.chat.settings_panel import ChatSettingsPanel
from inglenook.app.pages.chat.tools_box import ChatToolsBox
from inglenook.app.pages.models.downloads import DownloadsPanel
from inglenook.app.pages.models.page import ModelsPage
from inglenook.app.pages.models.repo import short_date
from inglenook.app.pages.settings.about import AboutPage
from inglenook.app.pages.settings.api_clients import ApiClientsCard
from inglenook.app.pages.settings.background import BackgroundCard
from inglenook.app.pages.settings.engines import EnginesPage
from inglenook.app.pages.settings.keys import KeysPage
from inglenook.app.pages.usage.page import UsagePage
from inglenook.app.pages.usage.prices import CostEditor
from inglenook.app.services.app_settings import SettingsSaver
from inglenook.app.services.errors import explain
from inglenook.app.services.model_state import ModelStateHub
from inglenook.app.services.tray import TrayController
from inglenook.app.widgets.help_menu import AppMenus
from inglenook.app.widgets.status_line import StatusLine
from inglenook.engine import Assistant, Endpoint, InglenookError, decode_image
from tests.gui.conftest import new_chat, type_and_send, wait_answer

pytestmark = pytest.mark.gui
WAIT_MS = 30_000


def _png(width: int = 32, height: int = 24) -> bytes:
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor("#3366aa"))
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())


def test_the_next_message_keeps_its_text_when_the_model_cannot_read_its_images(qtbot, window) -> None:
    next_message = window.next_message
    assert isinstance(next_message, NextMessage)
    assert isinstance(next_message.images, WaitingImages) and isinstance(next_message.documents, Attachments)
    page: ChatPage = window.chat_page
    before = window.active.current_id
    page.image_pasted.emit(_png())  # as the composer says it when a screenshot is pasted
    qtbot.waitUntil(lambda: len(window.images.images) == 1 and window.images.problem is not None, timeout=WAIT_MS)
    next_message.send("  What is in this picture?  ")
    assert page.message_text() == "What is in this picture?"  # kept, stripped, for after a switch
    assert window.active.current_id == before  # nothing was sent, no chat was made
    assert "Not sent" in page.attachment_bar.status.text() and len(window.images.images) == 1
    next_message.send("   ")  # blank: nothing happens, not even the note
    assert len(window.images.images) == 1


def test_a_pasted_file_that_is_no_image_is_explained_under_the_box(qtbot, window) -> None:
    page: ChatPage = window.chat_page
    with qtbot.waitSignal(page.image_pasted, timeout=WAIT_MS):
        page.composer.input.image_pasted.emit(b"not an image at all")  # the page says its child's signal
    try:
        decode_image(b"not an image at all", what="the pasted image")
    except InglenookError as exc:
        expected = explain(exc).text
    qtbot.waitUntil(lambda: page.attachment_bar.status.text() == expected, timeout=WAIT_MS)
    assert window.images.images == []


def test_the_chat_page_answers_what_controllers_may_ask(qtbot, window) -> None:
    page: ChatPage = window.chat_page
    assert isinstance(page.composer, Composer) and isinstance(page.panel, ChatSettingsPanel)
    page.set_message_text("draft")
    assert page.message_text() == "draft" and window.composer.input.toPlainText() == "draft"
    page.set_streaming(True)
    assert page.composer.stop_button.isVisibleTo(page) and not page.composer.send_button.isVisibleTo(page)
    page.set_streaming(False)
    assert page.composer.send_button.isVisibleTo(page)
    shown = page.shown_model()
    assert shown == window.model_list.default_model or shown in {m.id for m in window.model_list.models}


def test_the_conversation_list_lists_and_renames(qtbot, window) -> None:
    conversations = window.conversations
    assert isinstance(conversations, ConversationList)
    conversation_id = new_chat(qtbot, window)
    with qtbot.waitSignal(conversations.renamed, timeout=WAIT_MS) as renamed:
        conversations.rename(conversation_id, "Rooms and doors")
    assert renamed.args[0].title == "Rooms and doors"
    assert any(c.id == conversation_id and c.title == "Rooms and doors" for c in window.engine.chats.conversations())
    with qtbot.waitSignal(conversations.listed, timeout=WAIT_MS) as listed:
        conversations.refresh()
    assert any(c.id == conversation_id and c.title == "Rooms and doors" for c in listed.args[0])


def test_the_model_list_knows_the_installed_models(qtbot, window) -> None:
    models = window.model_list
    assert isinstance(models, ModelList)
    with qtbot.waitSignal(models.changed, timeout=WAIT_MS):
        models.refresh()
    ids = [m.id for m in models.models]
    assert ids and models.is_installed(ids[0]) and not models.is_installed("no-such-model")
    assert not ModelList.is_remote(models.models[0])


def test_settings_are_saved_off_the_gui_thread(qtbot, window) -> None:
    saver = window.saver
    assert isinstance(saver, SettingsSaver)
    wanted = not window.engine.settings.close_to_tray
    with qtbot.waitSignal(saver.saved, timeout=WAIT_MS) as saved:
        saver.apply({"close_to_tray": wanted})
    assert saved.args[0] == {"close_to_tray": wanted} and window.engine.settings.close_to_tray is wanted


def test_a_load_is_told_by_the_hub_and_shown_on_the_status_line(qtbot, window) -> None:
    hub, status = window.hub, window.status_line
    assert isinstance(hub, ModelStateHub) and isinstance(status, StatusLine)
    model_id = window.model_list.models[0].id
    states: list[str] = []
    hub.changed.connect(lambda model, state, _detail: states.append(state) if model == model_id else None)
    window.model_list.load(model_id)
    qtbot.waitUntil(lambda: "loaded" in states, timeout=WAIT_MS * 4)
    qtbot.waitUntil(lambda: status.model_status.text().startswith(f"● {model_id}"), timeout=WAIT_MS)
    status.show_api_state("running", "http://127.0.0.1:8484")
    assert status.api_toggle.text() == "Stop API" and status.api_toggle.isChecked()
    status.show_api_state("stopped", "")
    assert status.api_toggle.text() == "Start API" and status.api_status.text().startswith("API off")


def test_the_chat_tools_box_says_how_to_add_servers_when_there_are_none(qtbot, window) -> None:
    box = window.active.tools_box
    assert isinstance(box, ChatToolsBox)
    with qtbot.waitSignal(box.tools_listed, timeout=WAIT_MS) as listed:
        box.load(None)
    assert listed.args == [[]] and box.chosen() == [] and box.hint.isVisibleTo(box)


def test_the_settings_pages_are_built_and_explain_a_refused_engine(qtbot, window) -> None:
    dialog = window.open_settings("Engines")
    try:
        assert isinstance(dialog.background, BackgroundCard)
        assert set(dialog.background.changes()) == {"background_model", "background_titles",
                                                     "background_summaries", "background_search"}
        assert isinstance(dialog.api_clients, ApiClientsCard)
        dialog.api_clients.show_endpoint(Endpoint(root="http://127.0.0.1:9999", model="smol"))
        assert isinstance(dialog.keys_page, KeysPage)
        engines = dialog.engines_page
        assert isinstance(engines, EnginesPage)
        engines.name.setText("")  # no name: the catalogue refuses, in explained words
        engines.base_url.setText("not a url")
        engines.add_engine()
        assert engines.message.text() and engines.message.text()[0].isupper()
        engines.rpc_workers.setPlainText("no port here")
        engines.check_workers()
        assert engines.workers_status.text()[:1].isupper()
        dialog.show_page("About")
        about = dialog.about_page
        assert isinstance(about, AboutPage)
        qtbot.waitUntil(lambda: about.report is not None, timeout=WAIT_MS)  # collected on the answers lane
        assert "llama.cpp commit:" in about.text.toPlainText()
    finally:
        dialog.reject()


def test_the_models_and_usage_pages_are_in_the_window(qtbot, window) -> None:
    assert isinstance(window.models_page, ModelsPage) and isinstance(window.models_page.downloads, DownloadsPanel)
    assert short_date(datetime(2026, 3, 5)) == "Mar 5, 2026" and short_date(None) == "unknown date"
    usage = window.usage_page
    assert isinstance(usage, UsagePage) and isinstance(usage.editor, CostEditor)
    menus = window.menus
    assert isinstance(menus, AppMenus)
    dialog = menus.show_shortcuts()
    assert "New chat" in dialog.body.text()
    dialog.close()


def test_message_history_deletes_an_answer_and_shows_the_chat_again(qtbot, window) -> None:
    history = window.history
    assert isinstance(history, MessageHistory)
    conversation_id = new_chat(qtbot, window, max_tokens=4)
    type_and_send(qtbot, window, "Say hi.")
    wait_answer(qtbot, window, conversation_id)
    answer = window.engine.messages(conversation_id)[-1]
    assert answer.role == "assistant"
    history.delete(answer.id)
    qtbot.waitUntil(lambda: [m.role for m in window.engine.messages(conversation_id)] == ["user"], timeout=WAIT_MS)
    qtbot.waitUntil(lambda: all(w.message is None or w.message.id != answer.id for w in window.view.widgets),
                    timeout=WAIT_MS)


def test_an_assistant_is_described_by_what_it_brings(qtbot, window) -> None:
    picker = window.chat_page.panel.assistant
    assert isinstance(picker, AssistantPicker)
    plain = Assistant("Plain", system_prompt="Be brief.")
    assert describe(plain) == "Be brief."
    equipped = Assistant("Helper", description="Helps.", tool_servers=("time",), collections=("lease",))
    assert describe(equipped) == "Helps.\nTools: time\nDocuments: lease"
    assert describe(Assistant("Empty")) == "No system prompt"


def test_without_a_tray_the_tray_controller_never_hides_the_window(qtbot, window) -> None:
    tray = install_tray(window)
    assert isinstance(tray, TrayController)
    assert not tray.should_hide_on_close()  # offscreen there is no tray to hide in


def test_exporting_asks_the_sidebar_where_and_writes_there(qtbot, window, tmp_path, monkeypatch) -> None:
    conversation_id = new_chat(qtbot, window)
    target = tmp_path / "exported.md"
    asked: list[tuple[str, str]] = []

    def pick(_parent, title, suggested, kinds):
        asked.append((suggested, kinds))
        return str(target), kinds

    monkeypatch.setattr(QFileDialog, "getSaveFileName", pick)
    window.conversations.export(conversation_id, "markdown")
    qtbot.waitUntil(target.exists, timeout=WAIT_MS)
    assert asked == [(str(Path.home() / f"conversation-{conversation_id}.md"), "Markdown (*.md)")]
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *_a: ("", ""))  # cancelled: nothing written
    target.unlink()
    window.conversations.export(conversation_id, "json")
    assert not target.exists()

"""The rest of the window: sidebar, export, errors, Markdown, shortcuts, picker, settings, scrolling."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QTextTable
from PySide6.QtWidgets import QApplication

from inglenook.app.services import errors as app_errors
from inglenook.app.text.markdown import split_segments
from inglenook.app.widgets.markdown_view import CodeBlock, Prose, RichText
from inglenook.engine import ContextLengthExceeded, ModelLoadError, ModelNotFound, PortInUse

from .conftest import ANSWER_TIMEOUT_MS, new_chat, type_and_send, wait_answer

pytestmark = pytest.mark.gui


def _chat_with(window, title: str, *pairs: tuple[str, str]) -> int:
    store = window.engine.store
    conversation = window.engine.chats.new_conversation(title=title)
    for question, answer in pairs:
        store.add_message(conversation.id, "user", question)
        store.add_message(conversation.id, "assistant", answer)
    return conversation.id


def test_sidebar_search_rename_delete_and_undo(qtbot, window) -> None:
    apples = _chat_with(window, "Fruit", ("Tell me about apples", "Apples are crunchy."))
    trains = _chat_with(window, "Travel", ("Fastest trains?", "The Shinkansen is fast."))
    window.conversations.refresh()
    qtbot.waitUntil(lambda: window.sidebar.ids() == [trains, apples])  # newest activity first

    qtbot.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert window.sidebar.search.hasFocus()
    qtbot.keyClicks(window.sidebar.search, "crunchy")  # found in a message, not the title
    qtbot.waitUntil(lambda: window.sidebar.ids() == [apples])
    window.sidebar.search.clear()
    qtbot.waitUntil(lambda: window.sidebar.ids() == [trains, apples])

    item = window.sidebar.list.item(1)
    item.setText("Orchard notes")  # what inline editing does
    qtbot.waitUntil(lambda: window.engine.store.get_conversation(apples).title == "Orchard notes")

    window.conversations.delete(trains)
    qtbot.waitUntil(lambda: window.sidebar.ids() == [apples])
    assert window.sidebar.toast.isVisibleTo(window)
    window.conversations.undo_delete()
    qtbot.waitUntil(lambda: sorted(window.sidebar.ids()) == sorted([trains, apples]))
    window.conversations.delete(trains)
    window.conversations.commit_pending_deletes()
    assert [c.id for c in window.engine.store.list_conversations()] == [apples]


def test_a_chat_being_opened_is_not_taken_for_the_open_one(qtbot, window) -> None:
    """Between opening a chat and its messages arriving, the sidebar's fresher copy of the
    chat must not pass for the loaded one: the composer would send into a page that still
    shows (and streams) the previous chat."""
    first = _chat_with(window, "First", ("One?", "One."))
    second = _chat_with(window, "Second", ("Two?", "Two."))
    window.open_conversation(first)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == first)

    window.open_conversation(second)  # its messages load on a worker
    window.active.listed(window.engine.store.list_conversations())
    window.active.conversation_updated(window.engine.store.get_conversation(second))
    assert window.current_id == second
    assert window.conversation is not None and window.conversation.id == first  # not loaded yet
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == second)
    assert window.view.last_answer_text() == "Two."


def test_export_markdown_and_json(qtbot, window, tmp_path) -> None:
    cid = _chat_with(window, "Exported", ("Show a list", "- one\n- two"))
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    window.conversations.export(cid, "markdown", str(md))
    window.conversations.export(cid, "json", str(js))
    qtbot.waitUntil(lambda: md.exists() and js.exists())
    text = md.read_text()
    assert text.startswith("# Exported") and "## You" in text and "- one\n- two" in text
    body = json.loads(js.read_text())
    assert body["conversation"]["title"] == "Exported"
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]


def test_errors_map_by_type_to_actions() -> None:
    full = app_errors.explain(ContextLengthExceeded("too long", prompt_tokens=5000, context_size=4096))
    assert {a for a, _ in full.actions} == {app_errors.NEW_CHAT, app_errors.TRIM_OLDEST}
    assert "4096" in full.text
    assert app_errors.USE_DEFAULT_MODEL in dict(app_errors.explain(ModelNotFound("x")).actions)
    assert app_errors.OPEN_SETTINGS in dict(app_errors.explain(ModelLoadError("x")).actions)
    port = app_errors.explain(PortInUse("busy", host="127.0.0.1", port=8484))
    assert "port" in port.title.lower() and app_errors.OPEN_SETTINGS in dict(port.actions)
    assert "unexpected" in app_errors.explain(RuntimeError("boom")).title


def test_missing_model_offers_the_default(qtbot, window) -> None:
    cid = window.engine.chats.new_conversation(title="Old chat", model_id="gone-model:q4_0").id
    window.conversations.refresh()
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: window.banner.isVisibleTo(window))
    assert app_errors.USE_DEFAULT_MODEL in window.banner.action_ids()
    assert "(not installed)" in window.picker.text()
    window.banner._clicked(app_errors.USE_DEFAULT_MODEL)
    qtbot.waitUntil(lambda: window.engine.store.get_conversation(cid).model_id is None)
    qtbot.waitUntil(lambda: "SmolLM2" in window.picker.text())


@pytest.mark.integration
def test_full_context_offers_new_chat_or_trimming(qtbot, window) -> None:
    window.engine.update_settings(context_size=256)
    cid = new_chat(qtbot, window, max_tokens=8)
    store = window.engine.store
    for i in range(6):
        store.add_message(cid, "user", f"Question {i}: " + "tell me more about the weather " * 6)
        store.add_message(cid, "assistant", "It is sunny and warm today. " * 6)
    window.active.conversation = None
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: len(window.view.widgets) == 12)
    type_and_send(qtbot, window, "And tomorrow?")
    qtbot.waitUntil(lambda: window.banner.isVisibleTo(window), timeout=ANSWER_TIMEOUT_MS)
    assert window.banner.title.text() == "This conversation no longer fits"
    assert window.banner.action_ids()[:2] == [app_errors.NEW_CHAT, app_errors.TRIM_OLDEST]
    def settled() -> bool:
        if window.chat.is_streaming(cid) or window.view.streaming_widget() is not None:
            return False
        return window.banner.isVisibleTo(window) or store.messages(cid)[-1].role == "assistant"

    total = len(store.messages(cid))
    for _ in range(4):  # each trim drops the oldest third and answers again, until it fits
        window.banner._clicked(app_errors.TRIM_OLDEST)
        qtbot.waitUntil(lambda: len(store.messages(cid)) < total)
        qtbot.waitUntil(settled, timeout=ANSWER_TIMEOUT_MS)
        total = len(store.messages(cid))
        if store.messages(cid)[-1].role == "assistant":
            break
    stored = store.messages(cid)
    assert stored[-1].role == "assistant" and stored[-2].content == "And tomorrow?"


def test_markdown_renders_tables_lists_links_quotes_and_code(qtbot, window) -> None:
    text = (
        "Intro with a [link](https://example.com).\n\n- one\n- two\n\n> a quote\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\ndef f():\n    return 1\n```\nAfter."
    )
    assert [s.kind for s in split_segments(text)] == ["text", "code", "text"]
    from inglenook.engine import Message

    widget = window.view.add_message(Message(id=1, conversation_id=1, role="assistant", content=text))
    parts = widget.body._widgets
    prose = parts[0][1]
    assert isinstance(prose, Prose)
    documents = [text.document() for text in prose.documents()]
    assert all(isinstance(text, RichText) for text in prose.documents())
    assert any(isinstance(f, QTextTable) for d in documents for f in d.rootFrame().childFrames())
    assert any("https://example.com" in d.toHtml() for d in documents)
    assert sum(d.toPlainText().count("one") for d in documents) == 1
    code = widget.body.code_blocks()[0]
    assert isinstance(code, CodeBlock) and code.language_label.text() == "python"
    assert "<span" in code.text.toHtml()  # highlighted
    qtbot.mouseClick(code.copy_button, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == "def f():\n    return 1"
    assert code.copy_button.text() == "Copied"


def test_streaming_code_fence_stays_in_place(qtbot, window) -> None:
    window.view.begin_answer("model")
    window.view.update_answer("Here:\n\n```python\nx = 1")
    widget = window.view.streaming_widget()
    first_prose = widget.body._widgets[0][1]
    block = widget.body.code_blocks()[0]
    window.view.update_answer("Here:\n\n```python\nx = 1\ny = 2\n```\nDone.")
    assert widget.body._widgets[0][1] is first_prose  # earlier text is not rebuilt
    assert widget.body.code_blocks()[0] is block and block.code == "x = 1\ny = 2"


def test_auto_scroll_follows_until_the_user_scrolls_up(qtbot, window) -> None:
    from inglenook.engine import Message

    window.view.set_messages([
        Message(id=i, conversation_id=1, role="user" if i % 2 else "assistant", content=f"Message {i}\n\n" + "words " * 80)
        for i in range(1, 21)
    ])
    bar = window.view.verticalScrollBar()

    def grow(text: str) -> None:
        """Show more of the answer, and lay it out as a streamed answer is, a piece at a time
        (the posted layout requests run now; following, or not, happens as the range changes)."""
        window.view.update_answer(text)
        QApplication.processEvents()

    window.view.begin_answer("model")
    text = ""
    for i in range(30):
        text += f"line {i}\n\n"
        grow(text)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum() and bar.maximum() > 0)
    bar.setValue(bar.maximum() // 2)  # the user scrolls up to read
    held, held_maximum = bar.value(), bar.maximum()
    for i in range(30, 50):
        text += f"line {i}\n\n"
        grow(text)
    qtbot.waitUntil(lambda: bar.maximum() > held_maximum)  # the new lines are laid out
    assert bar.value() == held
    bar.setValue(bar.maximum())  # back to the bottom: follow again
    text += "more\n\n" * 10
    window.view.update_answer(text)
    qtbot.waitUntil(lambda: bar.value() == bar.maximum())


def test_shortcuts(qtbot, window) -> None:
    cid = _chat_with(window, "Shortcuts", ("Q", "The **answer**."))
    window.conversations.refresh()
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: len(window.view.widgets) == 2)
    qtbot.keyClick(window, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert QGuiApplication.clipboard().text() == "The **answer**."
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.current_id is None and window.view.widgets == []
    qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.settings_dialog is not None and window.settings_dialog.isVisible())
    window.settings_dialog.reject()
    # Shift+Enter adds a line; Enter sends.
    window.composer.input.setFocus()
    qtbot.keyClicks(window.composer.input, "line one")
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(window.composer.input, "line two")
    assert window.composer.text() == "line one\nline two"


@pytest.mark.integration
def test_model_picker_lists_models_and_loads_one(qtbot, window) -> None:
    qtbot.mouseClick(window.picker, Qt.MouseButton.LeftButton)
    popup = window.picker.popup
    assert popup.isVisible()
    assert popup.list.count() == len(window.models) >= 1
    record = popup.list.item(0).data(Qt.ItemDataRole.UserRole + 1)
    assert record.quantization == "Q4_1" and record.size_bytes > 0
    loads: list[str] = []
    window.hub.changed.connect(lambda model, state, detail: loads.append(state))
    popup._clicked(popup.list.item(0))
    qtbot.waitUntil(lambda: window.hub.loaded == record.id, timeout=ANSWER_TIMEOUT_MS)
    assert "loading" in loads and "loaded" in loads
    assert record.id in window.model_status.text()
    assert window.picker.state_of(record.id) == "Loaded"
    assert window.picker.text().startswith("●")


def test_settings_dialog_saves_and_switches_theme(qtbot, window) -> None:
    dialog = window.open_settings()
    assert [dialog.nav.item(i).text() for i in range(dialog.nav.count())][-2:] == ["Quantization", "About"]
    dialog.show_page("Quantization")
    from inglenook.app.pages.lab.page import LabPage

    assert isinstance(dialog.lab_page, LabPage)
    dialog.show_page("Cache")
    qtbot.waitUntil(lambda: "on disk" in dialog.cache_used.text())
    dialog.show_page("Appearance")
    for button in dialog.theme_group.buttons():
        if button.property("theme") == "dark":
            button.setChecked(True)
    dialog.threads.setValue(2)
    dialog.gpu_auto.setChecked(False)
    dialog.gpu_layers.setValue(0)
    dialog.api_enabled.setChecked(False)
    dialog.parallel.setValue(2)
    dialog.prefill_chunk.setValue(128)
    dialog.memory_budget.setValue(4096)
    dialog.background.search.setChecked(False)
    dialog.background.summaries.setChecked(False)
    assert dialog.changes() == {"theme": "dark", "threads": 2, "gpu_layers": 0, "api_enabled": False,
                                "parallel_sequences": 2, "prefill_chunk": 128, "memory_budget_mb": 4096,
                                "background_search": False, "background_summaries": False}
    dialog._save()
    qtbot.waitUntil(lambda: window.engine.settings.theme == "dark")
    assert not window.engine.settings.background_search and window.engine.settings.background_titles
    assert window.engine.settings.threads == 2 and window.engine.settings.gpu_layers == 0
    assert window.engine.settings.parallel_sequences == 2
    assert window.engine.scheduler.prefill_chunk == 128 and window.engine.settings.memory_budget_mb == 4096
    qtbot.waitUntil(lambda: QApplication.instance().property("inglenook_theme") == "dark")
    assert window.engine.store.get_setting("theme") == "dark"


@pytest.mark.integration
def test_chat_settings_panel_saves_per_conversation(qtbot, window) -> None:
    cid = new_chat(qtbot, window, max_tokens=8)
    window.settings_toggle.click()
    assert window.panel.isVisibleTo(window)
    window.panel.preset.setCurrentText("Creative")
    window.panel.system_prompt.setPlainText("Answer in French.")
    window.panel.flush()
    qtbot.waitUntil(lambda: window.engine.store.get_conversation(cid).system_prompt == "Answer in French.")
    sampling = window.engine.store.get_conversation(cid).sampling
    assert sampling["temperature"] == 1.0 and sampling["top_k"] == 100 and sampling["max_tokens"] == 8
    window.panel.temperature.setValue(0.0)
    assert window.panel.preset.currentText() == "Custom"
    window.panel.flush()
    qtbot.waitUntil(lambda: window.engine.store.get_conversation(cid).sampling["temperature"] == 0.0)
    window.panel.context_size.setValue(2048)  # shared by every chat: an app setting
    window.panel.flush()
    qtbot.waitUntil(lambda: window.engine.settings.context_size == 2048)
    assert "context_size" not in window.engine.store.get_conversation(cid).sampling
    type_and_send(qtbot, window, "Bonjour")
    wait_answer(qtbot, window, cid)
    assert window.engine.store.messages(cid)[-1].completion_tokens <= 8


def test_run_app_opens_the_window_with_the_api_beside_it(qtbot, qapp, home, smollm2_path) -> None:
    """`inglenook` with no arguments: the window opens, the API starts, closing ends the app."""
    import socket

    from PySide6.QtCore import QTimer

    from inglenook.app.main import run_app
    from inglenook.app.window import MainWindow
    from inglenook.engine import Engine

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with Engine() as engine:
        engine.update_settings(api_port=port)
    seen: dict[str, object] = {}

    def look_then_close() -> None:
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if not windows:
            QTimer.singleShot(100, look_then_close)
            return
        window = windows[0]
        if window.server.state in ("starting",) or not window.models:
            QTimer.singleShot(100, look_then_close)
            return
        seen["api"] = window.server.state
        seen["default"] = window.default_model
        window.close()

    QTimer.singleShot(100, look_then_close)
    assert run_app([]) == 0
    assert seen["default"] == "smollm2-135m-instruct:q4_1"  # the starter model, on a first run
    assert seen["api"] == "running"


def test_api_port_in_use_is_explained(qtbot, qapp, engine) -> None:
    import socket

    from inglenook.app.window import MainWindow

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        engine.update_settings(api_port=taken.getsockname()[1], api_enabled=True)
        win = MainWindow(engine)
        qtbot.addWidget(win)
        win.show()
        try:
            qtbot.waitUntil(lambda: win.server.state in ("running", "failed"), timeout=60_000)
            assert win.server.state == "failed"
            assert isinstance(win.server.error, PortInUse)
            assert win.banner.title.text() == "The API port is already in use"
            assert app_errors.OPEN_SETTINGS in win.banner.action_ids()
            assert win.status_line.api_status.text() == "API failed to start"
            assert win.status_line.api_toggle.text() == "Start API"
        finally:
            win.shutdown()


@pytest.mark.integration
def test_about_page_shows_the_doctor_report_and_copies_it(qtbot, window) -> None:
    from inglenook.engine.runtime.native import backend_report

    dialog = window.open_settings()
    dialog.show_page("About")
    about = dialog.about_page
    qtbot.waitUntil(lambda: about.report is not None, timeout=30_000)
    text = about.text.toPlainText()
    assert f"variant chosen:     {backend_report().cpu_variant}" in text
    assert "llama.cpp commit:" in text and "Self-test" not in text
    about.copy_button.click()
    assert QApplication.clipboard().text() == text
    about.self_test_button.click()
    qtbot.waitUntil(lambda: "Self-test" in about.text.toPlainText(), timeout=60_000)
    assert about.report.self_test is not None and about.report.self_test.tokens > 0


def test_a_crash_in_the_last_run_is_reported_with_its_log(qtbot, window, tmp_path) -> None:
    from inglenook.engine import LastCrash

    log = tmp_path / "fault-42.log"
    log.write_text("Fatal Python error: Illegal instruction\n")
    window.report_last_crash(LastCrash(42, "app", "0.1.0", 0.0, 0.0, "answering in conversation 7 with smollm2",
                                       log, "Fatal Python error: Illegal instruction"))
    assert window.banner.isVisible()
    assert "stopped unexpectedly" in window.banner.title.text()
    assert "answering in conversation 7" in window.banner.text.text()
    assert "open_crash_log" in window.banner.action_ids()


def test_settings_dialog_picks_a_draft_model_by_family_and_size(qtbot, window) -> None:
    dialog = window.open_settings()
    dialog.show_page("Performance")
    assert not dialog.draft_picker.isEnabled()  # only for the draft-model mode
    record = window.models[0]
    index = dialog.draft_picker.findData(record.id)
    # Each entry says its architecture and size: a draft model is a small one of the family.
    assert dialog.draft_picker.itemText(index) == f"{record.id} ({record.architecture}, 134.5M)"
    dialog.speculative.setCurrentIndex(dialog.speculative.findData("draft"))
    assert dialog.draft_picker.isEnabled()
    dialog.draft_picker.setCurrentIndex(index)
    assert dialog.changes() == {"speculative": "draft", "draft_model": record.id}
    dialog.reject()

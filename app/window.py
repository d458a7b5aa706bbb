"""The main window: conversations on the left, the chat in the middle, its settings on the right.

Everything slow (answers, model loads, SQLite writes, exports, the API server) runs
through ``TaskRunner`` or ``ChatController`` on worker threads; this class only reacts
to their signals on the GUI thread.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import psutil
from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import QCloseEvent, QDesktopServices, QDragEnterEvent, QDropEvent, QGuiApplication, QIcon, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine.atomic import atomic_write_text
from inglenook.engine.core import Engine
from inglenook.engine.crashguard import LastCrash
from inglenook.engine.errors import ModelNotFound
from inglenook.engine.registry import ModelRecord
from inglenook.engine.store import Conversation, Message

from . import errors as actions
from . import export, icons, markdown, theme
from .banner import Banner
from .chat_controller import ChatController
from .chat_settings import ChatSettingsPanel
from .composer import Composer
from .formatting import human_size
from .message_view import ConversationView
from .model_picker import ModelPicker
from .model_state import ModelStateHub
from .models_page import ModelDropFilter, ModelsPage
from .resources import resource_path
from .server_control import ServerController
from .settings_dialog import SettingsDialog
from .sidebar import Sidebar
from .tasks import TaskRunner

log = logging.getLogger(__name__)

UNDO_DELETE_MS = 6000
API_FIELDS = {"api_enabled", "api_port", "api_key", "cors_origins", "allowed_hosts", "api_host", "strict_model_names"}


class MainWindow(QMainWindow):
    def __init__(self, engine: Engine, start_api: bool | None = None) -> None:
        super().__init__()
        self.engine = engine
        self.setWindowTitle("Inglenook")
        icon = resource_path("inglenook.svg")
        if icon is not None:
            self.setWindowIcon(QIcon(str(icon)))
        self.resize(1280, 800)
        self.setMinimumSize(900, 560)

        self.tasks = TaskRunner(self)
        self.hub = ModelStateHub(engine.scheduler, self)
        self.chat = ChatController(engine, self.tasks, self)
        self.server = ServerController(engine, self.tasks, self)

        self.current_id: int | None = None
        self.conversation: Conversation | None = None
        self.models: list[ModelRecord] = []
        self.default_model: str | None = None
        self.draft_model: str | None = None  # the model picked before the first message
        self.errors: dict[int, BaseException] = {}
        self.pending_deletes: dict[int, QTimer] = {}
        self.search_text = ""
        self.settings_dialog: SettingsDialog | None = None
        self.closed = False

        self._build()
        self._connect()
        self._shortcuts()
        self.refresh_models()
        self.refresh_conversations(select_latest=True)
        self.tasks.run(markdown.warm_up)
        if start_api if start_api is not None else engine.settings.api_enabled:
            self.server.start()

    # == construction ===================================================================

    def _build(self) -> None:
        central = QWidget(self)
        row = QHBoxLayout(central)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        self.sidebar = Sidebar(central)
        row.addWidget(self.sidebar)
        self.pages = QStackedWidget(central)
        row.addWidget(self.pages, 1)
        self.setCentralWidget(central)

        self.chat_page = QWidget(self.pages)
        self.chat_page.setObjectName("ChatPage")
        page_row = QHBoxLayout(self.chat_page)
        page_row.setContentsMargins(0, 0, 0, 0)
        page_row.setSpacing(0)
        middle = QVBoxLayout()
        middle.setContentsMargins(0, 0, 0, 0)
        middle.setSpacing(0)

        header = QFrame(self.chat_page)
        header.setObjectName("ChatHeader")
        header.setFixedHeight(58)
        header_row = QHBoxLayout(header)
        header_row.setContentsMargins(20, 8, 14, 8)
        header_row.setSpacing(10)
        self.title_label = QLabel("New chat", header)
        self.title_label.setObjectName("ChatTitle")
        self.picker = ModelPicker(self.hub, header)
        self.picker.setMinimumWidth(240)
        self.settings_toggle = QToolButton(header)
        self.settings_toggle.setObjectName("HeaderButton")
        self.settings_toggle.setText(" Chat settings")
        self.settings_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        icons.set_icon(self.settings_toggle, "sliders", "muted")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        header_row.addWidget(self.title_label, 1)
        header_row.addWidget(self.picker)
        header_row.addWidget(self.settings_toggle)
        middle.addWidget(header)
        self.load_bar = QProgressBar(self.chat_page)
        self.load_bar.setRange(0, 100)
        self.load_bar.setTextVisible(False)
        self.load_bar.setFixedHeight(3)
        self.load_bar.hide()
        middle.addWidget(self.load_bar)

        self.view = ConversationView(self.chat_page)
        middle.addWidget(self.view, 1)
        banner_row = QHBoxLayout()
        banner_row.setContentsMargins(24, 0, 24, 0)
        self.banner = Banner(self.chat_page)
        self.last_crash: LastCrash | None = None
        banner_row.addWidget(self.banner)
        middle.addLayout(banner_row)
        self.composer = Composer(self.chat_page)
        middle.addWidget(self.composer)
        page_row.addLayout(middle, 1)
        self.panel = ChatSettingsPanel(self.chat_page)
        self.panel.hide()
        page_row.addWidget(self.panel)
        self.pages.addWidget(self.chat_page)

        self.models_page = ModelsPage(self.engine, self.tasks, self.pages)
        self.pages.addWidget(self.models_page)

        bar = self.statusBar()
        bar.setSizeGripEnabled(False)
        self.model_status = QLabel("No model loaded", bar)
        self.memory_status = QLabel("", bar)
        self.api_toggle = QToolButton(bar)
        self.api_toggle.setObjectName("MessageAction")
        self.api_toggle.setCheckable(True)
        self.api_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.api_toggle.setToolTip("Start or stop the local API server")
        self.api_status = QLabel("API off", bar)
        bar.addWidget(self.model_status)
        bar.addWidget(self.memory_status)
        bar.addPermanentWidget(self.api_status)
        bar.addPermanentWidget(self.api_toggle)
        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(2000)
        self._memory_timer.timeout.connect(self._update_memory)
        self._memory_timer.start()
        self._update_memory()
        self._show_api_state("stopped", "", None)

    def _connect(self) -> None:
        s = self.sidebar
        s.new_chat_requested.connect(self.new_chat)
        s.conversation_selected.connect(self.open_conversation)
        s.search_changed.connect(self._search)
        s.rename_requested.connect(self.rename_conversation)
        s.delete_requested.connect(self.delete_conversation)
        s.export_requested.connect(self.export_conversation)
        s.undo_requested.connect(self.undo_delete)
        s.page_requested.connect(self.show_page)
        self.composer.send_requested.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.view.regenerate_requested.connect(self.regenerate)
        self.view.edit_submitted.connect(self.edit_and_resend)
        self.view.suggestion_chosen.connect(self.send)
        self.picker.model_chosen.connect(self.choose_model)
        self.picker.manage_requested.connect(lambda: self.show_page("models"))
        self.settings_toggle.toggled.connect(self.panel.setVisible)
        self.panel.changed.connect(self._save_chat_settings)
        self.panel.context_size_changed.connect(lambda tokens: self.apply_settings({"context_size": tokens}))
        self.panel.set_context_size(self.engine.settings.context_size)
        self.banner.action.connect(self._act)
        self.chat.answer_started.connect(self._answer_started)
        self.chat.answer_text.connect(self._answer_text)
        self.chat.answer_finished.connect(self._answer_finished)
        self.chat.answer_failed.connect(self._answer_failed)
        self.hub.changed.connect(self._model_state)
        self.server.state_changed.connect(self._show_api_state)
        self.api_toggle.clicked.connect(self.toggle_api)
        self.models_page.remove_requested.connect(self.remove_model)
        self.models_page.models_changed.connect(self.refresh_models)
        self.models_page.action_requested.connect(self._act)
        self.setAcceptDrops(True)  # .gguf files and folders dropped anywhere are imported
        self._drop_filter = ModelDropFilter(self.dropped_paths, self.import_dropped, self)
        self.composer.input.viewport().installEventFilter(self._drop_filter)  # it would paste the path

    def _shortcuts(self) -> None:
        for keys, slot in (
            ("Ctrl+N", self.new_chat),
            ("Ctrl+F", self.focus_search),
            ("Esc", self.stop),
            ("Ctrl+,", self.open_settings),
            ("Ctrl+Shift+C", self.copy_last_answer),
        ):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(slot)

    # == models =========================================================================

    def refresh_models(self) -> None:
        engine = self.engine

        def load() -> tuple[list[ModelRecord], str | None]:
            try:
                default = engine.default_model_id()
            except ModelNotFound:
                default = None
            return engine.registry.list(), default

        self.tasks.run(load, self._models_loaded, self._show_error)

    def _models_loaded(self, result: tuple[list[ModelRecord], str | None]) -> None:
        self.models, self.default_model = result
        self.picker.set_models(self.models)
        self.picker.set_current(self._model_for(self.conversation))
        self.models_page.set_models(self.models, self.hub.loaded)
        self._check_missing_model()

    def _model_for(self, conversation: Conversation | None) -> str | None:
        if conversation is None:
            return self.draft_model or self.default_model
        return conversation.model_id or self.default_model

    def choose_model(self, model_id: str) -> None:
        if self.current_id is None:
            self.draft_model = model_id
        else:
            cid = self.current_id
            self.tasks.run(lambda: self.engine.store.update_conversation(cid, model_id=model_id),
                           self._conversation_updated, self._show_error)
        try:
            self.engine.scheduler.load(model_id)  # only queues the load; the scheduler thread does it
        except Exception as exc:
            self._show_error(exc)

    def remove_model(self, model_id: str) -> None:
        self.tasks.run(lambda: self.engine.registry.remove(model_id), lambda _: self.refresh_models(), self._show_error)

    def _model_state(self, model_id: str, state: str, detail: object) -> None:
        if state == "loading":
            self.load_bar.show()
            self.load_bar.setValue(int(float(detail or 0) * 100))
            self.model_status.setText(f"Loading {model_id}… {int(float(detail or 0) * 100)}%")
        elif state == "loaded":
            self.load_bar.hide()
            ctx = f" · {detail} ctx" if detail else ""
            self.model_status.setText(f"● {model_id}{ctx}")
        elif state == "unloaded":
            self.model_status.setText("No model loaded")
        elif state == "failed":
            self.load_bar.hide()
            self.model_status.setText(f"{model_id} failed to load")
        if state in ("loaded", "unloaded"):
            self.models_page.set_models(self.models, self.hub.loaded)

    def _update_memory(self) -> None:
        try:
            rss = psutil.Process().memory_info().rss
            available = psutil.virtual_memory().available
        except psutil.Error:
            return
        self.memory_status.setText(f"Memory {human_size(rss)} in use  ·  {human_size(available)} free")

    # == conversations ==================================================================

    def refresh_conversations(self, select_latest: bool = False) -> None:
        store, search = self.engine.store, self.search_text
        hidden = set(self.pending_deletes)

        def load() -> list[Conversation]:
            return [c for c in store.list_conversations(search=search or None) if c.id not in hidden]

        def shown(conversations: list[Conversation]) -> None:
            conversations = [c for c in conversations if c.id not in self.pending_deletes]
            self.sidebar.set_conversations(conversations, self.current_id, set(self.chat.streams))
            for conversation in conversations:
                if conversation.id == self.current_id and self.conversation is not None:
                    self.conversation = conversation  # a fresher copy (the first message names the chat)
                    self.title_label.setText(conversation.title or "New chat")
            if select_latest and self.current_id is None and conversations:
                self.open_conversation(conversations[0].id)

        self.tasks.run(load, shown, self._show_error)

    def _search(self, text: str) -> None:
        self.search_text = text
        self.refresh_conversations()

    def focus_search(self) -> None:
        self.show_page("chat")
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def new_chat(self) -> None:
        self.show_page("chat")
        self.panel.flush()
        self.current_id = None
        self.conversation = None
        self.draft_model = self.picker.current
        self.title_label.setText("New chat")
        self.view.clear()
        self.banner.hide()
        self.sidebar.select(None)
        self.composer.set_streaming(False)
        self.panel.load(0, None, {})
        self.panel.conversation_id = None
        self.picker.set_current(self._model_for(None))
        self.composer.input.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id == self.current_id and self.conversation is not None:
            return
        self.panel.flush()
        self.show_page("chat")
        self.current_id = conversation_id
        store = self.engine.store
        self.tasks.run(
            lambda: (store.get_conversation(conversation_id), store.messages(conversation_id)),
            lambda result: self._conversation_loaded(*result),
            self._show_error,
        )

    def _conversation_loaded(self, conversation: Conversation, messages: list[Message]) -> None:
        if conversation.id != self.current_id:
            return  # the user moved on while it loaded
        self.conversation = conversation
        self.title_label.setText(conversation.title or "New chat")
        self.view.set_messages(messages)
        streaming = self.chat.is_streaming(conversation.id)
        if streaming:
            self.view.begin_answer(self._model_for(conversation) or "")
            self.view.update_answer(self.chat.text_of(conversation.id))
        self.composer.set_streaming(streaming)
        self.panel.load(conversation.id, conversation.system_prompt, conversation.sampling)
        self.picker.set_current(self._model_for(conversation))
        self.sidebar.select(conversation.id)
        self.banner.hide()
        error = self.errors.get(conversation.id)
        if error is not None:
            self.banner.show_explanation(actions.explain(error))
        self._check_missing_model()

    def _check_missing_model(self) -> None:
        conversation = self.conversation
        if conversation is None or not conversation.model_id or not self.models:
            return
        if all(m.id != conversation.model_id for m in self.models):
            self.banner.show_explanation(
                actions.explain(ModelNotFound(f"{conversation.model_id} is not installed"))
            )

    def _conversation_updated(self, conversation: Conversation) -> None:
        if conversation.id == self.current_id:
            self.conversation = conversation
            self.title_label.setText(conversation.title or "New chat")
            self.picker.set_current(self._model_for(conversation))
        self.refresh_conversations()

    def rename_conversation(self, conversation_id: int, title: str) -> None:
        store = self.engine.store
        self.tasks.run(lambda: store.update_conversation(conversation_id, title=title),
                       self._conversation_updated, self._show_error)

    def delete_conversation(self, conversation_id: int) -> None:
        """Hide the chat now; delete it for good unless Undo is pressed within a few seconds."""
        self.chat.stop(conversation_id)
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.timeout.connect(lambda: self._commit_delete(conversation_id))
        self.pending_deletes[conversation_id] = timer
        timer.start(UNDO_DELETE_MS)
        self.sidebar.show_toast("Chat deleted")
        if conversation_id == self.current_id:
            self.new_chat()
        self.refresh_conversations()

    def undo_delete(self) -> None:
        if not self.pending_deletes:
            return
        conversation_id = list(self.pending_deletes)[-1]
        self.pending_deletes.pop(conversation_id).stop()
        if not self.pending_deletes:
            self.sidebar.hide_toast()
        self.refresh_conversations()

    def _commit_delete(self, conversation_id: int, now: bool = False) -> None:
        timer = self.pending_deletes.pop(conversation_id, None)
        if timer is not None:
            timer.stop()
        if not self.pending_deletes:
            self.sidebar.hide_toast()
        # Through the chat service, so the conversation's saved prompt states go too.
        chats = self.engine.chats
        if now:
            chats.delete_conversation(conversation_id)
        else:
            self.tasks.run(lambda: chats.delete_conversation(conversation_id), None, self._show_error)

    def commit_pending_deletes(self) -> None:
        for conversation_id in list(self.pending_deletes):
            self._commit_delete(conversation_id, now=True)

    def export_conversation(self, conversation_id: int, kind: str, path: str | None = None) -> None:
        suffix = ".md" if kind == "markdown" else ".json"
        if path is None:
            path, _ = QFileDialog.getSaveFileName(
                self, "Export conversation", str(Path.home() / f"conversation-{conversation_id}{suffix}"),
                "Markdown (*.md)" if kind == "markdown" else "JSON (*.json)",
            )
            if not path:
                return
        store = self.engine.store

        def write() -> str:
            conversation = store.get_conversation(conversation_id)
            messages = store.messages(conversation_id)
            body = export.to_markdown(conversation, messages) if kind == "markdown" else export.to_json(conversation, messages)
            atomic_write_text(Path(path), body)
            return path

        self.tasks.run(write, lambda p: self.statusBar().showMessage(f"Exported to {p}", 5000), self._show_error)

    # == chat ===========================================================================

    def send(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if self.current_id is not None and self.chat.is_streaming(self.current_id):
            return
        self.banner.hide()
        self.panel.flush()
        if self.current_id is None or self.conversation is None:
            self._create_then_send(text)
            return
        cid = self.current_id
        self.view.add_pending_user(text)
        self.view.begin_answer(self._model_for(self.conversation) or "")
        self.composer.set_streaming(True)
        self.chat.send(cid, text)
        self.sidebar.set_streaming(set(self.chat.streams))

    def _create_then_send(self, text: str) -> None:
        chats = self.engine.chats
        model = self.picker.current if self.picker.current != self.default_model else None
        prompt = self.panel.system_prompt.toPlainText().strip() or None
        sampling = self.panel.sampling()
        self.view.add_pending_user(text)
        self.view.begin_answer(self.picker.current or "")
        self.composer.set_streaming(True)

        def created(conversation: Conversation) -> None:
            self.current_id = conversation.id
            self.conversation = conversation
            self.panel.load(conversation.id, conversation.system_prompt, conversation.sampling)
            self.chat.send(conversation.id, text)
            self.refresh_conversations()

        def failed(exc: BaseException) -> None:
            self.view.clear()
            self.composer.set_streaming(False)
            self.composer.set_text(text)
            self._show_error(exc)

        self.tasks.run(lambda: chats.new_conversation(model_id=model, system_prompt=prompt, sampling=sampling),
                       created, failed)

    def regenerate(self) -> None:
        cid = self.current_id
        if cid is None or self.chat.is_streaming(cid):
            return
        while self.view.widgets and self.view.widgets[-1].role == "assistant":
            self.view.remove_from(len(self.view.widgets) - 1)
        if not self.view.widgets:
            return
        self.banner.hide()
        self.panel.flush()
        self.view.begin_answer(self._model_for(self.conversation) or "")
        self.composer.set_streaming(True)
        self.chat.regenerate(cid)
        self.sidebar.set_streaming(set(self.chat.streams))

    def edit_and_resend(self, message_id: int, text: str) -> None:
        cid = self.current_id
        if cid is None or self.chat.is_streaming(cid):
            return
        index = self.view.index_of_message(message_id)
        if index is None:
            return
        self.banner.hide()
        self.panel.flush()
        self.view.remove_from(index)
        self.view.add_pending_user(text)
        self.view.begin_answer(self._model_for(self.conversation) or "")
        self.composer.set_streaming(True)
        self.chat.edit_and_resend(cid, message_id, text)

    def stop(self) -> None:
        if self.current_id is not None:
            self.chat.stop(self.current_id)

    def copy_last_answer(self) -> None:
        text = self.view.last_answer_text()
        if text:
            QGuiApplication.clipboard().setText(text)
            self.statusBar().showMessage("Copied the last answer", 2000)

    def _answer_started(self, conversation_id: int, messages: list[Message]) -> None:
        if conversation_id == self.current_id:
            self.view.sync_saved(messages)
        self.refresh_conversations()

    def _answer_text(self, conversation_id: int, text: str) -> None:
        if conversation_id == self.current_id:
            self.view.update_answer(text)

    def _answer_finished(self, conversation_id: int, message: Message | None) -> None:
        self.errors.pop(conversation_id, None)
        if conversation_id == self.current_id:
            self.view.finish_answer(message)
            self.composer.set_streaming(False)
        self.sidebar.set_streaming(set(self.chat.streams))
        self.refresh_conversations()

    def _answer_failed(self, conversation_id: int, exc: BaseException) -> None:
        self.errors[conversation_id] = exc
        self.sidebar.set_streaming(set(self.chat.streams))
        if conversation_id == self.current_id:
            self.composer.set_streaming(False)
            # Reload: the user's message was saved, and any partial answer too.
            self.conversation = None
            self.open_conversation(conversation_id)
        self.refresh_conversations()

    def _save_chat_settings(self, conversation_id: int, system_prompt: str | None, sampling: dict[str, Any]) -> None:
        store = self.engine.store
        self.tasks.run(
            lambda: store.update_conversation(conversation_id, system_prompt=system_prompt, sampling=sampling),
            self._conversation_updated, self._show_error,
        )

    # == errors =========================================================================

    def _show_error(self, exc: BaseException) -> None:
        log.info("showing error: %s", exc)
        self.banner.show_explanation(actions.explain(exc))

    def _act(self, action: str) -> None:
        cid = self.current_id
        if action == actions.NEW_CHAT:
            self.new_chat()
        elif action == actions.TRIM_OLDEST and cid is not None:
            self.trim_oldest(cid)
        elif action == actions.RETRY and cid is not None:
            self.regenerate()
        elif action == actions.USE_DEFAULT_MODEL and cid is not None:
            store = self.engine.store
            self.tasks.run(lambda: store.update_conversation(cid, model_id=None), self._conversation_updated, self._show_error)
        elif action == actions.OPEN_MODELS:
            self.show_page("models")
        elif action == actions.OPEN_SETTINGS:
            self.open_settings("API server" if self.server.state == "failed" else "General")
        elif action == actions.OPEN_CRASH_LOG and self.last_crash is not None and self.last_crash.fault_log:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.last_crash.fault_log)))
        if cid is not None:
            self.errors.pop(cid, None)

    def trim_oldest(self, conversation_id: int) -> None:
        """Drop the oldest third of the messages (at least one exchange) and answer again."""
        store = self.engine.store

        def trim() -> list[Message]:
            messages = store.messages(conversation_id)
            count = max(2, len(messages) // 3)
            count = min(count, max(0, len(messages) - 1))  # keep the last question
            store.delete_oldest_messages(conversation_id, count)
            return store.messages(conversation_id)

        def trimmed(messages: list[Message]) -> None:
            if conversation_id != self.current_id:
                return
            self.view.set_messages(messages)
            if messages and messages[-1].role == "user":
                self.view.begin_answer(self._model_for(self.conversation) or "")
                self.composer.set_streaming(True)
                self.chat.regenerate(conversation_id)

        self.tasks.run(trim, trimmed, self._show_error)

    # == pages, settings, API ===========================================================

    def show_page(self, key: str) -> None:
        if key == "settings":
            self.open_settings()
            return
        self.pages.setCurrentWidget(self.models_page if key == "models" else self.chat_page)
        self.sidebar.set_page(key)
        if key == "models":
            self.models_page.set_models(self.models, self.hub.loaded)

    def open_settings(self, page: str = "General") -> SettingsDialog:
        if self.settings_dialog is not None and self.settings_dialog.isVisible():
            self.settings_dialog.raise_()
            return self.settings_dialog
        dialog = SettingsDialog(self.engine, self.tasks, self.models, (self.server.state, self.server.url), self)
        dialog.saved.connect(self.apply_settings)
        dialog.show_page(page)
        self.settings_dialog = dialog
        dialog.open()
        return dialog

    def apply_settings(self, changes: dict[str, Any]) -> None:
        if not changes:
            return
        engine = self.engine

        def save() -> dict[str, Any]:
            engine.update_settings(**changes)
            if "models_dirs" in changes:
                engine.registry.extra_dirs = [Path(d) for d in engine.settings.models_dirs]
                engine.registry.refresh()
            return changes

        def saved(applied: dict[str, Any]) -> None:
            self.panel.set_context_size(engine.settings.context_size)
            if "theme" in applied:
                self.apply_theme()
            if "models_dirs" in applied or "default_model" in applied:
                self.refresh_models()
            if applied.keys() & API_FIELDS:
                if engine.settings.api_enabled:
                    self.server.restart()
                else:
                    self.server.stop()

        self.tasks.run(save, saved, self._show_error)

    def apply_theme(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            theme.apply_theme(app, self.engine.settings.theme)
        self.view.refresh_theme()
        icons.refresh(self)
        self.sidebar.list.viewport().update()

    def toggle_api(self) -> None:
        if self.server.state in ("running", "starting"):
            self.server.stop()
        else:
            self.server.start()

    def _show_api_state(self, state: str, url: str, error: object) -> None:
        texts = {
            "running": f"API ● {url}",
            "starting": "API starting…",
            "stopped": "API off",
            "failed": "API failed to start",
            "unavailable": "API not available in this build",
        }
        self.api_status.setText(texts.get(state, state))
        self.api_toggle.setChecked(state in ("running", "starting"))
        self.api_toggle.setText("Stop API" if state in ("running", "starting") else "Start API")
        self.api_toggle.setEnabled(state != "unavailable")
        if state == "failed" and isinstance(error, BaseException):
            self.banner.show_explanation(actions.explain(error))

    # == shutdown =======================================================================

    def report_last_crash(self, crash: LastCrash) -> None:
        """Say, once, that the previous run ended in a crash, and offer its report."""
        self.last_crash = crash
        self.banner.show_explanation(actions.explain_crash(crash))

    def shutdown(self) -> None:
        """Stop answers and the server, and make pending changes durable. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._memory_timer.stop()
        self.panel.flush()
        self.chat.stop_all()
        self.models_page.shutdown()  # cancelled downloads keep their partial files, to resume
        self.commit_pending_deletes()
        self.tasks.wait(15_000)
        self.server.shutdown()
        self.hub.close()

    # == drag and drop =================================================================

    @staticmethod
    def dropped_paths(event: QDragEnterEvent | QDropEvent) -> list[Path]:
        """Local files and folders in a drag; only those import can use (GGUF files, folders)."""
        mime = event.mimeData()
        if not mime.hasUrls():
            return []
        paths = [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
        return [p for p in paths if p.is_dir() or p.suffix.lower() == ".gguf"]

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802
        if self.dropped_paths(event):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        paths = self.dropped_paths(event)
        if not paths:
            super().dropEvent(event)
            return
        event.acceptProposedAction()
        self.import_dropped(paths)

    def import_dropped(self, paths: list[Path]) -> None:
        self.show_page("models")
        self.models_page.import_paths(paths)  # registered on a worker; the picker refreshes after

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.shutdown()
        super().closeEvent(event)

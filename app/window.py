"""The main window: conversations on the left, the chat in the middle, its settings on the right.

The window only shows and wires. Each job belongs to a controller:

- ``ConversationList`` (conversations.py): the sidebar's list, search, rename, delete/undo, export;
- ``ActiveChat`` (active_chat.py): the conversation on screen, sending, answers, its model and settings;
- ``ChatController`` (chat_controller.py): answers streaming, read on the GUI thread as the jobs wake it;
- ``ModelList`` (model_list.py) and ``ModelStateHub`` (model_state.py): installed models, load state;
- ``ServerController`` (server_control.py): the API server; ``StatusLine`` (status_line.py) shows it;
- ``SettingsSaver`` (app_settings.py): saving settings;
- ``Dictation``, ``ReadAloud``, ``VoiceMode``, ``SpokenRecordings`` (voice_*.py): the microphone
  in the composer, answers read aloud, hands-free voice mode, kept recordings.

Everything slow runs on ``Workers``' lanes; controllers react to results on the GUI thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, Qt, QUrl
from PySide6.QtGui import QCloseEvent, QDesktopServices, QDragEnterEvent, QDropEvent, QIcon, QKeySequence, QShortcut
from PySide6.QtWidgets import QApplication, QHBoxLayout, QMainWindow, QStackedWidget, QWidget

from inglenook.engine import Conversation, EncoderOffer, Engine, LastCrash, ModelRecord, Settings

from inglenook.app.services import errors as actions
from inglenook.app.widgets import icons
from inglenook.app.text import markdown
from inglenook.app.widgets import shortcuts
from inglenook.app.widgets import theme
from inglenook.app.controllers.active_chat import ActiveChat
from inglenook.app.controllers.message_history import MessageHistory
from inglenook.app.services.app_settings import API_FIELDS, SettingsSaver
from inglenook.app.controllers.next_message import NextMessage
from inglenook.app.pages.chat.tools_box import ChatToolsBox
from inglenook.app.controllers.answers import ChatController
from inglenook.app.pages.chat.page import ChatPage
from inglenook.app.controllers.conversations import ConversationList
from inglenook.app.widgets.help_menu import AppMenus
from inglenook.app.controllers.model_list import ModelList
from inglenook.app.services.model_state import ModelStateHub
from inglenook.app.pages.models.installed import ModelDropFilter
from inglenook.app.pages.models.page import ModelsPage
from inglenook.app.services.resources import resource_path
from inglenook.app.services.server_control import ServerController
from inglenook.app.pages.settings.dialog import SettingsDialog
from inglenook.app.pages.sidebar.panel import Sidebar
from inglenook.app.widgets.status_line import StatusLine
from inglenook.app.pages.usage.page import UsagePage
from inglenook.app.services.operations import Operations
from inglenook.app.services.workers import Workers
from inglenook.app.controllers.voice_input import Dictation
from inglenook.app.controllers.voice_mode import VoiceMode
from inglenook.app.controllers.voice_output import ReadAloud
from inglenook.app.controllers.voice_recordings import SpokenRecordings

log = logging.getLogger(__name__)

SHUTDOWN_WAIT_MS = 15_000
FIRST_SIZE = (1280, 800)
MIN_SIZE = (800, 560)


class MainWindow(QMainWindow):
    def __init__(self, engine: Engine, start_api: bool | None = None) -> None:
        super().__init__()
        self.engine = engine
        engine.name_client("window")  # usage counts this window's answers as the window's
        self.setWindowTitle("Inglenook")
        icon = resource_path("inglenook.svg")
        if icon is not None:
            self.setWindowIcon(QIcon(str(icon)))
        self._place(engine.settings.window_geometry)
        self.settings_dialog: SettingsDialog | None = None
        self.last_crash: LastCrash | None = None
        self.closed = False

        self.workers = Workers(self)
        # Background work for the pages: results on the GUI thread, failures nobody handles to the banner.
        self.operations = Operations(self.workers, self)
        self.hub = ModelStateHub(engine, self)
        self.chat = ChatController(engine, self.workers.answers, self)
        self.server = ServerController(engine, self.workers.server, self)
        self.model_list = ModelList(engine, self.workers, self)
        self.saver = SettingsSaver(engine, self.workers, self)
        self._build()
        self.conversations = ConversationList(engine, self.workers, self.sidebar, self.chat, self)
        # The chat's tool switches, in its settings panel (Settings → Tools holds the servers).
        tools_box = ChatToolsBox(engine.chats, self.operations, self.chat_page.panel)
        self.active = ActiveChat(engine, self.workers, self.chat_page, self.chat, self.model_list, self.operations,
                                 tools_box, self)
        self.history = MessageHistory(self.active, self.chat_page, self)
        # What the next message carries: the box's text, the chat's documents, the waiting images.
        self.next_message = NextMessage(engine, self.workers, self.chat_page, self.active, self.model_list, self)
        self.attachments, self.images = self.next_message.documents, self.next_message.images
        self.images.models_wanted.connect(lambda: self.show_page("models"))
        self._voice()
        self._connect()
        self._shortcuts()
        # A title written in the background (engine/chat/background.py) shows in the sidebar.
        titled = self.workers.disk.relay(lambda _titled: self.conversations.refresh())
        engine.add_title_listener(lambda conversation_id, title: titled((conversation_id, title)))
        # Closing may mean "hide in the tray" (main.py sets this when a tray exists).
        self.close_guard: Callable[[], bool] | None = None
        self.menus = AppMenus(self, settings=lambda: engine.settings, save=self.saver.apply,
                              folders={"logs": engine.paths.logs, "data": engine.paths.data},
                              new_chat=self.new_chat, open_settings=self.open_settings, quit_app=self.quit_app,
                              notice=lambda text: self.statusBar().showMessage(text, 8000),
                              more=((shortcuts.SEARCH, self.focus_search),
                                    (shortcuts.TOGGLE_SIDEBAR, self.sidebar.toggle_collapsed),
                                    (shortcuts.COPY_ANSWER, self.copy_last_answer)))

        self.model_list.refresh()
        self.conversations.refresh(open_latest=True)
        self.workers.disk.run(markdown.warm_up)
        if start_api if start_api is not None else engine.settings.api_enabled:
            self.server.start()

    # == construction ===================================================================

    def _place(self, saved: str) -> None:
        """Where it was when it last closed; the first time, 1280×800 — within the screen."""
        area = self.screen().availableGeometry()
        # 800×560 is half of a 1600 px screen, and every page fits it (tests/gui/test_layout.py);
        # a smaller screen gets a smaller least size rather than a window past its edges.
        self.setMinimumSize(min(MIN_SIZE[0], area.width()), min(MIN_SIZE[1], area.height()))
        if saved and self.restoreGeometry(QByteArray.fromBase64(saved.encode("ascii"))):
            return  # Qt moves a window saved on a screen that is gone onto one that is here
        self.resize(min(FIRST_SIZE[0], area.width()), min(FIRST_SIZE[1], area.height()))

    def geometry_to_keep(self) -> str:
        return bytes(self.saveGeometry().toBase64().data()).decode("ascii")

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
        self.chat_page = ChatPage(self.hub, self.pages)
        self.pages.addWidget(self.chat_page)
        self.models_page = ModelsPage(self.engine, self.operations, self.pages)
        self.pages.addWidget(self.models_page)
        self.usage_page = UsagePage(self.engine, self.operations, self.pages)
        self.pages.addWidget(self.usage_page)
        self.status_line = StatusLine(self.statusBar(), self.chat_page.load_bar, self.server)
        # The chat page's parts, by the names tests and scripts use.
        page = self.chat_page
        self.view, self.composer, self.banner, self.panel = page.view, page.composer, page.banner, page.panel
        self.operations.failed.connect(self.banner.show_explanation)  # work nobody else answers for
        self.picker, self.title_label, self.settings_toggle = page.picker, page.title_label, page.settings_toggle
        self.model_status = self.status_line.model_status

    def _connect(self) -> None:
        s, active, conversations = self.sidebar, self.active, self.conversations
        s.new_chat_requested.connect(self.new_chat)
        s.conversation_selected.connect(self.open_conversation)
        s.page_requested.connect(self.show_page)
        conversations.listed.connect(active.listed)
        conversations.latest.connect(self.open_conversation)
        conversations.hidden.connect(self._hidden)
        conversations.renamed.connect(active.conversation_updated)
        conversations.notice.connect(lambda text: self.statusBar().showMessage(text, 5000))
        active.current_changed.connect(conversations.set_current)
        active.conversation_changed.connect(conversations.refresh)
        for failed in (conversations.failed, self.model_list.failed, self.saver.failed):
            failed.connect(active.show_error)
        self.picker.manage_requested.connect(lambda: self.show_page("models"))
        self.panel.context_size_changed.connect(lambda tokens: self.saver.apply({"context_size": tokens}))
        self.panel.set_context_size(self.engine.settings.context_size)
        self.banner.action.connect(self._act)
        self.hub.changed.connect(self._model_state)
        self.model_list.changed.connect(self._show_models)
        # The chat settings' adapter picker follows imports as the model list does.
        self.model_list.changed.connect(lambda: self.workers.disk.run(self.engine.adapters.list, self.panel.set_adapters))
        self.server.state_changed.connect(self._api_state)
        self.saver.saved.connect(self._settings_saved)
        self.models_page.remove_requested.connect(self.model_list.remove)
        self.models_page.models_changed.connect(self.model_list.refresh)
        self.models_page.action_requested.connect(self._act)
        # The embedding model offered beside searched documents downloads as any other, on the Models page.
        self.attachments.encoder_download_requested.connect(self._download_encoder)
        self.models_page.downloads.changed.connect(self._encoder_download_state)
        self.model_list.changed.connect(self.attachments.models_changed)
        self.setAcceptDrops(True)  # .gguf files and folders dropped anywhere are imported
        self._drop_filter = ModelDropFilter(self.dropped_paths, self.import_dropped, self)
        self.composer.input.viewport().installEventFilter(self._drop_filter)  # it would paste the path
        self.attachments.accept_drops_on(self.composer.input.viewport())  # other files: documents

    def _voice(self) -> None:
        """Dictation, Read aloud and hands-free voice mode (issue 42), wired to the chat."""
        engine, page = self.engine, self.chat_page

        def settings() -> Settings:
            return engine.settings

        self.read_aloud = ReadAloud(engine, self.operations, self.chat, settings, lambda: self.active.current_id, self)
        self.dictation = Dictation(engine, self.operations, page, settings, self)
        self.voice_mode = VoiceMode(engine, self.operations, page, self.chat, self.read_aloud, settings, self)
        self.voice_mode.send.connect(self._voice_send)
        self.voice_mode.stop_answer.connect(self.active.stop)
        self.voice_mode.state_changed.connect(self._voice_mode_state)
        page.read_aloud_requested.connect(self.read_aloud.read)
        page.read_aloud_stopped.connect(self.read_aloud.stop)
        self.read_aloud.ended.connect(page.reading_ended)
        self.read_aloud.problem.connect(page.show_voice_problem)
        # Recordings of spoken messages, where the person keeps them; those of deleted chats go.
        self.recordings = SpokenRecordings(engine, self.operations, self.chat, settings, self)
        self.dictation.spoken.connect(self.recordings.offer)
        self.voice_mode.heard.connect(self.recordings.offer)
        self.recordings.sweep()
        # A deleted chat's kept recordings go with it, once its Undo has expired.
        self.conversations.deleted.connect(lambda _conversation_id: self.recordings.sweep())

    def _voice_send(self, text: str) -> None:
        """Voice mode's utterance, sent as typed text is; kept in the box when it cannot go now."""
        if not self.active.can_send(text):
            self.chat_page.set_message_text(text)
            self.voice_mode.not_sent("An answer is still being written: what you said is in the message box.")
            return
        self.next_message.send(text)

    def _voice_mode_state(self, state: str) -> None:
        if state != "off":
            self.dictation.stop(hear_it=False)  # voice mode takes the microphone

    def _download_encoder(self, offer: EncoderOffer) -> None:
        self.models_page.download(offer.repo, offer.option, offer.commit)
        self._encoder_download_state()

    def _encoder_download_state(self) -> None:
        offer = self.attachments.offer
        running = offer is not None and self.models_page.downloads.is_running(offer.repo, offer.option.name)
        self.attachments.set_encoder_downloading(running)

    def _shortcuts(self) -> None:
        for keys, slot in (
            (shortcuts.NEW_CHAT, self.new_chat),
            (shortcuts.SEARCH, self.focus_search),
            (shortcuts.ESCAPE, self.escape),
            (shortcuts.SETTINGS, self.open_settings),
            (shortcuts.COPY_ANSWER, self.copy_last_answer),
            (shortcuts.TOGGLE_SIDEBAR, self.sidebar.toggle_collapsed),
            (shortcuts.DICTATE, self.dictation.toggle),
            (shortcuts.VOICE_MODE, self.voice_mode.enter),
        ):
            shortcut = QShortcut(QKeySequence(keys.keys), self)
            shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
            shortcut.activated.connect(slot)

    # == what the controllers know, by the names the rest of the app uses ===============

    @property
    def models(self) -> list[ModelRecord]:
        return self.model_list.models

    @property
    def default_model(self) -> str | None:
        return self.model_list.default_model

    @property
    def conversation(self) -> Conversation | None:
        return self.active.conversation

    @property
    def current_id(self) -> int | None:
        return self.active.current_id

    # == reacting =======================================================================

    def new_chat(self) -> None:
        self.sidebar.clear_search()  # leaving search: a new chat must not hide behind "NO MATCHES"
        self.show_page("chat")
        self.active.new_chat()

    def open_conversation(self, conversation_id: int) -> None:
        self.show_page("chat")
        self.active.open(conversation_id)

    def send(self, text: str) -> None:
        """Send ``text`` in the open chat, as the composer does (scripts and benchmarks)."""
        self.active.send(text)

    def _hidden(self, conversation_id: int) -> None:
        """A deleted chat (Undo may still bring it back) leaves the screen for a new one."""
        if conversation_id == self.active.current_id:
            self.new_chat()

    def focus_search(self) -> None:
        self.show_page("chat")
        self.sidebar.search.setFocus()
        self.sidebar.search.selectAll()

    def escape(self) -> None:
        """Esc: clears the search while typing in it, closes the floating chat settings, else
        stops the answer (Esc is Stop everywhere else)."""
        if self.sidebar.search.hasFocus():
            self.sidebar.clear_search()
            return
        if self.chat_page.close_overlay():
            return
        if self.voice_mode.active:
            self.voice_mode.leave()  # the answer, if one streams, goes on in text: Esc again stops it
            return
        self.active.stop()

    def copy_last_answer(self) -> None:
        if self.active.copy_last_answer():
            self.statusBar().showMessage("Copied the last answer", 2000)

    def _show_models(self) -> None:
        self.models_page.set_models(self.models, self.hub.loaded, self.model_list.plans, self.model_list.base_models)

    def _model_state(self, model_id: str, state: str, detail: object) -> None:
        self.status_line.show_model_state(model_id, state, detail)
        if state in ("loaded", "unloaded"):
            self._show_models()

    def _api_state(self, state: str, _url: str, error: object) -> None:
        if state == "failed" and isinstance(error, BaseException):
            self.active.show_error(error)

    def _act(self, action: str) -> None:
        """A banner's button: each action goes to the controller that owns it."""
        active = self.active
        if action == actions.NEW_CHAT:
            self.new_chat()
        elif action == actions.TRIM_OLDEST:
            active.trim_oldest()
        elif action == actions.RETRY:
            active.regenerate()
        elif action == actions.USE_DEFAULT_MODEL:
            active.use_default_model()
        elif action == actions.OPEN_MODELS:
            self.show_page("models")
        elif action == actions.OPEN_SETTINGS:
            self.open_settings("API server" if self.server.state == "failed" else "General")
        elif action == actions.OPEN_CRASH_LOG and self.last_crash is not None and self.last_crash.fault_log:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.last_crash.fault_log)))
        active.clear_error()

    # == pages, settings, theme =========================================================

    def show_page(self, key: str) -> None:
        if key == "settings":
            self.open_settings()
            return
        pages = {"models": self.models_page, "usage": self.usage_page}
        if key in pages:
            self.sidebar.clear_search()  # leaving the chats leaves their search too
        self.pages.setCurrentWidget(pages.get(key, self.chat_page))
        self.sidebar.set_page(key)
        if key == "models":
            self._show_models()

    def open_settings(self, page: str = "General") -> SettingsDialog:
        if self.settings_dialog is not None and self.settings_dialog.isVisible():
            self.settings_dialog.raise_()
            return self.settings_dialog
        dialog = SettingsDialog(self.engine, self.operations, self.models, (self.server.state, self.server.url), self,
                                api_streams=lambda: self.server.server.active_streams_by_key() if self.server.server else {})
        dialog.saved.connect(self.saver.apply)
        dialog.show_page(page)
        self.settings_dialog = dialog
        dialog.open()
        return dialog

    def _settings_saved(self, applied: dict[str, Any]) -> None:
        settings = self.engine.settings
        self.menus.refresh(applied)
        self.panel.set_context_size(settings.context_size)
        if "theme" in applied:
            self.apply_theme()
        if "models_dirs" in applied or "default_model" in applied:
            self.model_list.refresh()
        if applied.keys() & API_FIELDS:
            if settings.api_enabled:
                self.server.restart()
            else:
                self.server.stop()

    def apply_theme(self) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            theme.apply_theme(app, self.engine.settings.theme)
        self.view.refresh_theme()
        icons.refresh(self)
        self.sidebar.list.viewport().update()

    # == crash reports and shutdown =====================================================

    def report_last_crash(self, crash: LastCrash) -> None:
        """Say, once, that the previous run ended in a crash, and offer its report."""
        self.last_crash = crash
        self.banner.show_explanation(actions.explain_crash(crash))

    def shutdown(self) -> None:
        """Stop answers and the server, and make pending changes durable. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.status_line.stop()
        self.panel.flush()
        geometry = self.geometry_to_keep()
        if geometry != self.engine.settings.window_geometry:
            self.saver.apply({"window_geometry": geometry})  # on the disk lane, waited for below
        self.voice_mode.leave()
        self.dictation.stop(hear_it=False)
        self.read_aloud.stop()
        self.chat.stop_all()
        self.models_page.shutdown()  # cancelled downloads keep their partial files, to resume
        self.conversations.commit_pending_deletes()
        self.recordings.sweep()  # queued after the deletes: their recordings go with them
        self.workers.wait(SHUTDOWN_WAIT_MS)
        self.server.shutdown()
        self.hub.close()
        self.workers.close()

    def quit_app(self) -> None:
        """Quit for real (the menu, the tray): no hiding in the tray."""
        self.close_guard = None
        self.close()
        app = QApplication.instance()
        if app is not None:
            app.quit()  # a window hidden in the tray is not closed by close(); nothing else quits

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        if self.close_guard is not None and self.close_guard():
            event.ignore()
            return
        self.shutdown()
        super().closeEvent(event)

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

"""The sidebar's conversations: listing and search, rename, delete with undo, export.

Reads and writes go through the engine's ``ChatService`` on the disk lane; the sidebar
widget only shows what this controller hands it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from inglenook.engine import Conversation, ConversationSearch, atomic_write_bytes, atomic_write_text

from inglenook.app.services.app_engine import AppEngine
from inglenook.app.text import export
from inglenook.app.controllers.answers import ChatController
from inglenook.app.pages.sidebar.panel import Sidebar
from inglenook.app.services.workers import Workers

log = logging.getLogger(__name__)

UNDO_DELETE_MS = 6000
INDEXING_RECHECK_MS = 1500


class ConversationList(QObject):
    listed = Signal(object)  # list[Conversation] now in the sidebar
    latest = Signal(int)  # the newest conversation, when asked to open it and none is open
    hidden = Signal(int)  # a conversation was deleted (it can still be brought back with Undo)
    deleted = Signal(int)  # its Undo expired: the conversation is gone from the store
    renamed = Signal(object)  # the renamed Conversation
    notice = Signal(str)  # a line for the status bar
    failed = Signal(object)  # an exception, for the banner

    def __init__(self, engine: AppEngine, workers: Workers, sidebar: Sidebar, chat: ChatController,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.workers = workers
        self.sidebar = sidebar
        self.chat = chat
        self.current_id: int | None = None  # the open conversation, set by ``ActiveChat``
        self.search_text = ""
        self.pending_deletes: dict[int, QTimer] = {}
        # While search by meaning is still indexing, the results are read again now and then.
        self._reindex_timer = QTimer(self)
        self._reindex_timer.setSingleShot(True)
        self._reindex_timer.setInterval(INDEXING_RECHECK_MS)
        self._reindex_timer.timeout.connect(lambda: self.refresh() if self.search_text else None)
        sidebar.search_changed.connect(self.search)
        sidebar.rename_requested.connect(self.rename)
        sidebar.delete_requested.connect(self.delete)
        sidebar.export_requested.connect(self.export)
        sidebar.undo_requested.connect(self.undo_delete)
        chat.streams_changed.connect(lambda: sidebar.set_streaming(set(chat.streams)))
        chat.approvals.waiting_changed.connect(sidebar.set_needs_approval)  # the "needs approval" badges
        # A new answer moves its chat to the top; the first message also names it.
        chat.answer_started.connect(lambda *_: self.refresh())
        chat.answer_finished.connect(lambda *_: self.refresh())
        chat.answer_failed.connect(lambda *_: self.refresh())
        # A summary written in the background (engine/chat/background.py) shows in the chat's tooltip.
        summarised = workers.disk.relay(lambda _summary: self.refresh())
        engine.add_summary_listener(lambda conversation_id, text: summarised((conversation_id, text)))

    def set_current(self, conversation_id: int | None) -> None:
        self.current_id = conversation_id
        self.sidebar.select(conversation_id)

    def refresh(self, open_latest: bool = False) -> None:
        engine, chats, search = self.engine, self.engine.chats, self.search_text
        hidden = set(self.pending_deletes)

        def read() -> tuple[ConversationSearch, dict[int, str], bool]:
            # A search embeds its text on the small model: off the GUI thread, like every read.
            found = chats.search(search) if search else ConversationSearch(chats.conversations(), [])
            return found, engine.conversation_summaries(), bool(search) and engine.search_indexing()

        def shown(found: tuple[ConversationSearch, dict[int, str], bool]) -> None:
            if search != self.search_text:
                return  # an older search's answer: a newer one is on its way
            conversations = [c for c in found[0].matches if c.id not in self.pending_deletes and c.id not in hidden]
            related = [c for c in found[0].related if c.id not in self.pending_deletes and c.id not in hidden]
            self.sidebar.set_conversations(conversations, self.current_id, set(self.chat.streams), found[1], related,
                                           indexing=found[2])
            if found[2]:  # messages are still being embedded: search again when some more are
                self._reindex_timer.start()
            self.listed.emit(conversations)
            if open_latest and self.current_id is None and conversations:
                self.latest.emit(conversations[0].id)

        self.workers.disk.run(read, shown, self.failed.emit)

    def search(self, text: str) -> None:
        self.search_text = text
        self.refresh()

    def rename(self, conversation_id: int, title: str) -> None:
        chats = self.engine.chats
        self.workers.disk.run(lambda: chats.rename(conversation_id, title), self._renamed, self.failed.emit)

    def _renamed(self, conversation: Conversation) -> None:
        self.renamed.emit(conversation)
        self.refresh()

    # -- delete, with a few seconds to undo -------------------------------------------

    def delete(self, conversation_id: int) -> None:
        """Hide the chat now; delete it for good unless Undo is pressed within a few seconds."""
        self.chat.stop(conversation_id)
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.timeout.connect(lambda: self._commit_delete(conversation_id))
        self.pending_deletes[conversation_id] = timer
        timer.start(UNDO_DELETE_MS)
        self.sidebar.show_toast("Chat deleted")
        self.hidden.emit(conversation_id)
        self.refresh()

    def undo_delete(self) -> None:
        if not self.pending_deletes:
            return
        conversation_id = list(self.pending_deletes)[-1]
        self.pending_deletes.pop(conversation_id).stop()
        if not self.pending_deletes:
            self.sidebar.hide_toast()
        self.refresh()

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
            self.deleted.emit(conversation_id)
        else:
            self.workers.disk.run(lambda: chats.delete_conversation(conversation_id),
                                  lambda _none: self.deleted.emit(conversation_id), self.failed.emit)

    def commit_pending_deletes(self) -> None:
        """Delete at once what is waiting for its Undo to expire (the window is closing)."""
        for conversation_id in list(self.pending_deletes):
            self._commit_delete(conversation_id, now=True)

    # -- export -------------------------------------------------------------------------

    def export(self, conversation_id: int, kind: str, path: str | None = None) -> None:
        """Write a conversation as Markdown or JSON; without ``path``, ask where."""
        markdown = kind == "markdown"
        if path is None:
            suggested = Path.home() / f"conversation-{conversation_id}{'.md' if markdown else '.json'}"
            path = self.sidebar.ask_export_path(suggested, markdown)
            if not path:
                return
        chats, target = self.engine.chats, Path(path)

        def write() -> Path:
            conversation, messages = chats.open(conversation_id)
            calls = chats.tool_calls(conversation_id)
            images = chats.message_images(conversation_id)
            if markdown:
                for source, copy in export.image_files(target, messages, images).items():
                    if source.is_file():  # a file lost from the data folder leaves a dead link
                        atomic_write_bytes(copy, source.read_bytes())
            body = (export.to_markdown(conversation, messages, calls, images, export.images_folder(target).name)
                    if markdown else export.to_json(conversation, messages, calls, images))
            atomic_write_text(target, body)
            return target

        self.workers.disk.run(write, lambda written: self.notice.emit(f"Exported to {written}"), self.failed.emit)

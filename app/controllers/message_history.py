"""What a person does to a conversation's history, besides sending: page through the versions
of a message, continue a cut-off answer, rewrite an answer, branch into a new chat, delete
one message.

Each change goes through the engine's ``ChatService`` on the disk lane (continuing streams
on the answers lane like any answer); the page is then read again, so what is shown is what
is stored.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from inglenook.engine import Conversation, Message

from inglenook.app.controllers.active_chat import ActiveChat
from inglenook.app.pages.chat.message_actions import AnswerEditor
from inglenook.app.pages.chat.page import ChatPage


class MessageHistory(QObject):
    def __init__(self, active: ActiveChat, page: ChatPage, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.active = active
        self.page = page
        self.editor: AnswerEditor | None = None  # Edit text… on an answer, while open
        page.version_chosen.connect(self.show_version)
        page.continue_requested.connect(self.continue_answer)
        page.edit_text_requested.connect(self.edit_text)
        page.branch_requested.connect(self.branch)
        page.delete_requested.connect(self.delete)
        active.chat.answer_finished.connect(self._answer_finished)

    @property
    def _chats(self):  # noqa: ANN202 — the engine's ChatService
        return self.active.engine.chats

    def _idle(self) -> bool:
        """Whether the open chat may change now: no answer of it is streaming."""
        return self.active.current_id is not None and not self.active.chat.is_streaming(self.active.current_id)

    def _run(self, work, done) -> None:  # noqa: ANN001 — callables of the disk lane
        # A failure goes to the chat page's banner (the chat's Operations say it there).
        self.active.operations.run("disk", work, done)

    def _reload_if_open(self, conversation_id: int) -> None:
        if conversation_id == self.active.current_id:
            self.active.reload()

    # -- actions -------------------------------------------------------------------------

    def show_version(self, message_id: int) -> None:
        if not self._idle():
            return
        cid, chats = self.active.current_id, self._chats
        assert cid is not None
        self._run(lambda: chats.choose_version(message_id), lambda _path: self._reload_if_open(cid))

    def continue_answer(self) -> None:
        if not self._idle():
            return
        active = self.active
        cid = active.current_id
        assert cid is not None
        if self.page.reopen_last_answer(active.model_for(active.conversation) or "") is None:
            return
        active.chat.continue_answer(cid)

    def edit_text(self, message_id: int) -> None:
        if not self._idle():
            return
        cid, chats = self.active.current_id, self._chats
        assert cid is not None
        editor = self.page.open_answer_editor(message_id)
        if editor is None:
            return

        def save(text: str) -> None:
            self._run(lambda: chats.edit_message(message_id, text), lambda _message: self._reload_if_open(cid))

        self.editor = editor
        editor.edited.connect(save)

    def branch(self, message_id: int) -> None:
        chats = self._chats

        def made(conversation: Conversation) -> None:
            self.active.conversation_changed.emit()  # the sidebar lists it
            self.active.open(conversation.id)

        self._run(lambda: chats.branch(message_id), made)

    def delete(self, message_id: int) -> None:
        if not self._idle():
            return
        cid, chats = self.active.current_id, self._chats
        assert cid is not None
        self._run(lambda: chats.delete_message(message_id), lambda _path: self._reload_if_open(cid))

    # -- keeping the pager current -------------------------------------------------------

    def _answer_finished(self, conversation_id: int, message: Message | None) -> None:
        """A regenerated answer (or an edited question's) is a new version: show the count."""
        if conversation_id != self.active.current_id or message is None:
            return
        chats = self._chats
        self._run(lambda: chats.version_sets(conversation_id),
                  lambda versions: self._show_versions(conversation_id, versions))

    def _show_versions(self, conversation_id: int, versions: dict[int, list[int]]) -> None:
        if conversation_id != self.active.current_id:
            return
        self.page.show_versions(versions)

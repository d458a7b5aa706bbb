"""The conversation on screen: opening it, sending, regenerating, editing, stopping, trimming
a full context, its model and its settings, and the banner that explains what went wrong.

Every change goes through the engine's ``ChatService`` (on the disk lane, or on the answers
lane through ``ChatController``); this controller keeps the chat page's widgets in step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication

from inglenook.engine import (
    Assistant, CallRecord, CallRequest, Conversation, ImageInput, Message, ModelNotFound, PromptProgress,
)

from inglenook.app.services.app_engine import AppEngine
from inglenook.app.services import errors as actions
from inglenook.app.pages.chat.assistant_editor import Choices
from inglenook.app.controllers.answers import ChatController
from inglenook.app.pages.chat.page import ChatPage
from inglenook.app.widgets.image_viewer import Picture, picture_of_stored
from inglenook.app.controllers.model_list import ModelList
from inglenook.app.pages.chat.tool_call_widget import ToolCallWidget
from inglenook.app.pages.chat.tools_box import ChatToolsBox
from inglenook.app.services.operations import Operations
from inglenook.app.services.workers import Workers

log = logging.getLogger(__name__)


class ActiveChat(QObject):
    current_changed = Signal(object)  # the open conversation's id, or None for a new chat
    conversation_changed = Signal()  # created, renamed or re-pointed: the list shows it anew
    documents_changed = Signal()  # documents were attached to the open chat (an assistant's)

    def __init__(self, engine: AppEngine, workers: Workers, page: ChatPage, chat: ChatController, models: ModelList,
                 operations: Operations, tools_box: ChatToolsBox, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.workers = workers
        self.page = page
        self.chat = chat
        self.models = models
        self.current_id: int | None = None
        self.conversation: Conversation | None = None
        self.draft_model: str | None = None  # the model picked before the first message
        # The assistant picked before the first message: its tools and documents go to the
        # chat when the first message creates it.
        self.draft_assistant: Assistant | None = None
        self.errors: dict[int, BaseException] = {}  # the last failure of each conversation
        # A message sent while the chat being opened was still being read (at start the
        # latest chat opens by itself, and a person may type at once): it goes to that chat
        # once it is on screen (``_loaded``), never to a new chat behind the person's back.
        self._waiting_for_open: tuple[int, str, list[ImageInput], list[Picture]] | None = None
        # The chat's tool switches (Settings → Tools holds the servers), and the blocks of
        # calls in flight by call id (a result finds its block).
        # The window's operations: what nobody handles goes to the chat page's banner.
        self.operations = operations
        self.tools_box = tools_box  # built by the window, which composes widgets
        page.panel.add_tools_section(self.tools_box)  # the servers' switches, then rounds and tool choice
        self.tools_box.tools_listed.connect(page.panel.set_tool_names)
        self.call_blocks: dict[str, ToolCallWidget] = {}
        self._connect()

    def _connect(self) -> None:
        page = self.page
        page.stop_requested.connect(self.stop)
        page.regenerate_requested.connect(self.regenerate)
        page.edit_submitted.connect(self.edit_and_resend)
        page.model_chosen.connect(self.choose_model)
        page.settings_changed.connect(self.save_settings)
        page.model_wanted.connect(self.choose_model)
        page.assistant_applied.connect(self.assistant_picked)
        picker, chats = page.panel.assistant, self.engine.chats
        picker.current_tools = self.tools_box.chosen
        engine = self.engine
        picker.read_choices = lambda: Choices(tuple(c.name for c in engine.tool_servers()),
                                              tuple(chats.collections()))
        picker.run_read = lambda read, done: self.workers.disk.run(read, done, self.show_error)
        picker.set_library(chats.assistants)
        self.chat.answer_started.connect(self._answer_started)
        self.chat.answer_text.connect(self._answer_text)
        self.chat.answer_progress.connect(self._answer_progress)
        self.chat.answer_finished.connect(self._answer_finished)
        self.chat.answer_failed.connect(self._answer_failed)
        self.chat.tool_call_asked.connect(self._tool_call_asked)
        self.chat.tool_call_done.connect(self._tool_call_done)
        self.chat.tool_round_done.connect(self._tool_round_done)
        self.models.changed.connect(self._models_changed)

    def model_for(self, conversation: Conversation | None) -> str | None:
        if conversation is None:
            return self.draft_model or self.models.default_model
        return conversation.model_id or self.models.default_model

    def _set_current(self, conversation_id: int | None) -> None:
        self.current_id = conversation_id
        self.current_changed.emit(conversation_id)

    # == opening ========================================================================

    def new_chat(self) -> None:
        page = self.page
        self._send_waiting(None)  # a message waiting for a chat to open goes back into the box
        page.panel.flush()
        self.conversation = None
        self._set_current(None)
        self.draft_model = page.shown_model()
        self.draft_assistant = None
        page.title_label.setText("New chat")
        page.view.clear()
        page.banner.hide()
        page.set_streaming(False)
        page.panel.load(0, None, {})
        page.panel.conversation_id = None
        self.tools_box.load(None)
        page.show_model(self.model_for(None))
        page.focus_input()

    def open(self, conversation_id: int) -> None:
        if conversation_id == self.current_id and self.conversation is not None:
            return
        if self._waiting_for_open is not None and self._waiting_for_open[0] != conversation_id:
            self._send_waiting(None)  # the person moved on: the waiting message goes back into the box
        self.page.panel.flush()
        self.current_id = conversation_id
        chats = self.engine.chats
        self.workers.disk.run(lambda: (*chats.open(conversation_id), chats.version_sets(conversation_id),
                                       chats.tool_calls(conversation_id)), self._loaded, self.show_error)
        # The images sent in it, as thumbnails (files read on the lane), once its messages are shown.
        self.workers.disk.run(lambda: (conversation_id, {
            message_id: [picture_of_stored(s) for s in stored]
            for message_id, stored in chats.message_images(conversation_id).items()}), self._pictures_loaded)

    def reload(self) -> None:
        """Read the open conversation again (after a failure saved part of an answer)."""
        conversation_id = self.current_id
        self.conversation = None
        if conversation_id is not None:
            self.open(conversation_id)

    def _loaded(self, loaded: tuple[Conversation, list[Message], dict[int, list[int]], list[CallRecord]]) -> None:
        conversation, messages, versions, calls = loaded
        if conversation.id != self.current_id:
            return  # the user moved on while it loaded
        page = self.page
        self.conversation = conversation
        page.title_label.setText(conversation.title or "New chat")
        answered = {call.result_message_id: call for call in calls}
        page.show_messages(messages, versions, answered)
        self.call_blocks.clear()  # the view's blocks are gone; the calls still waiting get new ones
        for pending in self.chat.approvals.waiting(conversation.id):
            self._show_waiting(pending.request, pending)
        self.tools_box.load(conversation.id)
        streaming = self.chat.is_streaming(conversation.id)
        if streaming:
            page.view.begin_answer(self.model_for(conversation) or "")
            page.view.update_answer(self.chat.text_of(conversation.id))
        page.set_streaming(streaming)
        page.panel.load(conversation.id, conversation.system_prompt, conversation.sampling)
        page.show_model(self.model_for(conversation))
        self._set_current(conversation.id)
        page.banner.hide()
        error = self.errors.get(conversation.id)
        if error is not None:
            self.show_error(error)
        self._check_missing_model()
        self._send_waiting(conversation.id)

    def _send_waiting(self, opened_id: int | None) -> None:
        """Send the message that waited for ``opened_id`` to be read; a message that waited
        for a chat the person then left goes back into the message box instead."""
        waiting, self._waiting_for_open = self._waiting_for_open, None
        if waiting is None:
            return
        conversation_id, text, images, pictures = waiting
        if conversation_id == opened_id and not self._busy():
            self.send(text, images, pictures)
        else:
            self.page.set_message_text(text)

    def _pictures_loaded(self, loaded: tuple[int, dict[int, list[Picture]]]) -> None:
        conversation_id, pictures = loaded
        if conversation_id == self.current_id and pictures:
            self.page.view.show_pictures(pictures)

    def _check_missing_model(self) -> None:
        conversation = self.conversation
        if conversation is None or not conversation.model_id or not self.models.models:
            return
        if not self.models.is_installed(conversation.model_id):
            self.show_error(ModelNotFound(f"{conversation.model_id} is not installed"))

    def _models_changed(self) -> None:
        self.page.picker.set_models(self.models.models, self.models.plans, self.models.base_models)
        self.page.show_model(self.model_for(self.conversation))
        self._check_missing_model()

    def _showing(self, conversation_id: int) -> bool:
        """Whether the page shows ``conversation_id`` already: between ``open`` and its
        ``_loaded``, ``current_id`` names the chat being opened while the page (and
        ``self.conversation``) still show the previous one, whose fresher copy must not
        pass for the loaded chat."""
        return self.conversation is not None and self.conversation.id == conversation_id == self.current_id

    def conversation_updated(self, conversation: Conversation) -> None:
        if self._showing(conversation.id):
            self.conversation = conversation
            self.page.title_label.setText(conversation.title or "New chat")
            self.page.show_model(self.model_for(conversation))

    def listed(self, conversations: list[Conversation]) -> None:
        """Take the fresher copy from the sidebar's list (the first message names the chat)."""
        for conversation in conversations:
            if self._showing(conversation.id):
                self.conversation = conversation
                self.page.title_label.setText(conversation.title or "New chat")

    # == sending ========================================================================

    def _busy(self) -> bool:
        return self.current_id is not None and self.chat.is_streaming(self.current_id)

    def _begin_answer(self, model_id: str | None) -> None:
        self.page.banner.hide()
        self.page.view.begin_answer(model_id or "")
        self.page.set_streaming(True)

    def can_send(self, text: str) -> bool:
        """Whether ``text`` would go now: not blank, and no answer streaming in this chat."""
        return bool(text.strip()) and not self._busy()

    def send(self, text: str, images: list[ImageInput] | None = None, pictures: list[Picture] | None = None) -> None:
        """Send ``text`` (with ``images``, shown as ``pictures``) to the chat on screen; what
        the next message carries is gathered by controllers/next_message.py."""
        text = text.strip()
        if not self.can_send(text):
            return
        images, pictures = images or [], pictures or []
        self.page.panel.flush()
        if self.current_id is not None and self.conversation is None:
            if self._waiting_for_open is not None:  # one message waits already: this one stays in the box
                self.page.set_message_text(text)
                return
            self._waiting_for_open = (self.current_id, text, images, pictures)
            self.page.view.add_pending_user(text).set_pictures(pictures)
            return
        if self.current_id is None or self.conversation is None:
            self._create_then_send(text, images, pictures)
            return
        self.page.view.add_pending_user(text).set_pictures(pictures)
        self._begin_answer(self.model_for(self.conversation))
        self.chat.send(self.current_id, text, images)

    def conversation_maker(self) -> Callable[[], Conversation]:
        """What creates the new chat on screen, for a lane to run: the picked model, the
        panel's system prompt, sampling and tool switches, and the picked assistant's tools
        and documents (read here, on the GUI thread)."""
        page, chats, assistant = self.page, self.engine.chats, self.draft_assistant
        model = page.shown_model() if page.shown_model() != self.models.default_model else None
        prompt = page.panel.system_prompt.toPlainText().strip() or None
        sampling = page.panel.sampling()
        servers = self.tools_box.chosen()  # switched on before the chat existed

        def create() -> Conversation:
            conversation = chats.new_conversation(model_id=model, system_prompt=prompt, sampling=sampling)
            if servers:
                chats.set_chat_tools(conversation.id, servers)
            if assistant is not None:
                chats.apply_assistant(conversation.id, assistant)
            return conversation

        return create

    def assistant_picked(self, assistant: Assistant) -> None:
        """An assistant's tools and documents: a new chat takes them when its first message
        creates it; an open chat takes them now."""
        cid = self.current_id
        if cid is None:
            self.draft_assistant = assistant
            self.tools_box.show_planned(list(assistant.tool_servers))
            return
        chats = self.engine.chats

        def applied(_result: object) -> None:
            if cid == self.current_id:
                self.tools_box.load(cid)
                self.documents_changed.emit()

        self.workers.disk.run(lambda: chats.apply_assistant(cid, assistant), applied, self.show_error)

    def _create_then_send(self, text: str, images: list[ImageInput] | None = None,
                          pictures: list[Picture] | None = None) -> None:
        page = self.page
        create = self.conversation_maker()
        page.view.add_pending_user(text).set_pictures(pictures or [])
        self._begin_answer(page.shown_model())

        def created(conversation: Conversation) -> None:
            self.draft_assistant = None
            self.conversation = conversation
            self._set_current(conversation.id)
            page.panel.load(conversation.id, conversation.system_prompt, conversation.sampling)
            self.tools_box.load(conversation.id)
            self.chat.send(conversation.id, text, images)
            self.conversation_changed.emit()

        def failed(exc: BaseException) -> None:
            page.view.clear()
            page.set_streaming(False)
            page.set_message_text(text)
            self.show_error(exc)

        self.workers.disk.run(create, created, failed)

    def regenerate(self) -> None:
        cid, view = self.current_id, self.page.view
        if cid is None or self._busy():
            return
        while view.widgets and view.widgets[-1].role == "assistant":
            view.remove_from(len(view.widgets) - 1)
        if not view.widgets:
            return
        self.page.panel.flush()
        self._begin_answer(self.model_for(self.conversation))
        self.chat.regenerate(cid)

    def edit_and_resend(self, message_id: int, text: str) -> None:
        cid, view = self.current_id, self.page.view
        if cid is None or self._busy():
            return
        index = view.index_of_message(message_id)
        if index is None:
            return
        self.page.panel.flush()
        view.remove_from(index)
        view.add_pending_user(text)
        self._begin_answer(self.model_for(self.conversation))
        self.chat.edit_and_resend(cid, message_id, text)

    def stop(self) -> None:
        if self.current_id is not None:
            self.chat.stop(self.current_id)

    def copy_last_answer(self) -> bool:
        text = self.page.view.last_answer_text()
        if text:
            QGuiApplication.clipboard().setText(text)
        return bool(text)

    def trim_oldest(self) -> None:
        """Drop the oldest messages so the conversation fits again, then answer again."""
        cid, chats = self.current_id, self.engine.chats
        if cid is None:
            return

        def trimmed(messages: list[Message]) -> None:
            if cid != self.current_id:
                return
            self.page.view.set_messages(messages)
            if messages and messages[-1].role == "user":
                self._begin_answer(self.model_for(self.conversation))
                self.chat.regenerate(cid)

        self.workers.disk.run(lambda: chats.trim_oldest(cid), trimmed, self.show_error)

    # == answers ========================================================================

    def _answer_started(self, conversation_id: int, messages: list[Message]) -> None:
        if conversation_id == self.current_id:
            self.page.view.sync_saved(messages)

    def _answer_text(self, conversation_id: int, text: str) -> None:
        if conversation_id == self.current_id:
            self.page.view.update_answer(text)

    def _answer_progress(self, conversation_id: int, progress: PromptProgress) -> None:
        if conversation_id == self.current_id:
            self.page.view.update_progress(progress)

    def _answer_finished(self, conversation_id: int, message: Message | None) -> None:
        self.errors.pop(conversation_id, None)
        if conversation_id == self.current_id:
            self.page.view.finish_answer(message)
            self.page.set_streaming(False)

    # == tool calls =====================================================================

    def _tool_call_asked(self, conversation_id: int, request: CallRequest, pending: Any) -> None:
        """A call waits for the person: its block, with Approve / Deny, in the conversation."""
        if conversation_id == self.current_id:
            self._show_waiting(request, pending)
        else:  # another chat's call: the sidebar marks it, and opening it shows the block
            log.info("a tool call waits for approval in conversation %d", conversation_id)

    def _show_waiting(self, request: CallRequest, pending: Any) -> None:
        self.call_blocks[request.call_id] = self.page.show_waiting_call(
            request, pending.draft, lambda text: setattr(pending, "draft", text), pending.answer)

    def _tool_call_done(self, conversation_id: int, record: CallRecord) -> None:
        block = self.call_blocks.pop(record.call_id, None)
        if conversation_id != self.current_id:
            return  # its block went with the view when another chat was opened
        if block is None:
            self.page.show_finished_call(record)  # not asked (allowed before): shown as it ran
            return
        block.show_result(record)

    def _tool_round_done(self, conversation_id: int, message: Message | None) -> None:
        """The round that called is saved; the next round's answer streams into a new bubble."""
        if conversation_id != self.current_id:
            return
        view = self.page.view
        view.finish_round(message)
        view.begin_answer(self.model_for(self.conversation) or "")

    def _answer_failed(self, conversation_id: int, exc: BaseException) -> None:
        self.errors[conversation_id] = exc
        if conversation_id == self.current_id:
            self.page.set_streaming(False)
            self.reload()  # the user's message was saved, and any partial answer too

    # == the conversation's model and settings ==========================================

    def choose_model(self, model_id: str) -> None:
        if self.current_id is None:
            self.draft_model = model_id
        else:
            self._switch_model(self.current_id, model_id)
        self.models.load(model_id)

    def use_default_model(self) -> None:
        if self.current_id is not None:
            self._switch_model(self.current_id, None)

    def _switch_model(self, conversation_id: int, model_id: str | None) -> None:
        chats = self.engine.chats
        self.workers.disk.run(lambda: chats.switch_model(conversation_id, model_id), self._updated, self.show_error)

    def save_settings(self, conversation_id: int, system_prompt: str | None, sampling: dict[str, Any]) -> None:
        chats = self.engine.chats
        self.workers.disk.run(lambda: chats.update_chat_settings(conversation_id, system_prompt, sampling),
                              self._updated, self.show_error)

    def _updated(self, conversation: Conversation) -> None:
        self.conversation_updated(conversation)
        self.conversation_changed.emit()

    # == errors =========================================================================

    def show_error(self, exc: BaseException) -> None:
        log.info("showing error: %s", exc)
        self.page.banner.show_explanation(actions.explain(exc))

    def clear_error(self) -> None:
        if self.current_id is not None:
            self.errors.pop(self.current_id, None)


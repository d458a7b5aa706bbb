"""Chat turns over stored conversations: the logic the terminal and the GUI share.

A turn commits the user's message before anything else happens, runs a job on the
scheduler, and saves the answer when the job ends: complete, or marked ``partial`` when
it was stopped or failed, so nothing the user saw is lost.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import (
    NO_LORA, AdapterError, ConversationNotFound, GenerateJob, ImageInput, InvalidRequest, LoraSet, ModelRecord,
    SamplingParams,
)
from ..documents import DocumentLibrary, FoundPassage
from ..models import AdapterRegistry
from ..remote import SEPARATOR, RemoteCatalogue
from ..scheduling import Scheduler
from ..store import Conversation, Message, PrefixCache, Store, StoredImage
from ..tools import DEFAULT_MAX_ROUNDS, Approver, McpManager
from ..usage import TERMINAL, WINDOW, ReasoningCount, UsageRecorder
from .assistants import Assistant, AssistantApplied, AssistantLibrary
from .chat_documents import DocumentsInChat
from .document_search import DocumentSearch
from .images import ChatImages
from .titles import title_from
from .turn import Turn
from .versions import MessageVersions

if TYPE_CHECKING:
    from .background import BackgroundWork
    from .tool_turn import CallRecord, ToolTurn, ToolTurnEvent

log = logging.getLogger(__name__)

#: The key of a conversation's settings that holds its LoRA adapters: [{"id", "scale"}].
LORA_KEY = "lora"
#: Queries shorter than this are searched by their words only (a letter or two means nothing).
MIN_MEANING_QUERY = 3


@dataclass(frozen=True)
class ConversationSearch:
    matches: list[Conversation]  # title or messages contain the words
    related: list[Conversation]  # close in meaning, best first, none of them in ``matches``


class ChatService(DocumentsInChat, MessageVersions):
    """Conversations and their turns; documents in chats (``chat_documents``) and versions of
    messages (``versions``) are its too."""

    def __init__(self, store: Store, scheduler: Scheduler, default_model: Any, cache: PrefixCache | None = None,
                 usage: UsageRecorder | None = None, adapters: AdapterRegistry | None = None,
                 images_folder: Path | None = None) -> None:
        """``default_model`` is a callable returning the id to use when a chat names none;
        ``cache`` holds the conversations' saved prompt states (deleted with them);
        ``usage`` hears each answer's reasoning token count; ``adapters``: the LoRA adapters
        a conversation may name in its settings; ``images_folder``: where images sent in
        chats are kept (``Paths.images``; by default beside the database)."""
        self.store = store
        self.scheduler = scheduler
        self._default_model = default_model
        self.cache = cache
        self.usage = usage
        self.adapters = adapters
        # Who is chatting, for usage: the terminal unless the window says it is the window.
        self.client = TERMINAL
        # Titles written by a small model, and background work that gives way to a person.
        self.background: BackgroundWork | None = None
        # Models named "<engine>/<model>" are answered by a remote engine (Settings → Engines).
        self.remotes = RemoteCatalogue(store)
        # Named presets of system prompt, sampling and model, picked when a chat starts.
        self.assistants = AssistantLibrary(store)
        # Tools from MCP servers for the chats that switch them on (tool_turn.py); the Engine
        # sets ``resolve`` (model id -> record) so a turn knows its template's tool format.
        self.tools = McpManager(store)
        self.resolve: Callable[[str], ModelRecord] | None = None
        # Documents attached to conversations (placed whole, first, in every turn's prompt,
        # or searched when they do not fit: the passages each conversation's last turn used).
        self.documents = DocumentLibrary(store)
        self.passages_used: dict[int, list[FoundPassage]] = {}
        self._document_search: DocumentSearch | None = None
        # The context a model's chats get, for "do the documents fit": the loaded model's.
        self.context_of: Callable[[str], int] = self._loaded_context
        # The context a model not loaded yet will load with (Engine: settings, else auto).
        self.planned_context: Callable[[str], int] | None = None
        # Images sent with messages: kept with the chat, read again by every later turn.
        self.images = ChatImages(store, images_folder or store.path.parent / "images", self)

    def new_conversation(
        self,
        model_id: str | None = None,
        system_prompt: str | None = None,
        sampling: dict[str, Any] | None = None,
        title: str = "New chat",
        assistant: str | None = None,
    ) -> Conversation:
        """A new conversation; an ``assistant``'s system prompt, sampling and model fill in
        what the call leaves out, and its tool servers and collections come with it."""
        preset = self.assistants.get(assistant) if assistant is not None else None
        if preset is not None:
            model_id = model_id or preset.model_id
            system_prompt = system_prompt if system_prompt is not None else (preset.system_prompt or None)
            sampling = {**preset.sampling, **(sampling or {})}
        if sampling:
            SamplingParams.from_dict(sampling)  # reject bad values before they are stored
            self.lora_for(sampling)
        conversation = self.store.create_conversation(title, model_id, system_prompt, sampling)
        if preset is not None:
            self.apply_assistant(conversation.id, preset)
        return conversation

    def apply_assistant(self, conversation_id: int, assistant: Assistant) -> AssistantApplied:
        """Switch on the assistant's tool servers in a chat and attach its collections'
        documents, adding to what the chat has (nothing is switched off or detached). Names
        this machine does not have are skipped and reported, not an error."""
        self.store.get_conversation(conversation_id)  # ConversationNotFound before anything is written
        known = {c.name for c in self.tools.servers.all()}
        servers = [s for s in assistant.tool_servers if s in known]
        if servers:
            self.set_chat_tools(conversation_id, sorted({*self.chat_tools(conversation_id), *servers}))
        collections = self.documents.collections()
        documents = [d for name in assistant.collections if name in collections
                     for d in self.documents.collection_documents(name)]
        if documents:
            self.documents.attach(conversation_id, documents)
        applied = AssistantApplied(
            tuple(servers), len({d.sha256 for d in documents}),
            tuple(s for s in assistant.tool_servers if s not in known),
            tuple(c for c in assistant.collections if c not in collections))
        if applied.missing_servers or applied.missing_collections:
            log.info("assistant %r names what is not set up here: servers %s, collections %s", assistant.name,
                     list(applied.missing_servers), list(applied.missing_collections))
        return applied

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation, its messages and its saved prompt states."""
        self.store.delete_conversation(conversation_id)
        if self.cache is not None:
            self.cache.forget_conversation(conversation_id)
        self.images.files.collect()  # its images, unless another message shows them too
        self.documents.prune_recordings()  # its recordings' copies, unless another chat holds them

    def conversations(self, search: str | None = None) -> list[Conversation]:
        """Every conversation, most recent activity first; ``search`` matches titles and messages."""
        return self.store.list_conversations(search=search or None)

    def search(self, text: str) -> ConversationSearch:
        """Conversations whose title or messages contain ``text``, then the others that are
        close to it in meaning (``chat/search``)."""
        matches = self.conversations(text)
        related: list[Conversation] = []
        if self.background is not None and len(text.strip()) >= MIN_MEANING_QUERY:
            found = {c.id for c in matches}
            for conversation_id, _score in self.background.related(text):
                if conversation_id not in found:
                    with contextlib.suppress(ConversationNotFound):  # deleted meanwhile
                        related.append(self.store.get_conversation(conversation_id))
        return ConversationSearch(matches, related)

    def open(self, conversation_id: int) -> tuple[Conversation, list[Message]]:
        """A conversation and its messages, read together (what a window shows)."""
        return self.store.get_conversation(conversation_id), self.store.messages(conversation_id)

    def rename(self, conversation_id: int, title: str) -> Conversation:
        """Give a conversation a new title (never an empty one); it keeps its place in the list."""
        title = title.strip()
        if not title:
            raise InvalidRequest("a conversation's title cannot be empty", param="title")
        return self.store.update_conversation(conversation_id, touch=False, title=title)

    def switch_model(self, conversation_id: int, model_id: str | None) -> Conversation:
        """Answer this conversation with ``model_id`` from now on; ``None`` follows the default model."""
        return self.store.update_conversation(conversation_id, model_id=model_id or None)

    def update_chat_settings(
        self, conversation_id: int, system_prompt: str | None, sampling: dict[str, Any]
    ) -> Conversation:
        """Replace a conversation's system prompt and sampling settings, validated like new ones."""
        SamplingParams.from_dict(sampling)  # reject bad values before they are stored
        self.lora_for(sampling)  # unknown adapters and bad scales too
        prompt = system_prompt.strip() if system_prompt else None
        return self.store.update_conversation(conversation_id, system_prompt=prompt or None, sampling=sampling)

    def lora_for(self, settings: dict[str, Any]) -> LoraSet:
        """The adapters a conversation's settings name (``settings["lora"]``), checked: an
        unknown adapter or a bad scale is ``AdapterError``. Whether one fits the model is
        checked when it is applied, so switching a chat's model never loses the choice."""
        chosen = settings.get(LORA_KEY)
        if not chosen:
            return NO_LORA
        if not isinstance(chosen, list) or not all(isinstance(c, dict) and "id" in c for c in chosen):
            raise AdapterError('a chat\'s adapters must be a list of {"id", "scale"}')
        if self.adapters is None:
            raise AdapterError("this engine has no LoRA adapters")
        return self.adapters.lora_set([(c["id"], c.get("scale", 1.0)) for c in chosen])

    def trim_oldest(self, conversation_id: int) -> list[Message]:
        """Drop the oldest third of a conversation (at least one exchange) so it fits the context
        again, always keeping the last message; returns the messages that remain."""
        messages = self.store.messages(conversation_id)
        count = min(max(2, len(messages) // 3), max(0, len(messages) - 1))
        if count:
            self.store.delete_oldest_messages(conversation_id, count)
            self.images.files.collect()
        return self.store.messages(conversation_id)

    def history(self, conversation: Conversation) -> list[dict[str, Any]]:
        """The messages a model sees: the system prompt, then every kept message (a user
        message with images as parts: its images, then its text)."""
        messages: list[dict[str, Any]] = []
        if conversation.system_prompt:
            messages.append({"role": "system", "content": conversation.system_prompt})
        for message in self.store.messages(conversation.id):
            if message.status == "error":
                continue
            if message.role == "tool":
                # A tool's result from a turn with tools (tool_turn.py), read in a turn without
                # them: plain text, which every template renders (some refuse a "tool" role).
                messages.append({"role": "user", "content": f"Result of a tool call: {message.content}"})
                continue
            messages.append({"role": message.role, "content": message.content})
        return self.images.into_history(conversation, messages)

    def default_model_id(self) -> str:
        return str(self._default_model())

    def sampling_for(self, settings: dict[str, Any]) -> SamplingParams:
        return SamplingParams.from_dict(settings)

    def chat_tools(self, conversation_id: int) -> list[str]:
        """The MCP servers whose tools this chat offers its model."""
        return self.tools.servers.chat_servers(conversation_id)

    def set_chat_tools(self, conversation_id: int, servers: list[str]) -> None:
        self.store.get_conversation(conversation_id)  # ConversationNotFound before anything is written
        self.tools.servers.set_chat_servers(conversation_id, servers)

    def tool_calls(self, conversation_id: int) -> list[CallRecord]:
        """Every tool call of a conversation with its result, in order (display, export)."""
        # Imported when tools are used: tool turns read the API's pydantic shapes, which a
        # chat without tools (``inglenook run``'s start) never loads.
        from .tool_turn import saved_calls  # noqa: PLC0415

        return saved_calls(self.store, conversation_id)

    def send_with_tools(self, conversation_id: int, text: str, approver: Approver, tool_choice: str | None = None,
                        max_rounds: int | None = None, use_cache: bool = True,
                        on_event: Callable[[ToolTurnEvent], None] | None = None,
                        **sampling_overrides: Any) -> ToolTurn:
        """Commit the user's message; the returned ``ToolTurn`` answers it with the chat's
        tools when ``run`` (blocking: call it on a worker thread). ``approver`` decides each call."""
        if not text.strip():
            raise InvalidRequest("the message is empty", param="content")
        conversation = self._tools_conversation(conversation_id)
        settings = self._tool_settings(conversation, tool_choice, max_rounds)
        first = not self.store.messages(conversation_id) and conversation.title in ("", "New chat")
        if first:
            conversation = self.store.update_conversation(conversation_id, title=title_from(text))
        self.store.add_message(conversation_id, "user", text)
        if first and self.background is not None and self.client == WINDOW:
            self.background.request_title(conversation_id, text)  # as a chat without tools gets one
        return self._tool_turn(conversation, approver, settings, use_cache, on_event, sampling_overrides)

    def regenerate_with_tools(self, conversation_id: int, approver: Approver, tool_choice: str | None = None,
                              max_rounds: int | None = None, use_cache: bool = True,
                              on_event: Callable[[ToolTurnEvent], None] | None = None,
                              **sampling_overrides: Any) -> ToolTurn:
        """``regenerate`` for a chat with tools: the last question is answered again from its
        first round (its earlier answer, calls and results stay, as the other version)."""
        conversation = self._tools_conversation(conversation_id)
        settings = self._tool_settings(conversation, tool_choice, max_rounds)
        messages = self.store.messages(conversation_id)
        while messages and messages[-1].role != "user":
            messages.pop()  # the answer, and the calls and results of its rounds
        if not messages:
            raise InvalidRequest("there is no message to answer")
        self.store.set_leaf(conversation_id, messages[-1].id)
        return self._tool_turn(conversation, approver, settings, use_cache, on_event, sampling_overrides)

    def edit_and_resend_with_tools(self, message_id: int, text: str, approver: Approver, tool_choice: str | None = None,
                                   max_rounds: int | None = None, use_cache: bool = True,
                                   on_event: Callable[[ToolTurnEvent], None] | None = None,
                                   **sampling_overrides: Any) -> ToolTurn:
        """``edit_and_resend`` for a chat with tools: the edited question, answered in tool rounds."""
        message = self.store.get_message(message_id)
        if message.role != "user":
            raise InvalidRequest("only user messages can be edited and resent")
        if not text.strip():
            raise InvalidRequest("the message is empty", param="content")
        conversation = self._tools_conversation(message.conversation_id)
        settings = self._tool_settings(conversation, tool_choice, max_rounds)
        self.store.set_leaf(message.conversation_id, message.parent_id)
        edited = self.store.add_message(message.conversation_id, "user", text)
        self.images.files.copy(message.id, edited.id)  # the question's images stay with its edited version
        return self._tool_turn(conversation, approver, settings, use_cache, on_event, sampling_overrides)

    def _tools_conversation(self, conversation_id: int) -> Conversation:
        conversation = self.store.get_conversation(conversation_id)
        model_id = conversation.model_id or self.default_model_id()
        if SEPARATOR in model_id and self.remotes.owner(model_id) is not None:
            raise InvalidRequest(f"tools run with local models only; {model_id} is answered by a remote engine")
        return conversation

    def _tool_settings(self, conversation: Conversation, tool_choice: str | None,
                       max_rounds: int | None) -> tuple[str | None, int]:
        """The first round's tool choice and the rounds, checked before anything is written:
        unless the caller says, the chat's own settings (Chat settings → Tools) decide."""
        rounds = int(conversation.sampling.get("tool_rounds") or DEFAULT_MAX_ROUNDS) if max_rounds is None else max_rounds
        if rounds < 1:
            raise InvalidRequest("a tool turn needs at least one round", param="max_rounds")
        return tool_choice or conversation.sampling.get("tool_choice") or None, rounds

    def _tool_turn(self, conversation: Conversation, approver: Approver, settings: tuple[str | None, int],
                   use_cache: bool, on_event: Callable[[ToolTurnEvent], None] | None,
                   sampling_overrides: dict[str, Any]) -> ToolTurn:
        """The tool rounds that answer the question at the conversation's leaf."""
        from .tool_turn import ToolTurn  # noqa: PLC0415 — see tool_calls

        tool_choice, rounds = settings
        return ToolTurn(self, conversation, approver, tool_choice, rounds, use_cache, on_event, sampling_overrides)

    def send(self, conversation_id: int, text: str, use_cache: bool = True, images: list[ImageInput] | None = None,
             **sampling_overrides: Any) -> Turn:
        """Commit the user's message, then start the answer. ``use_cache=False`` prefills
        the whole prompt even when a cached state covers part of it (for comparisons).
        ``images`` go with this message to the model's vision projector; they are kept with
        the message, so every later turn (and the chat reopened) shows them to the model
        again. A local model without a projector refuses them before anything is kept."""
        return self._send(conversation_id, text, use_cache, images or [], None, sampling_overrides)

    def _send(self, conversation_id: int, text: str, use_cache: bool, images: list[ImageInput],
              images_of: int | None, sampling_overrides: dict[str, Any]) -> Turn:
        """``send``, with the images of message ``images_of`` (an edited question's) kept too."""
        if not text.strip():
            raise InvalidRequest("the message is empty", param="content")
        conversation = self.store.get_conversation(conversation_id)
        if images:  # refused before anything is kept (an edited question's images are already kept)
            self.images.check_model(conversation.model_id or self.default_model_id())
        first = not self.store.messages(conversation_id) and conversation.title in ("", "New chat")
        if first:
            conversation = self.store.update_conversation(conversation_id, title=title_from(text))
        message = self.store.add_message(conversation_id, "user", text)
        if images_of is not None:
            self.images.files.copy(images_of, message.id)
        if images:
            self.images.files.attach(message.id, images)
        turn = self._answer(conversation, sampling_overrides, use_cache)
        if first and self.background is not None and self.client == WINDOW:
            self.background.request_title(conversation_id, text)  # written once the machine is idle
        return turn

    def regenerate(self, conversation_id: int, use_cache: bool = True, **sampling_overrides: Any) -> Turn:
        """Answer the last question again; the earlier answers stay, as versions of this one."""
        conversation = self.store.get_conversation(conversation_id)
        messages = self.store.messages(conversation_id)
        while messages and messages[-1].role == "assistant":
            messages.pop()
        if not messages:
            raise InvalidRequest("there is no message to answer")
        self.store.set_leaf(conversation_id, messages[-1].id)
        return self._answer(conversation, sampling_overrides, use_cache)

    def edit_and_resend(self, message_id: int, text: str, use_cache: bool = True, **sampling_overrides: Any) -> Turn:
        """Ask an edited question in place of ``message_id`` and answer it; the old question
        and what followed it stay, as the other branch."""
        message = self.store.get_message(message_id)
        if message.role != "user":
            raise InvalidRequest("only user messages can be edited and resent")
        if not text.strip():
            raise InvalidRequest("the message is empty", param="content")
        self.store.set_leaf(message.conversation_id, message.parent_id)
        # The question's images stay with its edited version.
        return self._send(message.conversation_id, text, use_cache, [], message.id, sampling_overrides)

    def continue_answer(self, conversation_id: int, use_cache: bool = True, **sampling_overrides: Any) -> Turn:
        """Write more of the last answer (one cut off by its length limit or by Stop): the
        model continues its own text, which is saved into the same message."""
        conversation = self.store.get_conversation(conversation_id)
        messages = self.store.messages(conversation_id)
        if not messages or messages[-1].role != "assistant" or not messages[-1].content:
            raise InvalidRequest("there is no answer to continue")
        if messages[-1].status == "error":
            raise InvalidRequest("the last answer failed; regenerate it instead of continuing it")
        return self._answer(conversation, sampling_overrides, use_cache, extends=messages[-1])

    def message_images(self, conversation_id: int) -> dict[int, list[StoredImage]]:
        """Message id → the images sent with it (files in the data folder), for the messages
        of the conversation that have any (the window's thumbnails, export)."""
        return self.images.files.of_conversation(conversation_id)

    def image_problem(self, model_id: str | None) -> str | None:
        """Why ``model_id`` (None: the default model) cannot be sent images; None when it can."""
        return self.images.problem(model_id or self.default_model_id())

    def reads_images(self, model_id: str | None) -> bool:
        """Whether ``model_id`` (None: the default model) can be sent images: a local model
        with a paired vision projector beside it, or a remote engine's (its server decides)."""
        return self.images.problem(model_id or self.default_model_id()) is None

    def _answer(self, conversation: Conversation, overrides: dict[str, Any], use_cache: bool = True,
                extends: Message | None = None) -> Turn:
        model_id = conversation.model_id or self._default_model()
        settings = {**conversation.sampling, **overrides}
        sampling = SamplingParams.from_dict(settings)
        lora = self.lora_for(settings)
        if lora and SEPARATOR in model_id and self.remotes.owner(model_id) is not None:
            raise AdapterError(f"LoRA adapters run on local models only; {model_id} is answered by a remote engine")
        reply_to = self.store.leaf(conversation.id)
        messages, shared = self._with_documents(conversation, model_id)
        if extends is not None:
            if SEPARATOR in model_id and self.remotes.owner(model_id) is not None:
                raise InvalidRequest(f"{model_id} is answered by a remote engine, which cannot continue an answer")
            messages = messages[:-1]  # the answer goes after the prompt, unfinished (answer_prefix)
        job = GenerateJob(
            model_id=model_id,
            sampling=sampling,
            messages=messages,
            use_cache=use_cache,
            conversation_id=conversation.id,
            shared_messages=shared,
            shared_documents=tuple(d.sha256 for d in self.documents.for_conversation(conversation.id)) if shared else (),
            client=self.client,
            lora=lora,
            answer_prefix=extends.content if extends is not None else None,
        )
        if SEPARATOR in model_id and self.remotes.owner(model_id) is not None:
            # The same events as a local job; nothing runs here, so there is no usage to count.
            assert job.messages is not None
            remote_messages = self.images.for_remote(job.messages)
            return Turn(self.store, conversation, self.remotes.chat(model_id, remote_messages, sampling), model_id,
                        reply_to)
        if self.background is not None:
            self.background.person_started()  # a title being written gives way
        handle = self.scheduler.submit(job)
        turn = Turn(self.store, conversation, handle, model_id, reply_to, extends)
        if self.usage is not None:
            turn.reasoning = ReasoningCount(self.usage, job)
        return turn

"""Chat turns over stored conversations: the logic the terminal and the GUI share.

A turn commits the user's message before anything else happens, runs a job on the
scheduler, and saves the answer when the job ends: complete, or marked ``partial`` when
it was stopped or failed, so nothing the user saw is lost.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import (
    EMPTY, ENDED, NO_LORA, AdapterError, Chunk, ConversationNotFound, Finished, GenerateJob, ImageInput,
    InglenookError, InvalidRequest, JobHandle, LoraSet, ModelRecord, PromptProgress, SamplingParams,
)
from ..documents import (
    Added, CollectionFile, Document, DocumentLibrary, FoundPassage, PassageIndex, convert_file, with_documents,
)
from ..models import AdapterRegistry
from ..remote import SEPARATOR, RemoteAnswer, RemoteCatalogue
from ..scheduling import Scheduler
from ..store import NOMINAL_AUTO_CONTEXT, Conversation, Message, PrefixCache, Store, StoredImage
from ..tools import DEFAULT_MAX_ROUNDS, Approver, McpManager
from ..usage import TERMINAL, WINDOW, ReasoningCount, UsageRecorder
from .assistants import Assistant, AssistantApplied, AssistantLibrary
from .document_search import DocumentSearch, passages_block
from .images import ChatImages, message_text
from .search import MeaningSearch
from .titles import title_from

if TYPE_CHECKING:
    from .background import BackgroundWork
    from .tool_turn import CallRecord, ToolTurn, ToolTurnEvent

log = logging.getLogger(__name__)

#: The key of a conversation's settings that holds its LoRA adapters: [{"id", "scale"}].
LORA_KEY = "lora"
#: Queries shorter than this are searched by their words only (a letter or two means nothing).
MIN_MEANING_QUERY = 3
# Documents placed whole: characters per token assumed (cautious), and the context kept free
# for the conversation and the answer; documents needing more are searched instead.
CHARS_PER_TOKEN = 3.0
ROOM_FOR_CHAT_TOKENS = 1024


@dataclass(frozen=True)
class ConversationSearch:
    matches: list[Conversation]  # title or messages contain the words
    related: list[Conversation]  # close in meaning, best first, none of them in ``matches``


class Turn:
    """One assistant answer in progress. Iterate it for chunks; the answer is saved at the end.

    ``on_progress``, when set before iterating, hears how far the prompt's reading has come
    (``PromptProgress``), on the iterating thread, until the first chunk: a long prompt is
    read for minutes on a CPU, and a front end shows it coming instead of "Thinking…".

    An event loop reads a local turn without a thread of its own: ``set_waker``, then ``poll``
    whenever woken, and ``save`` (a store write) once ``poll`` says the job ended or raised.
    A remote engine's answer comes from the network, so it is iterated on a thread.
    """

    def __init__(self, store: Store, conversation: Conversation, handle: JobHandle | RemoteAnswer,
                 model_id: str, reply_to: int | None, extends: Message | None = None) -> None:
        self.store = store
        # A cut-off answer this turn continues: saved as that message, made longer.
        self.extends = extends
        # The message this answer replies to, fixed when it started: the answer is saved as
        # its child (a version beside earlier answers to it) whatever the chosen path is by then.
        self.reply_to = reply_to
        self.conversation = conversation
        self.handle = handle
        self.model_id = model_id
        self.finished: Finished | None = None
        self.message: Message | None = None
        self.error: InglenookError | None = None
        self._parts: list[str] = []
        self._saved = threading.Event()
        self.reasoning: ReasoningCount | None = None  # counts reasoning tokens for usage
        self.on_progress: Callable[[PromptProgress], None] | None = None

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def cancel(self) -> None:
        self.handle.cancel()

    def __iter__(self) -> Iterator[Chunk]:
        try:
            for event in self.handle.events():
                chunk = self._take(event)
                if chunk is not None:
                    yield chunk
        except InglenookError as exc:
            self.error = exc
            self._save()
            raise
        if self.reasoning is not None:
            self.reasoning.done()
        self._save()

    def _take(self, event: object) -> Chunk | None:
        """Note one event of the job; the chunk, when it is one, for the reader."""
        if isinstance(event, Chunk):
            self._parts.append(event.text)
            if self.reasoning is not None:
                self.reasoning.feed(event)
            return event
        if isinstance(event, Finished):
            self.finished = event
        elif isinstance(event, PromptProgress) and self.on_progress is not None:
            self.on_progress(event)
        return None

    @property
    def pollable(self) -> bool:
        """Whether ``poll`` can read this turn: a local job can, a remote answer cannot."""
        return isinstance(self.handle, JobHandle)

    def set_waker(self, waker: Callable[[], None]) -> None:
        """Have ``waker()`` called on the scheduler's thread (quick, no waiting) whenever an
        event arrives; the loop it wakes then reads them with ``poll``."""
        if not isinstance(self.handle, JobHandle):
            raise TypeError("a remote answer is read by iterating it on a thread")
        self.handle.set_waker(waker)

    def poll(self) -> tuple[list[Chunk], bool]:
        """The chunks that arrived since the last poll, without waiting, and whether the job
        has ended (``on_progress`` hears progress meanwhile). Re-raises the job's error with
        ``error`` set. Either way the answer is not saved yet: call ``save``, which writes the
        store, where a disk write may wait."""
        if not isinstance(self.handle, JobHandle):
            raise TypeError("a remote answer is read by iterating it on a thread")
        chunks: list[Chunk] = []
        while True:
            try:
                event = self.handle.poll()
            except InglenookError as exc:
                self.error = exc
                raise
            if event is EMPTY:
                return chunks, False
            if event is ENDED:
                if self.reasoning is not None:
                    self.reasoning.done()
                return chunks, True
            chunk = self._take(event)
            if chunk is not None:
                chunks.append(chunk)

    def save(self) -> Message | None:
        """Save the answer as it ended (once: later calls change nothing) and return it;
        None when there was nothing to keep."""
        self._save()
        return self.message

    def wait(self) -> Message | None:
        """Drain the turn and return the saved answer."""
        for _ in self:
            pass
        return self.message

    def _save(self) -> None:
        if self._saved.is_set():
            return
        self._saved.set()
        finished = self.finished
        text = self.text
        if finished is None and not text:
            return  # failed before producing anything: there is nothing to keep
        if finished is not None and finished.finish_reason == "cancelled" and not text:
            return
        status = "complete"
        if self.error is not None:
            status = "error"
        elif finished is not None and finished.finish_reason == "cancelled":
            status = "partial"
        stats: dict[str, Any] = {"model_id": self.model_id, "status": status}
        if finished is not None:
            stats.update(
                finish_reason=finished.finish_reason,
                model_id=finished.model_id,
                prompt_tokens=finished.usage.prompt_tokens,
                cached_tokens=finished.usage.cached_tokens,
                completion_tokens=finished.usage.completion_tokens,
                ttft_ms=round(finished.timings.ttft_s * 1000, 2),
                tokens_per_s=round(finished.tokens_per_s, 2),
            )
        if self.extends is not None:
            before = self.extends
            stats["completion_tokens"] = (before.completion_tokens or 0) + (stats.get("completion_tokens") or 0)
            self.message = self.store.update_message(before.id, content=before.content + text, **stats)
            return
        self.message = self.store.add_message(self.conversation.id, "assistant", text, parent_id=self.reply_to,
                                              **stats)


class ChatService:
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

    def attach_documents(self, conversation_id: int, documents: list[Document]) -> list[Document]:
        """Attach converted documents to a conversation (each once); returns all it has now."""
        self.store.get_conversation(conversation_id)  # ConversationNotFound before anything is kept
        self.documents.attach(conversation_id, documents)
        return self.documents.for_conversation(conversation_id)

    def attached_documents(self, conversation_id: int) -> list[Document]:
        return self.documents.for_conversation(conversation_id)

    def detach_document(self, conversation_id: int, sha256: str) -> None:
        self.documents.detach(conversation_id, sha256)

    def _with_documents(self, conversation: Conversation, model_id: str) -> tuple[list[dict[str, Any]], int]:
        """The turn's messages with the conversation's documents, and how many lead them.

        Documents that fit (with room for the conversation and the answer) go first, whole, in
        a block that depends on them alone: every chat with the same documents starts with the
        same tokens, which the prefix cache keeps once. Documents that do not fit are searched:
        the passages that best match the last question go first instead (``passages_used``)."""
        history = self.history(conversation)
        documents = self.documents.for_conversation(conversation.id)
        self.passages_used.pop(conversation.id, None)
        if not documents or self._fits_whole(documents, model_id):
            return with_documents(history, documents)
        question = next((message_text(m) for m in reversed(history) if m["role"] == "user"), "")
        found = self.document_search().find(question, documents)
        self.passages_used[conversation.id] = found
        return [{"role": "system", "content": passages_block(found)}, *history], 0

    def document_placement(self, documents: list[Document], model_id: str | None) -> str:
        """"whole" when ``documents`` go into a chat with ``model_id`` whole, else "searched"."""
        if not documents or self._fits_whole(documents, model_id or self._default_model()):
            return "whole"
        return "searched"

    def _fits_whole(self, documents: list[Document], model_id: str) -> bool:
        context = self.context_of(model_id)
        # About 3 characters a token is cautious for prose (4 is usual for English) and
        # right for code and tables; the rest of the context is the conversation's and the answer's.
        return sum(len(d.text) for d in documents) / CHARS_PER_TOKEN <= context - ROOM_FOR_CHAT_TOKENS

    def _loaded_context(self, model_id: str) -> int:
        """The context ``model_id`` answers in: as loaded, else the one it will load with
        (``planned_context``, which the engine sets): a document asked about before the
        model is loaded is placed as it will be read, not against a nominal 4,096 tokens."""
        for model in self.scheduler.loaded_models():
            if model.record.id == model_id and not model.options.embeddings:
                return int(model.n_ctx)
        if self.planned_context is not None:
            try:
                return self.planned_context(model_id)
            except (InglenookError, OSError) as exc:  # not installed, or a header that cannot be read
                log.info("no planned context for %s: %s", model_id, exc)
        return NOMINAL_AUTO_CONTEXT

    def document_search(self) -> DocumentSearch:
        """Passage search over documents, by keywords and by the search model's vectors."""
        if self._document_search is None:
            background = self.background
            if background is not None:
                self._document_search = DocumentSearch(self.store, background.search, background.search_model,
                                                       background.embed_now)
            else:  # no background room (some tests, tools): keywords only
                self._document_search = DocumentSearch(self.store, MeaningSearch(self.store, lambda _id: True),
                                                       lambda: None, lambda _id, _texts: [])
        return self._document_search

    def add_to_collection(self, collection: str, paths: list[Path]) -> list[Added]:
        """Add files to a named collection (created if new), converting only changed ones."""
        return self.documents.add_files(collection, paths, convert_file)

    def collections(self) -> dict[str, list[CollectionFile]]:
        return self.documents.collections()

    def collection_documents(self, collection: str) -> list[Document]:
        return self.documents.collection_documents(collection)

    def remove_from_collection(self, collection: str, paths: list[Path] | None = None) -> int:
        """Remove files from a collection, or the whole collection when ``paths`` is empty.
        Documents in no collection now lose their passages, vectors and saved prompt states
        (a chat that still has one attached reads it again)."""
        removed, uncollected = self.documents.remove_collected(collection, paths or [])
        PassageIndex(self.store).forget(uncollected)
        if self.cache is not None:
            self.cache.forget_documents(uncollected)
        return removed

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
        from .tool_turn import saved_calls  # noqa: PLC0415 — tool_turn imports this module

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
        from .tool_turn import ToolTurn  # noqa: PLC0415

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

    def edit_message(self, message_id: int, text: str) -> Message:
        """Rewrite any message in place, the model's included (no new answer)."""
        if not text.strip():
            raise InvalidRequest("the message is empty", param="content")
        if self.store.get_message(message_id).role == "assistant":
            # The figures were the generated text's; the person's text has none.
            return self.store.update_message(message_id, content=text, completion_tokens=None, tokens_per_s=None,
                                             ttft_ms=None)
        return self.store.update_message(message_id, content=text)

    def delete_message(self, message_id: int) -> list[Message]:
        """Delete one message (and none after it); returns the conversation's path."""
        message = self.store.get_message(message_id)
        self.store.delete_message(message_id)
        self.images.files.collect()
        return self.store.messages(message.conversation_id)

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

    def versions(self, message_id: int) -> list[Message]:
        """``message_id`` and its other versions (regenerated answers, edited questions)."""
        return self.store.versions(message_id)

    def version_sets(self, conversation_id: int) -> dict[int, list[int]]:
        """Message id → the ids of all its versions, for messages that have more than one."""
        return self.store.version_sets(conversation_id)

    def choose_version(self, message_id: int) -> list[Message]:
        """Show this version of a message (and the newest branch after it); returns the path."""
        return self.store.choose_version(message_id)

    def branch(self, message_id: int) -> Conversation:
        """A new conversation holding this one up to ``message_id``, with its settings; its
        first answer starts from the saved prompt state of the conversation it came from."""
        message = self.store.get_message(message_id)
        source = self.store.get_conversation(message.conversation_id)
        path = self.store.messages(source.id)
        upto = next((i for i, m in enumerate(path) if m.id == message_id), None)
        if upto is None:
            raise InvalidRequest("only a message on the conversation's chosen path can start a branch")
        branch = self.store.create_conversation(
            title=f"{source.title or 'New chat'} (branch)", model_id=source.model_id,
            system_prompt=source.system_prompt, sampling=source.sampling)
        for kept in path[:upto + 1]:
            stats = {k: v for k, v in dataclasses.asdict(kept).items()
                     if k not in ("id", "conversation_id", "role", "content", "parent_id")}
            copied = self.store.add_message(branch.id, kept.role, kept.content, **stats)
            self.images.files.copy(kept.id, copied.id)  # the same files: a branch shows its images
        if self.cache is not None:
            self.cache.copy_conversation(source.id, branch.id)
        # The copies keep their messages' times, which set the chat's own: it is new now, so it
        # sorts above its source and says so, instead of "1m" below it.
        return self.store.update_conversation(branch.id, title=branch.title)

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

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base import (
    EMPTY, ENDED, NO_LORA, AdapterError, Chunk, ConversationNotFound, Finished, GenerateJob, ImageInput,
    InglenookError, InvalidRequest, JobHandle, LoraSet, PromptProgress, SamplingParams,
)
from ..models import AdapterRegistry
from ..remote import SEPARATOR, RemoteAnswer, RemoteCatalogue
from ..scheduling import Scheduler
from ..store import Conversation, Message, PrefixCache, Store
from ..usage import TERMINAL, WINDOW, ReasoningCount, UsageRecorder
from .titles import title_from

if TYPE_CHECKING:
    from .background import BackgroundWork

log = logging.getLogger(__name__)

#: The key of a conversation's settings that holds its LoRA adapters: [{"id", "scale"}].
LORA_KEY = "lora"
#: Queries shorter than this are searched by their words only (a letter or two means nothing).
MIN_MEANING_QUERY = 3


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
                 model_id: str) -> None:
        self.store = store
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
        self.message = self.store.add_message(self.conversation.id, "assistant", text, **stats)


class ChatService:
    def __init__(self, store: Store, scheduler: Scheduler, default_model: Any, cache: PrefixCache | None = None,
                 usage: UsageRecorder | None = None, adapters: AdapterRegistry | None = None) -> None:
        """``default_model`` is a callable returning the id to use when a chat names none;
        ``cache`` holds the conversations' saved prompt states (deleted with them);
        ``usage`` hears each answer's reasoning token count; ``adapters``: the LoRA adapters
        a conversation may name in its settings."""
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

    def new_conversation(
        self,
        model_id: str | None = None,
        system_prompt: str | None = None,
        sampling: dict[str, Any] | None = None,
        title: str = "New chat",
    ) -> Conversation:
        if sampling:
            SamplingParams.from_dict(sampling)  # reject bad values before they are stored
            self.lora_for(sampling)
        return self.store.create_conversation(title, model_id, system_prompt, sampling)

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation, its messages and its saved prompt states."""
        self.store.delete_conversation(conversation_id)
        if self.cache is not None:
            self.cache.forget_conversation(conversation_id)

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
        """Give a conversation a new title (never an empty one)."""
        title = title.strip()
        if not title:
            raise InvalidRequest("a conversation's title cannot be empty", param="title")
        return self.store.update_conversation(conversation_id, title=title)

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
        return self.store.messages(conversation_id)

    def history(self, conversation: Conversation) -> list[dict[str, str]]:
        """The messages a model sees: the system prompt, then every kept message."""
        messages: list[dict[str, str]] = []
        if conversation.system_prompt:
            messages.append({"role": "system", "content": conversation.system_prompt})
        for message in self.store.messages(conversation.id):
            if message.status == "error":
                continue
            messages.append({"role": message.role, "content": message.content})
        return messages

    def send(self, conversation_id: int, text: str, use_cache: bool = True, images: list[ImageInput] | None = None,
             **sampling_overrides: Any) -> Turn:
        """Commit the user's message, then start the answer. ``use_cache=False`` prefills
        the whole prompt even when a cached state covers part of it (for comparisons).
        ``images`` go with this message to the model's vision projector (``inglenook run
        --image``); they are not stored with the chat yet, so a later turn sees the text only."""
        if not text.strip():
            raise InvalidRequest("the message is empty", param="content")
        conversation = self.store.get_conversation(conversation_id)
        first = not self.store.messages(conversation_id) and conversation.title in ("", "New chat")
        if first:
            conversation = self.store.update_conversation(conversation_id, title=title_from(text))
        self.store.add_message(conversation_id, "user", text)
        turn = self._answer(conversation, sampling_overrides, use_cache, images)
        if first and self.background is not None and self.client == WINDOW:
            self.background.request_title(conversation_id, text)  # written once the machine is idle
        return turn

    def regenerate(self, conversation_id: int, use_cache: bool = True, **sampling_overrides: Any) -> Turn:
        """Drop the last answer and answer the last user message again."""
        conversation = self.store.get_conversation(conversation_id)
        messages = self.store.messages(conversation_id)
        while messages and messages[-1].role == "assistant":
            self.store.delete_messages_from(conversation_id, messages[-1].id)
            messages.pop()
        if not messages:
            raise InvalidRequest("there is no message to answer")
        return self._answer(conversation, sampling_overrides, use_cache)

    def edit_and_resend(self, message_id: int, text: str, use_cache: bool = True, **sampling_overrides: Any) -> Turn:
        """Replace a user message and everything after it, then answer again."""
        message = self.store.get_message(message_id)
        if message.role != "user":
            raise InvalidRequest("only user messages can be edited and resent")
        self.store.delete_messages_from(message.conversation_id, message_id)
        return self.send(message.conversation_id, text, use_cache=use_cache, **sampling_overrides)

    def _answer(self, conversation: Conversation, overrides: dict[str, Any], use_cache: bool = True,
                images: list[ImageInput] | None = None) -> Turn:
        model_id = conversation.model_id or self._default_model()
        settings = {**conversation.sampling, **overrides}
        sampling = SamplingParams.from_dict(settings)
        lora = self.lora_for(settings)
        if lora and SEPARATOR in model_id and self.remotes.owner(model_id) is not None:
            raise AdapterError(f"LoRA adapters run on local models only; {model_id} is answered by a remote engine")
        messages: list[dict[str, Any]] = list(self.history(conversation))
        if images and messages and messages[-1]["role"] == "user":
            parts = [{"type": "image", "image": image} for image in images]
            messages[-1] = {**messages[-1], "content": [*parts, {"type": "text", "text": messages[-1]["content"]}]}
        job = GenerateJob(
            model_id=model_id,
            sampling=sampling,
            messages=messages,
            use_cache=use_cache,
            conversation_id=conversation.id,
            client=self.client,
            lora=lora,
        )
        if SEPARATOR in model_id and self.remotes.owner(model_id) is not None:
            # The same events as a local job; nothing runs here, so there is no usage to count.
            assert job.messages is not None
            return Turn(self.store, conversation, self.remotes.chat(model_id, job.messages, sampling), model_id)
        if self.background is not None:
            self.background.person_started()  # a title being written gives way
        handle = self.scheduler.submit(job)
        turn = Turn(self.store, conversation, handle, model_id)
        if self.usage is not None:
            turn.reasoning = ReasoningCount(self.usage, job)
        return turn

"""Jobs and their handles: what callers submit to the scheduler and how they read results.

A ``GenerateJob`` (a chat turn, a completion, a load), an ``EmbedJob`` or an ``ExclusiveJob``
(the lab's measurements) goes to ``Scheduler.submit``, which returns a ``JobHandle``: its
events (``Chunk``s, then one ``Finished``; or ``Embeddings``) come through the handle's own
queue, to iterate from any thread or to ``poll`` from an event loop with a waker. What the
scheduler needs of a model and of a sequence is in ``scheduling/batched.py``.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .cancel_event import CancelEvent
from .errors import JobCancelled
from .generation_events import Chunk, Finished, GenerationEvent, Usage
from .lora import NO_LORA, LoraSet
from .model_record import ModelRecord
from .sampling import SamplingParams


# Admission priorities, lowest first.
INTERACTIVE, API, BACKGROUND = 0, 1, 2


@dataclass
class GenerateJob:
    """Generate from a chat (``messages``), raw text (``text``) or token ids (``tokens``)."""

    model_id: str
    sampling: SamplingParams = field(default_factory=SamplingParams)
    messages: list[dict[str, Any]] | None = None
    text: str | None = None
    tokens: list[int] | None = None
    tools: list[dict[str, Any]] | None = None
    # Reuse KV state of an earlier prompt with the same prefix (resident, RAM or disk) and
    # save this one's afterwards; False touches no cache at all (comparisons, debugging).
    use_cache: bool = True
    # A chat turn's conversation: its saved state is keyed by it. Jobs without one (the
    # HTTP API) use the content-addressed prefix cache instead.
    conversation_id: int | None = None
    # The beginning of the answer, already written: the prompt ends with it instead of an
    # empty assistant turn, so the model continues it (a cut-off answer's "continue").
    answer_prefix: str | None = None
    # How many leading ``messages`` every conversation with the same documents starts with
    # (their stable block, documents.with_documents): their tokens are also kept as a
    # content-addressed prefix that any conversation starting with them restores, so a
    # document is read once, not once per chat.
    shared_messages: int = 0
    # The documents (their sha256) in those messages: their prefix entry names them, so
    # removing the documents removes it (``PrefixCache.forget_documents``).
    shared_documents: tuple[str, ...] = ()
    # Values the chat template reads besides the messages, e.g. ``enable_thinking``.
    template_options: dict[str, Any] = field(default_factory=dict)
    # Who asked ("window", "terminal", "api:<key or user agent>"): counted in usage, never
    # shown to other clients.
    client: str = ""
    # Admission order: a person at the keyboard first, then API clients, then background
    # work (titles, summaries). None: a chat turn (it has a conversation) is INTERACTIVE,
    # anything else API.
    priority: int | None = None
    # LoRA adapters and scales (lora.LoraSet): they apply to a model's whole context, so
    # jobs with another set wait until the model's running sequences end.
    lora: LoraSet = NO_LORA
    # When ``sampling.max_tokens`` is None, the most tokens to generate, clipped at admission
    # to the context left after the prompt: the HTTP API's default for a client that sends
    # no max_tokens, and the Messages API's max_tokens (clients ask for more than a local
    # context holds). The answer ends with "length" and its usage is what was generated. A
    # ``sampling.max_tokens`` must fit the context instead.
    token_cap: int | None = None
    # Only count the prompt's tokens (the Messages API's count_tokens): the job ends with a
    # ``Finished`` whose usage holds the count, with no decode, no sequence and no usage row.
    count_only: bool = False

    @property
    def rank(self) -> int:
        if self.priority is not None:
            return self.priority
        return INTERACTIVE if self.conversation_id is not None else API

    @property
    def load_only(self) -> bool:
        """An empty token prompt: load the model, generate nothing (``Scheduler.load``)."""
        return self.tokens is not None and not self.tokens


@dataclass
class EmbedJob:
    model_id: str
    inputs: list[str]
    # How a text's token states become one vector: "mean" (the API's, and encoders'), or
    # "last", the state after the last token: what a chat model has made of the whole text
    # (search by meaning asks for it; chat/search.py has the measurements).
    pooling: str = "mean"


@dataclass
class Embeddings:
    vectors: list[list[float]]
    prompt_tokens: int
    model_id: str


@dataclass
class ExclusiveJob:
    """Run ``work`` on the scheduler's thread with no model resident.

    For work that loads models of its own and needs the machine to itself (the
    quantization lab measures one variant per job): it queues like any request, so chats
    and API calls wait at most one such job, and nothing else runs beside it.
    """

    work: Callable[[], Any]
    model_id: str = "exclusive"


@dataclass
class ExclusiveResult:
    value: Any


Job = GenerateJob | EmbedJob | ExclusiveJob

# Model state changes, for status bars: (model_id, state, detail) where state is
# "loading" (detail: fraction 0..1), "loaded", "unloaded" or "failed" (detail: message).
ModelListener = Callable[[str, str, Any], None]
# Hears every generation that ends with its final event (usage accounting); called on the
# worker thread, so it must be quick and must not raise.
FinishedObserver = Callable[[GenerateJob, Finished], None]

# What the scheduler puts last on a handle's queue: the job is over (no more events).
JOB_DONE = object()
# What ``JobHandle.poll`` returns when no event is waiting, and once the job has ended.
EMPTY = object()
ENDED = object()


class JobHandle:
    """A submitted job: iterate its events, or cancel it, from any thread."""

    def __init__(self, job: Job, job_id: int) -> None:
        self.job = job
        self.id = job_id
        # Set by Stop, a closed connection or shutdown; the runtime also hears it mid-decode.
        self.cancel_event = CancelEvent()
        self._events: queue.Queue[Any] = queue.Queue()
        self.submitted_at = time.perf_counter()
        self.record: ModelRecord | None = None  # the job's model, resolved once at admission
        # The prompt's tokens and how many came from a cache, set when its sequence opens
        # (before its first event), for front ends that report them up front.
        self.prompt_usage: Usage | None = None
        self._waker: Callable[[], None] | None = None
        self._wake_on_chunks = True

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def events(self) -> Iterator[GenerationEvent | Embeddings]:
        """Yield events until the job ends; re-raises the job's error in the caller's thread."""
        while True:
            item = self._events.get()
            if item is JOB_DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def __iter__(self) -> Iterator[GenerationEvent | Embeddings]:
        return self.events()

    def result(self) -> tuple[str, Finished]:
        """Wait for a generate job and return its whole text and its ``Finished`` event."""
        parts: list[str] = []
        finished: Finished | None = None
        for event in self.events():
            if isinstance(event, Chunk):
                parts.append(event.text)
            elif isinstance(event, Finished):
                finished = event
        if finished is None:
            raise JobCancelled("the job ended without a result")
        return "".join(parts), finished

    def embeddings(self) -> Embeddings:
        for event in self.events():
            if isinstance(event, Embeddings):
                return event
        raise JobCancelled("the job ended without a result")

    def pending(self) -> bool:
        """Whether an event (or the job's end) waits to be read; reads nothing."""
        return not self._events.empty()

    def set_waker(self, waker: Callable[[], None], *, on_chunks: bool = True) -> None:
        """Have ``waker()`` called (on the scheduler's thread, so it must be quick) after
        each new item: an event loop then reads with ``poll`` instead of parking a thread
        per job in ``events()``. Items that arrived before are announced at once: a job
        can run to its end between its submission and this call.

        With ``on_chunks`` False the answer's text chunks are queued unannounced, and only
        the rest (prompt progress, the end, an error) calls ``waker``: a reader that wants
        the whole answer wakes once at its end, not once a token. Each wake-up is a write to
        the loop's socket and the loop's thread running during the next decode step, on
        cores llama.cpp's threads are using (a 128-token SmolLM2 answer through the server:
        ~150 context switches in the process instead of ~500)."""
        self._wake_on_chunks = on_chunks
        self._waker = waker
        if not self._events.empty():
            waker()

    def poll(self) -> GenerationEvent | Embeddings | object:
        """The next event without waiting, ``EMPTY`` when none is there yet, ``ENDED`` once
        the job is over; re-raises the job's error."""
        try:
            item = self._events.get_nowait()
        except queue.Empty:
            return EMPTY
        if item is JOB_DONE:
            return ENDED
        if isinstance(item, BaseException):
            raise item
        return item

    # worker side
    def _put(self, item: Any) -> None:
        self._events.put(item)
        waker = self._waker
        if waker is not None and (self._wake_on_chunks or not isinstance(item, Chunk)):
            waker()


def describe_job(job: Job) -> str:
    """What a job is doing, in words a crash report can use."""
    if isinstance(job, ExclusiveJob):
        return "measuring a model in the quantization lab"
    if isinstance(job, EmbedJob):
        return f"computing embeddings with {job.model_id}"
    if job.load_only:
        return f"loading the model {job.model_id}"
    if job.conversation_id is not None:
        return f"answering in conversation {job.conversation_id} with {job.model_id}"
    return f"answering a request with {job.model_id}"

"""Background work on a small model that never delays a person's answer: conversation titles,
summaries of long conversations for the sidebar, and the message embeddings that search by
meaning reads (``chat/search``).

Tasks wait in a queue on this room's own thread. One starts only when the scheduler is idle
(nothing running, nothing waiting), as a ``BACKGROUND`` job, which the scheduler admits after
every chat turn and API request. When a person sends a message while one runs
(``person_started``, from ``ChatService``), it is cancelled at the next step and tried again
once the machine is idle. The model is the small one (``routing.small_model_id``): the
``background_model`` setting, else the smallest installed chat model.

A title replaces only the automatic one (the first message, shortened): a title the person
gave in the meantime is kept. A summary is asked for whenever a chat turn ends (the
scheduler's finished-job observer) and written when the conversation has at least
``SUMMARY_MIN_MESSAGES`` messages and ``SUMMARY_EVERY`` new ones since the last summary.
Indexing for search is asked for at the same moment (window turns only: a terminal command
ends with its answer) and once when the app starts (messages written before this version, or
while search was off): it embeds ``INDEX_BATCH`` messages per job until none is left, giving
way to every person's turn like the rest.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..base import BACKGROUND, EmbedJob, Finished, GenerateJob, InglenookError, JobHandle, SamplingParams
from ..scheduling import ChatModels, Scheduler, is_encoder, search_model_id, small_model_id
from ..store import Settings, Store
from ..usage import BACKGROUND_PREFIX, WINDOW
from .search import MeaningSearch
from .summaries import ConversationSummaries
from .titles import TITLE_GRAMMAR, TITLE_PROMPT, clean_title, title_for, title_from, title_source

__all__ = ["TITLE_CLIENT", "BackgroundWork", "clean_summary", "clean_title"]

log = logging.getLogger(__name__)

TITLE_CLIENT = BACKGROUND_PREFIX + "title"
TITLE_MAX_TOKENS = 24  # six words, some of several tokens; the grammar ends the answer sooner
MAX_ATTEMPTS = 3

SUMMARY_CLIENT = BACKGROUND_PREFIX + "summary"
SUMMARY_MAX_TOKENS = 48
SUMMARY_MIN_MESSAGES = 8  # four exchanges: shorter conversations are told by their title
SUMMARY_EVERY = 6  # new messages before a summary is written again
SUMMARY_PROMPT = ("Summarise the conversation below in one sentence of at most 25 words, for a list of "
                  "conversations. Answer with the sentence alone.\n\n{transcript}")
# The transcript a summary reads: each message clipped, the newest kept when it is long.
SUMMARY_MESSAGE_CHARS = 600
SUMMARY_SOURCE_CHARS = 4000
SAVE_WAIT_S = 10.0  # how long a summary waits for the turn's answer to be saved

TitleListener = Callable[[int, str], None]
SummaryListener = Callable[[int, str], None]


class _GaveWay(Exception):
    """A background job was cancelled because a person's answer started."""


@dataclass
class TitleTask:
    conversation_id: int
    text: str  # the whole first message
    attempts: int = 0

    @property
    def first_title(self) -> str:
        """The title the conversation got when it began: still it, the person renamed nothing."""
        return title_from(self.text)


@dataclass
class IndexTask:
    """Embed every message that has no vector yet (one task queued at a time)."""

    attempts: int = 0


@dataclass
class SummaryTask:
    conversation_id: int
    expected_messages: int = 0  # the finished turn's prompt and its answer, once saved
    attempts: int = 0


def transcript(messages: list[tuple[str, str]]) -> str:
    """``(role, text)`` pairs as the summary prompt reads them, newest kept within the budget."""
    lines: list[str] = []
    used = 0
    for role, text in reversed(messages):
        clipped = text.strip()
        if len(clipped) > SUMMARY_MESSAGE_CHARS:
            clipped = clipped[:SUMMARY_MESSAGE_CHARS].rstrip() + "…"
        line = f"{'User' if role == 'user' else 'Assistant'}: {clipped}"
        if lines and used + len(line) > SUMMARY_SOURCE_CHARS:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(reversed(lines))


def clean_summary(raw: str) -> str:
    """The model's answer as one line: its first line, without a "Summary:" label or quotes."""
    line = next((part.strip() for part in raw.strip().splitlines() if part.strip()), "")
    if line.lower().startswith("summary:"):
        line = line[len("summary:"):].strip()
    return line.strip(" \"'*#`“”‘’")[:300]


class BackgroundWork:
    """Queues background tasks and runs them when the scheduler has nothing else to do."""

    def __init__(self, scheduler: Scheduler, store: Store, settings: Callable[[], Settings], models: ChatModels,
                 poll_s: float = 0.05, give_up_after_s: float = 3600.0) -> None:
        self.scheduler = scheduler
        self.store = store
        self._settings = settings
        self.models = models
        self.poll_s = poll_s
        self.give_up_after_s = give_up_after_s
        self.summaries = ConversationSummaries(store)
        self.search = MeaningSearch(store, lambda model_id: is_encoder(models, model_id))
        self._tasks: queue.Queue[TitleTask | SummaryTask | IndexTask | None] = queue.Queue()
        self._index_queued = threading.Event()
        self._index_active = threading.Event()  # an index task is queued or running
        self._running: JobHandle | None = None
        self._lock = threading.Lock()
        self._listeners: list[TitleListener] = []
        self._summary_listeners: list[SummaryListener] = []
        self._closed = threading.Event()
        self.interruptions = 0  # background jobs cancelled because a person started an answer
        self._thread = threading.Thread(target=self._run, name="inglenook-background", daemon=True)
        self._thread.start()
        scheduler.add_finished_observer(self._turn_finished)

    def add_summary_listener(self, listener: SummaryListener) -> None:
        """``listener(conversation_id, summary)`` hears each new summary (on this room's thread)."""
        self._summary_listeners.append(listener)

    def request_summary(self, conversation_id: int, expected_messages: int = 0) -> None:
        """Summarise the conversation once the machine is idle, if it is long enough by then
        (waiting a little for ``expected_messages`` to be saved)."""
        if self._settings().background_summaries and not self._closed.is_set():
            self._tasks.put(SummaryTask(conversation_id, expected_messages))

    def _turn_finished(self, job: GenerateJob, finished: Finished) -> None:
        """The scheduler's observer (its worker thread): a chat turn ended; only queues. The
        answer is saved by whoever reads the turn, just after this: the task waits for it."""
        if job.conversation_id is not None and job.rank != BACKGROUND and finished.finish_reason != "cancelled":
            said = sum(1 for m in job.messages or [] if m.get("role") in ("user", "assistant") and m.get("content"))
            self.request_summary(job.conversation_id, said + 1)
            if job.client == WINDOW:  # a terminal command ends now: its chat is indexed when the app starts
                self.request_index()

    def request_index(self) -> None:
        """Embed the messages not yet searchable by meaning, once the machine is idle."""
        if self._settings().background_search and not self._closed.is_set() and not self._index_queued.is_set():
            with self._lock:
                self._index_queued.set()
                self._index_active.set()
            self._tasks.put(IndexTask())

    @property
    def indexing(self) -> bool:
        """True from a request to index until the messages it found are embedded (or it gave up)."""
        return self._index_active.is_set()

    def search_model(self) -> str | None:
        return search_model_id(self._settings(), self.models)

    def related(self, query: str) -> list[tuple[int, float]]:
        """``(conversation_id, score)`` of conversations close in meaning to ``query``; none when
        no model can embed or embedding fails (text search still answers)."""
        model_id = self.search_model()
        if model_id is None or not self._settings().background_search:
            return []
        try:
            return self.search.related(query, model_id, self.embed_now)
        except InglenookError as exc:
            log.info("search by meaning is unavailable: %s", exc)
            return []

    def embed_now(self, model_id: str, texts: list[str]) -> list[list[float]]:
        """Embed for a person waiting (a search query): an ordinary job, not a background one."""
        return self.scheduler.submit(EmbedJob(model_id, texts, self.search.pooling_for(model_id))).embeddings().vectors

    def add_title_listener(self, listener: TitleListener) -> None:
        """``listener(conversation_id, title)`` hears each new title (on this room's thread)."""
        self._listeners.append(listener)

    def request_title(self, conversation_id: int, text: str) -> None:
        if self._settings().background_titles and not self._closed.is_set():
            self._tasks.put(TitleTask(conversation_id, text))

    def person_started(self) -> None:
        """A person's answer is starting: the background job running now gives way."""
        with self._lock:
            running = self._running
        if running is not None and not running.cancelled:
            running.cancel()
            self.interruptions += 1

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until every queued task ended (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._tasks.unfinished_tasks == 0:
                return True
            time.sleep(0.02)
        return False

    def close(self) -> None:
        self._closed.set()
        self.person_started()
        self._tasks.put(None)
        self._thread.join(5.0)

    # -- the background thread ------------------------------------------------------------

    def _run(self) -> None:
        while (task := self._tasks.get()) is not None:
            kind = {TitleTask: "title", SummaryTask: "summary", IndexTask: "search index"}[type(task)]
            try:
                if isinstance(task, TitleTask):
                    self._title(task)
                elif isinstance(task, SummaryTask):
                    self._summary(task)
                else:
                    self._index(task)
            except InglenookError as exc:
                where = "" if isinstance(task, IndexTask) else f" for conversation {task.conversation_id}"
                log.info("no %s%s: %s", kind, where, exc)
            except Exception:  # a bug here must not end background work for the session
                log.exception("writing a %s failed", kind)
            finally:
                self._tasks.task_done()
        self._tasks.task_done()

    def _wait_until_idle(self) -> bool:
        """True once nothing runs or waits in the scheduler; False on shutdown or after giving up."""
        deadline = time.monotonic() + self.give_up_after_s
        while not self._closed.is_set() and time.monotonic() < deadline:
            if self.scheduler.heartbeat() is None and self.scheduler.queue_depth == 0:
                return True
            time.sleep(self.poll_s)
        return False

    def _title(self, task: TitleTask) -> None:
        while task.attempts < MAX_ATTEMPTS:
            model_id = small_model_id(self.models, self._settings().background_model)
            if model_id is None or not self._wait_until_idle():
                return
            task.attempts += 1
            text, finished = self._generate(model_id, TITLE_PROMPT.format(text=title_source(task.text)),
                                            grammar=TITLE_GRAMMAR)
            if finished is not None and finished.finish_reason != "cancelled":
                self._apply(task, title_for(text, task.text))
                return
            log.debug("a title gave way to a person's answer; trying again when idle")

    def _summary(self, task: SummaryTask) -> None:
        while task.attempts < MAX_ATTEMPTS:
            model_id = small_model_id(self.models, self._settings().background_model)
            if model_id is None or not self._wait_until_idle():
                return
            messages = self._saved_messages(task)
            done = self.summaries.get(task.conversation_id)
            if len(messages) < SUMMARY_MIN_MESSAGES or (done and len(messages) - done.messages < SUMMARY_EVERY):
                return  # short, or summarised recently (another turn's task got here first)
            task.attempts += 1
            prompt = SUMMARY_PROMPT.format(transcript=transcript(messages))
            text, finished = self._generate(model_id, prompt, SUMMARY_CLIENT, SUMMARY_MAX_TOKENS)
            if finished is not None and finished.finish_reason != "cancelled":
                summary = clean_summary(text)
                if summary:
                    self.summaries.put(task.conversation_id, summary, len(messages))
                    self._tell(self._summary_listeners, task.conversation_id, summary)
                return
            log.debug("a summary gave way to a person's answer; trying again when idle")

    def _index(self, task: IndexTask) -> None:
        self._index_queued.clear()  # messages saved from now on are picked up by this run or the next
        try:
            self._index_batches(task)
        finally:
            with self._lock:
                if not self._index_queued.is_set():  # no other run queued meanwhile: indexing is over
                    self._index_active.clear()

    def _index_batches(self, task: IndexTask) -> None:
        while task.attempts < MAX_ATTEMPTS and self._settings().background_search:
            model_id = self.search_model()
            if model_id is None or not self._wait_until_idle():
                return
            batch = self.search.pending(model_id)
            if not batch or not self._settings().background_search:  # switched off while waiting
                return
            try:
                self.search.index(model_id, batch, self._embed_in_background)
            except _GaveWay:
                task.attempts += 1
                log.debug("indexing gave way to a person's answer; trying again when idle")

    def _embed_in_background(self, model_id: str, texts: list[str]) -> list[list[float]]:
        handle = self.scheduler.submit(EmbedJob(model_id, texts, self.search.pooling_for(model_id)))
        with self._lock:
            self._running = handle
        try:
            return handle.embeddings().vectors
        except InglenookError:
            if handle.cancelled:
                raise _GaveWay() from None
            raise
        finally:
            with self._lock:
                self._running = None

    def _saved_messages(self, task: SummaryTask) -> list[tuple[str, str]]:
        """The conversation's messages, once the finished turn's answer is among them (or
        after ``SAVE_WAIT_S``: an answer that failed is never saved)."""
        deadline = time.monotonic() + SAVE_WAIT_S
        while True:
            messages = [(m.role, m.content) for m in self.store.messages(task.conversation_id)
                        if m.role in ("user", "assistant") and m.content.strip()]
            if len(messages) >= task.expected_messages or time.monotonic() > deadline or self._closed.is_set():
                return messages
            time.sleep(self.poll_s)

    def _generate(self, model_id: str, prompt: str, client: str = TITLE_CLIENT,
                  max_tokens: int = TITLE_MAX_TOKENS, grammar: str | None = None) -> tuple[str, Finished | None]:
        job = GenerateJob(
            model_id=model_id, messages=[{"role": "user", "content": prompt}],
            sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens, grammar=grammar), use_cache=False,
            client=client, priority=BACKGROUND,
        )
        handle = self.scheduler.submit(job)
        with self._lock:
            self._running = handle
        try:
            return handle.result()
        except InglenookError:
            if handle.cancelled:
                return "", None
            raise
        finally:
            with self._lock:
                self._running = None

    def _apply(self, task: TitleTask, title: str) -> None:
        conversation = self.store.get_conversation(task.conversation_id)
        if not title or title == conversation.title or conversation.title != task.first_title:
            return  # nothing new, or renamed by the person meanwhile: theirs stays
        self.store.update_conversation(task.conversation_id, touch=False, title=title)
        self._tell(self._listeners, task.conversation_id, title)

    @staticmethod
    def _tell(listeners: list[Callable[[int, str], None]], conversation_id: int, text: str) -> None:
        for listener in list(listeners):
            try:
                listener(conversation_id, text)
            except Exception:
                log.exception("a background listener failed")

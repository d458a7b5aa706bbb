"""Background work on a small model that never delays a person's answer: conversation titles.

Tasks wait in a queue on this room's own thread. One starts only when the scheduler is idle
(nothing running, nothing waiting), as a ``BACKGROUND`` job, which the scheduler admits after
every chat turn and API request. When a person sends a message while one runs
(``person_started``, from ``ChatService``), it is cancelled at the next step and tried again
once the machine is idle. The model is the small one (``routing.small_model_id``): the
``background_model`` setting, else the smallest installed chat model.

A title replaces only the automatic one (the first message, shortened): a title the person
gave in the meantime is kept.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .chat import title_from
from .errors import InglenookError
from .routing import ChatModels, small_model_id
from .runtime import Finished
from .sampling import SamplingParams
from .scheduler import BACKGROUND, GenerateJob, JobHandle, Scheduler
from .settings import Settings
from .store import Store
from .usage import BACKGROUND_PREFIX

log = logging.getLogger(__name__)

TITLE_CLIENT = BACKGROUND_PREFIX + "title"
TITLE_MAX_TOKENS = 16
MAX_ATTEMPTS = 3
TITLE_PROMPT = ("Write a title of at most six words for a conversation that begins with the message below. "
                "Answer with the title alone.\n\nMessage: {text}")
# Titles are written from the first message only, and at most this much of it.
MAX_SOURCE_CHARS = 1500

TitleListener = Callable[[int, str], None]


@dataclass
class TitleTask:
    conversation_id: int
    text: str
    attempts: int = 0


def clean_title(raw: str) -> str:
    """The model's answer as a title: its first line, without a "Title:" label or quotes."""
    line = next((part.strip() for part in raw.strip().splitlines() if part.strip()), "")
    if line.lower().startswith("title:"):
        line = line[len("title:"):].strip()
    marks = " \"'*#`“”‘’"
    line = line.strip(marks).rstrip(".").strip(marks)
    return title_from(line) if line else ""


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
        self._tasks: queue.Queue[TitleTask | None] = queue.Queue()
        self._running: JobHandle | None = None
        self._lock = threading.Lock()
        self._listeners: list[TitleListener] = []
        self._closed = threading.Event()
        self.interruptions = 0  # background jobs cancelled because a person started an answer
        self._thread = threading.Thread(target=self._run, name="inglenook-background", daemon=True)
        self._thread.start()

    def add_title_listener(self, listener: TitleListener) -> None:
        """``listener(conversation_id, title)`` hears each new title (on this room's thread)."""
        self._listeners.append(listener)

    def request_title(self, conversation_id: int, text: str) -> None:
        if self._settings().background_titles and not self._closed.is_set():
            self._tasks.put(TitleTask(conversation_id, text[:MAX_SOURCE_CHARS]))

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
            try:
                self._title(task)
            except InglenookError as exc:
                log.info("no title for conversation %d: %s", task.conversation_id, exc)
            except Exception:  # a bug here must not end background work for the session
                log.exception("writing a title failed")
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
            model_id = small_model_id(self._settings(), self.models, self._settings().background_model)
            if model_id is None or not self._wait_until_idle():
                return
            task.attempts += 1
            text, finished = self._generate(model_id, task.text)
            if finished is not None and finished.finish_reason != "cancelled":
                self._apply(task, clean_title(text))
                return
            log.debug("a title gave way to a person's answer; trying again when idle")

    def _generate(self, model_id: str, text: str) -> tuple[str, Finished | None]:
        job = GenerateJob(
            model_id=model_id, messages=[{"role": "user", "content": TITLE_PROMPT.format(text=text)}],
            sampling=SamplingParams(temperature=0.0, max_tokens=TITLE_MAX_TOKENS), use_cache=False,
            client=TITLE_CLIENT, priority=BACKGROUND,
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
        if not title:
            return
        conversation = self.store.get_conversation(task.conversation_id)
        if conversation.title != title_from(task.text):
            return  # renamed by the person meanwhile: theirs stays
        self.store.update_conversation(task.conversation_id, title=title)
        for listener in list(self._listeners):
            try:
                listener(task.conversation_id, title)
            except Exception:
                log.exception("a title listener failed")

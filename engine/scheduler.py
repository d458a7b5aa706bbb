"""The scheduler: the one owner of loaded models.

Every request — a chat turn from the GUI or the terminal, a call to the HTTP API — is a
job submitted here from any thread. A worker thread runs jobs one at a time, loading the
model a job names (just in time) and unloading models that sit idle. Each job streams its
events back through its own queue and carries a cancel event checked between decode
steps. Callers see only ``submit`` and ``JobHandle``; running several sequences in one
batch later changes this module, not them.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .cache import PrefixCache
from .errors import InglenookError, JobCancelled, ModelLoadError, QueueFull
from .registry import ModelRecord
from .runtime import (
    Chunk,
    Finished,
    GenerationEvent,
    LoadedModel,
    LoadOptions,
    Timings,
    Usage,
)
from .sampling import SamplingParams

log = logging.getLogger(__name__)


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


@dataclass
class EmbedJob:
    model_id: str
    inputs: list[str]


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

_DONE = object()


class JobHandle:
    """A submitted job: iterate its events, or cancel it, from any thread."""

    def __init__(self, job: Job, job_id: int) -> None:
        self.job = job
        self.id = job_id
        self.cancel_event = threading.Event()
        self._events: queue.Queue[Any] = queue.Queue()
        self.submitted_at = time.perf_counter()

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def events(self) -> Iterator[GenerationEvent | Embeddings]:
        """Yield events until the job ends; re-raises the job's error in the caller's thread."""
        while True:
            item = self._events.get()
            if item is _DONE:
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

    # worker side
    def _put(self, item: Any) -> None:
        self._events.put(item)


def describe_job(job: Job) -> str:
    """What a job is doing, in words a crash report can use."""
    if isinstance(job, ExclusiveJob):
        return "measuring a model in the quantization lab"
    if isinstance(job, EmbedJob):
        return f"computing embeddings with {job.model_id}"
    if job.tokens is not None and not job.tokens:
        return f"loading the model {job.model_id}"
    if job.conversation_id is not None:
        return f"answering in conversation {job.conversation_id} with {job.model_id}"
    return f"answering a request with {job.model_id}"


class Scheduler:
    """Owns loaded models and runs jobs. Create one per process and ``close()`` it."""

    def __init__(
        self,
        resolve: Callable[[str], ModelRecord],
        load_options: Callable[[], LoadOptions],
        idle_unload_s: float = 600.0,
        max_queue: int = 64,
        loader: Callable[..., LoadedModel] = LoadedModel,
        cache: PrefixCache | None = None,
        activity: Callable[[str], None] | None = None,
    ) -> None:
        """``loader(record, options, progress=...)`` builds a loaded model; tests pass a fake.
        ``cache`` restores saved prompt states before a job and saves them after it.
        ``activity`` hears what the worker is doing ("" when idle), for the crash guard."""
        self._activity = activity or (lambda _text: None)
        self._resolve = resolve
        self.cache = cache
        self._loader = loader
        self._load_options = load_options
        self.idle_unload_s = idle_unload_s
        self._queue: queue.Queue[JobHandle | None] = queue.Queue(maxsize=max_queue)
        self._ids = itertools.count(1)
        self._models: dict[tuple[str, bool], LoadedModel] = {}
        self._last_used: dict[tuple[str, bool], float] = {}
        self._listeners: list[ModelListener] = []
        self._lock = threading.RLock()
        self._current: JobHandle | None = None
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="inglenook-scheduler", daemon=True)
        self._worker.start()

    # -- public ---------------------------------------------------------------------

    def submit(self, job: Job) -> JobHandle:
        if self._closed:
            raise InglenookError("the engine is shutting down")
        handle = JobHandle(job, next(self._ids))
        try:
            self._queue.put_nowait(handle)
        except queue.Full:
            raise QueueFull("the server is busy; too many requests are waiting", retry_after_s=2) from None
        return handle

    def add_listener(self, listener: ModelListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: ModelListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def loaded_models(self) -> list[LoadedModel]:
        with self._lock:
            return list(self._models.values())

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    def load(self, model_id: str) -> JobHandle:
        """Load a model ahead of time (the GUI's picker); returns when queued."""
        return self.submit(GenerateJob(model_id=model_id, tokens=[]))

    def run_exclusive(self, work: Callable[[], Any]) -> Any:
        """Run ``work`` as an ``ExclusiveJob`` and return its value (or raise its error).

        Blocks the caller until the job has run; never call it from the scheduler's thread.
        """
        for event in self.submit(ExclusiveJob(work)).events():
            if isinstance(event, ExclusiveResult):
                return event.value
        raise JobCancelled("the engine shut down before the job ran")

    def unload_all(self) -> None:
        with self._lock:
            for key in list(self._models):
                self._unload(key)

    def close(self, timeout: float = 10.0) -> None:
        """Cancel the running job, drop queued ones, unload everything, stop the worker."""
        if self._closed:
            return
        self._closed = True
        current = self._current
        if current is not None:
            current.cancel()
        while True:
            try:
                pending = self._queue.get_nowait()
            except queue.Empty:
                break
            if pending is not None:
                # A queued job ends like a stopped one, so streams close cleanly.
                pending.cancel()
                pending._put(Finished("cancelled", Usage(), Timings(), pending.job.model_id))
                pending._put(_DONE)
        self._queue.put(None)
        self._worker.join(timeout)
        self.unload_all()

    # -- worker ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                handle = self._queue.get(timeout=1.0)
            except queue.Empty:
                self._unload_idle()
                continue
            if handle is None:
                return
            self._current = handle
            after: Callable[[], None] | None = None
            try:
                self._activity(describe_job(handle.job))
                after = self._execute(handle)
            except InglenookError as exc:
                handle._put(exc)
            except Exception as exc:  # an engine bug must not kill the worker
                log.exception("job %d failed", handle.id)
                handle._put(InglenookError(f"internal error: {exc.__class__.__name__}"))
            finally:
                self._current = None
                handle._put(_DONE)
            self._activity("")
            if after is not None:
                # Work that needs the model's state but not the caller's attention (saving the
                # prompt cache): after the answer is delivered, before the next job runs.
                try:
                    after()
                except Exception:
                    log.exception("saving the prompt state failed")

    def _execute(self, handle: JobHandle) -> Callable[[], None] | None:
        job = handle.job
        if handle.cancelled:
            handle._put(Finished("cancelled", Usage(), Timings(), job.model_id))
            return
        if isinstance(job, ExclusiveJob):
            self.unload_all()
            handle._put(ExclusiveResult(job.work()))
            return None
        embeddings = isinstance(job, EmbedJob)
        model = self._model_for(job.model_id, embeddings)
        if isinstance(job, EmbedJob):
            vectors, used = [], 0
            for text in job.inputs:
                if handle.cancelled:
                    return
                vectors.append(model.embed(text))
                used += len(model.tokenize(text))
            handle._put(Embeddings(vectors, used, model.record.id))
            return
        prompt = self._prompt_tokens(model, job)
        if not prompt and job.tokens is not None:
            return  # a load-only job
        cache = self.cache if job.use_cache else None
        restore_s, reuse = 0.0, job.use_cache
        if cache is not None:
            started = time.perf_counter()
            try:
                cache.restore(model, prompt, job.conversation_id)
            except Exception:  # a cache fault costs a full prefill, never the answer
                log.exception("restoring a saved prompt state failed; prefilling instead")
                reuse = False
            restore_s = time.perf_counter() - started
        finished = None
        for event in model.generate(prompt, job.sampling, handle.cancel_event, reuse_kv=reuse):
            if isinstance(event, Finished):
                finished = event
                # Time spent restoring is part of the wait for the first token.
                event.timings.ttft_s += restore_s
                event.timings.prompt_s += restore_s
            handle._put(event)
        if cache is not None and finished is not None:
            cache.reserve_save()
            return lambda: cache.save(model, len(prompt), job.conversation_id, reserved=True)
        return None

    @staticmethod
    def _prompt_tokens(model: LoadedModel, job: GenerateJob) -> list[int]:
        if job.messages is not None:
            return model.chat_tokens(job.messages, tools=job.tools)
        if job.text is not None:
            return model.tokenize(job.text, add_special=True, parse_special=False)
        return list(job.tokens or [])

    def _model_for(self, model_id: str, embeddings: bool) -> LoadedModel:
        record = self._resolve(model_id)
        key = (record.id, embeddings)
        with self._lock:
            model = self._models.get(key)
            if model is not None and model.record.fingerprint != record.fingerprint:
                self._unload(key)  # the file changed on disk
                model = None
            if model is None:
                # One resident model at a time keeps memory predictable on small machines.
                for other in list(self._models):
                    self._unload(other)
                model = self._load(record, embeddings)
                self._models[key] = model
            self._last_used[key] = time.monotonic()
            return model

    def _load(self, record: ModelRecord, embeddings: bool) -> LoadedModel:
        options = self._load_options()
        if embeddings:
            options = LoadOptions(**{**options.__dict__, "embeddings": True})
        self._notify(record.id, "loading", 0.0)
        self._activity(f"loading the model {record.id}")
        try:
            model = self._loader(record, options, progress=lambda f: self._notify(record.id, "loading", f))
        except ModelLoadError as exc:
            self._notify(record.id, "failed", str(exc))
            raise
        self._notify(record.id, "loaded", model)
        self._activity(describe_job(self._current.job) if self._current is not None else "")
        return model

    def _unload(self, key: tuple[str, bool]) -> None:
        model = self._models.pop(key, None)
        self._last_used.pop(key, None)
        if model is not None:
            model.close()
            log.info("unloaded %s", key[0])
            self._notify(key[0], "unloaded", None)

    def _unload_idle(self) -> None:
        if self.idle_unload_s <= 0:
            return
        now = time.monotonic()
        with self._lock:
            for key, used in list(self._last_used.items()):
                if now - used > self.idle_unload_s:
                    log.info("unloading %s after %.0fs idle", key[0], now - used)
                    self._unload(key)

    def _notify(self, model_id: str, state: str, detail: Any) -> None:
        for listener in list(self._listeners):
            try:
                listener(model_id, state, detail)
            except Exception:
                log.exception("model listener failed")

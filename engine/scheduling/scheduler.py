"""The scheduler: the one owner of loaded models, and the step loop that runs them.

Every request — a chat turn from the GUI or the terminal, a call to the HTTP API — is a
job submitted here from any thread. A worker thread admits jobs into the sequences of the
resident model (loading the model a job names just in time, unloading models that sit
idle) and advances all admitted sequences together, one batched decode per step. Each job
streams its events back through its own queue and carries a cancel event checked at every
step. Callers see only ``submit`` and ``JobHandle`` (``jobs.py``).

Here: the loop and its order rules (a chat turn before API jobs, a landed load installed at
a pass's start, one adapter set per step). How a job's sequence opens — its prompt's tokens,
its shared prefix, the saved state that covers it — is ``admission``'s; the resident models
and their loads are ``resident_models``'; embedding jobs are ``embedding_jobs``'; the chunk
a prompt is fed in while answers stream is ``step_costs``'.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..base import (
    API, JOB_DONE, EmbedJob, Embeddings, ExclusiveJob, ExclusiveResult, Finished, FinishedObserver,
    GenerateJob, InglenookError, InvalidRequest, Job, JobCancelled, JobHandle, ModelListener,
    ModelRecord, QueueFull, Timings, Usage, describe_job,
)
from ..runtime import DECODE, LoadOptions, LoadedModel
from ..store import PrefixCache
from .admission import Running, open_job, prompt_tokens, save_prompt_state
from .batched import BatchedModel
from .embedding_jobs import EmbeddingJobs
from .model_pool import Key, auto_budget_bytes, estimate_resident_bytes
from .resident_models import BLOCK, WAIT, ResidentModels
from .step_costs import StepCosts

log = logging.getLogger(__name__)


def _end_cancelled(handle: JobHandle) -> None:
    """End a job that never ran like a stopped one, so its stream closes cleanly."""
    handle._put(Finished("cancelled", Usage(), Timings(), handle.job.model_id))
    handle._put(JOB_DONE)


@dataclass(frozen=True)
class Heartbeat:
    """The worker's current unit of work (a step, a prompt's preparation, a load) and how
    long it has run. A unit that runs far longer than any healthy one means the engine is
    stuck inside it, and everything queued behind it waits."""

    busy_s: float
    doing: str


# What admission decided for a waiting job: started, or ended (done, failed, cancelled), so
# it leaves the queue; or WAIT, or BLOCK (``resident_models``).
ADMITTED = "admitted"

ModelKey = Key


class Scheduler:
    """Owns loaded models and runs jobs. Create one per process and ``close()`` it.

    The worker is a step loop: it admits waiting jobs into the free sequences of resident
    models (chat turns from the window or terminal before API requests), then advances
    every admitted sequence, one batched ``step`` per model in turn. Long prompts enter in
    chunks of ``prefill_chunk`` tokens while other sequences decode, so their streams keep
    flowing. Several models stay resident within the memory budget (``model_pool``); one
    that is not resident loads on the loader thread while the loop keeps serving the others.
    Work that needs the machine alone (the lab) waits until the running sequences finish.
    """

    def __init__(
        self,
        resolve: Callable[[str], ModelRecord],
        load_options: Callable[[], LoadOptions],
        idle_unload_s: float = 600.0,
        max_queue: int = 64,
        loader: Callable[..., BatchedModel] = LoadedModel,
        cache: PrefixCache | None = None,
        activity: Callable[[str], None] | None = None,
        prefill_chunk: int = 64,
        memory_budget: Callable[[], int] | None = None,
        estimate: Callable[[ModelRecord, LoadOptions], int] = estimate_resident_bytes,
    ) -> None:
        """``loader(record, options, progress=...)`` builds a loaded model; tests pass a fake
        (or wrap the real one). ``cache`` restores saved prompt states before a job and saves
        them after it. ``activity`` hears what the worker is doing ("" when idle), for the
        crash guard. ``prefill_chunk``: the most prompt tokens per step while other sequences
        decode (fewer when the measured cost says so). ``memory_budget()``: bytes the resident
        models may take together (default: a share of RAM); ``estimate(record, options)``:
        what one would take, asked before it loads."""
        self._activity = activity or (lambda _text: None)
        self._resolve = resolve
        self.cache = cache
        self.idle_unload_s = idle_unload_s
        self.prefill_chunk = prefill_chunk
        self._costs: dict[str, StepCosts] = {}
        self._max_queue = max_queue
        self._waiting: list[JobHandle] = []
        self._running: list[Running] = []
        self._embeddings = EmbeddingJobs()
        self._wake = threading.Condition()
        self._ids = itertools.count(1)
        self._closed = False
        self._models = ResidentModels(loader, load_options, estimate, memory_budget or auto_budget_bytes, self._wake,
                                      lambda: self._closed, self._report_activity)
        self._unload_requests: list[threading.Event] = []
        # Per admission pass: models a job is waiting to switch to another LoRA set, and that
        # set; later jobs of the running set wait too, so the switch is not starved.
        self._lora_held: dict[int, str] = {}
        self._idle_checked = time.monotonic()
        self._finished_observers: list[FinishedObserver] = []
        # (monotonic start, description) of the worker's unit of work; None while idle or
        # while exclusive work (the lab's long measurements) has the worker.
        self._unit: tuple[float, str] | None = None
        self._worker = threading.Thread(target=self._run, name="inglenook-scheduler", daemon=True)
        self._worker.start()

    # -- public ---------------------------------------------------------------------

    @property
    def loader(self) -> Callable[..., BatchedModel]:
        """What builds a loaded model: ``loader(record, options, progress=...)``."""
        return self._models.loader

    @loader.setter
    def loader(self, loader: Callable[..., BatchedModel]) -> None:
        self._models.loader = loader

    def submit(self, job: Job) -> JobHandle:
        return self.submit_many([job])[0]

    def submit_many(self, jobs: Iterable[Job]) -> list[JobHandle]:
        """Queue ``jobs`` together (a request's ``n`` choices): all or none, and admitted in
        the same pass, so they share every step from the first."""
        if self._closed:
            raise InglenookError("the engine is shutting down")
        handles = [JobHandle(job, next(self._ids)) for job in jobs]
        if len(handles) > self._max_queue:
            # It would not fit even in an empty queue: retrying can never help.
            raise InvalidRequest(
                f"one request may ask for at most {self._max_queue} completions (prompts × n); "
                f"this one asks for {len(handles)}", param="n",
            )
        with self._wake:
            if len(self._waiting) + len(handles) > self._max_queue:
                raise QueueFull("the server is busy; too many requests are waiting", retry_after_s=2)
            self._waiting.extend(handles)
            self._wake.notify()
        return handles

    def add_finished_observer(self, observer: FinishedObserver) -> None:
        self._finished_observers.append(observer)

    def add_listener(self, listener: ModelListener) -> None:
        self._models.listeners.append(listener)

    def remove_listener(self, listener: ModelListener) -> None:
        if listener in self._models.listeners:
            self._models.listeners.remove(listener)

    def loaded_models(self) -> list[BatchedModel]:
        """The resident models, most recently used first. Never waits for a load."""
        return self._models.models()

    def loading_models(self) -> list[str]:
        """Ids of the models loading now."""
        return self._models.loading_ids()

    @property
    def queue_depth(self) -> int:
        return len(self._waiting)

    @property
    def max_queue(self) -> int:
        """The most jobs that may wait at once (also the most one request may submit)."""
        return self._max_queue

    def heartbeat(self) -> Heartbeat | None:
        """The longest-running unit of work now (the worker's, or a load's) and for how long;
        None when both are idle."""
        units = [unit for unit in (self._unit, self._models.load_unit) if unit is not None]
        if not units:
            return None
        started, doing = min(units)
        return Heartbeat(time.monotonic() - started, doing)

    def _beat(self, doing: str | None) -> None:
        self._unit = None if doing is None else (time.monotonic(), doing)

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
        """Unload every model not answering now. From another thread, the worker does it
        between steps (a model is never closed under a running step) and this waits."""
        if threading.current_thread() is self._worker or not self._worker.is_alive():
            self._unload_idle_models()
            return
        done = threading.Event()
        with self._wake:
            self._unload_requests.append(done)
            self._wake.notify()
        done.wait(timeout=60)

    def close(self, timeout: float = 10.0) -> None:
        """Cancel running jobs, end queued ones, unload everything, stop the worker."""
        if self._closed:
            return
        with self._wake:
            self._closed = True
            for running in list(self._running):
                running.handle.cancel()
            self._embeddings.cancel_all()
            pending, self._waiting = self._waiting, []
            self._wake.notify()
        for handle in pending:
            handle.cancel()
            _end_cancelled(handle)
        self._worker.join(timeout)
        if self._worker.is_alive():
            # Still inside a step: closing its model now would free memory under llama.cpp.
            log.warning("the scheduler did not stop within %.0fs; models stay loaded until exit", timeout)
            return
        self._models.take_loaded()
        for key in self._models.keys():
            self._models.unload(key)

    # -- the step loop --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._models.take_loaded()
            self._serve_unload_requests()
            with self._wake:
                if self._closed and not self._running and not self._embeddings:
                    self._beat(None)
                    return
                if not self._running and not self._waiting and not self._embeddings:
                    self._beat(None)
                    self._page_in_spare()
                    if not self._wake.wait(timeout=1.0):
                        self._unload_idle()
                    continue
            self._admit()
            if self._running or self._embeddings:
                if self._running:
                    self._beat(f"a step of {len(self._running)} sequence(s): {describe_job(self._running[0].handle.job)}")
                    self._step()
                    self._page_in_spare()
                if self._embeddings:
                    self._embeddings.embed_next(lambda job: self._beat(describe_job(job)), self._embedding_ended)
                if time.monotonic() - self._idle_checked > 1.0:
                    self._unload_idle()
            else:
                # Everything waiting waits for a load: sleep until it lands (or a job comes).
                self._beat(None)
                with self._wake:
                    if not self._models.has_landed() and not self._closed:
                        self._wake.wait(timeout=0.1)

    def _waiting_in_order(self) -> list[JobHandle]:
        """Waiting jobs in admission order: by ``GenerateJob.rank`` (chat turns before API
        requests before background work), first come first served within each. Cancelled
        ones end here."""
        with self._wake:
            for handle in [h for h in self._waiting if h.cancelled]:
                self._waiting.remove(handle)
                _end_cancelled(handle)
            # sorted() is stable: FIFO within a priority.
            return sorted(self._waiting, key=lambda h: h.job.rank if isinstance(h.job, GenerateJob) else API)

    def _admit(self) -> None:
        """Admit waiting jobs that can start now, in order; skip those that wait for their
        model's load or a free sequence; stop at one that needs running work to end."""
        self._lora_held = {}
        for handle in self._waiting_in_order():
            self._beat(describe_job(handle.job))
            try:
                decision = self._try_admit(handle)
            except JobCancelled:
                decision = ADMITTED  # cancelled while its prompt was being prepared
                _end_cancelled(handle)
            except InglenookError as exc:
                decision = ADMITTED
                handle._put(exc)
                handle._put(JOB_DONE)
            except Exception as exc:  # an engine bug must not kill the worker
                decision = ADMITTED
                log.exception("job %d failed", handle.id)
                handle._put(InglenookError(f"internal error: {exc.__class__.__name__}"))
                handle._put(JOB_DONE)
            if decision == BLOCK:
                return
            if decision == WAIT:
                continue
            with self._wake:
                if handle in self._waiting:
                    self._waiting.remove(handle)
            self._report_activity()

    def _try_admit(self, handle: JobHandle) -> str:
        """Start ``handle`` if it can start now (``ADMITTED``); jobs that end at once
        (loads, embeddings, exclusive work, errors) are finished here."""
        job = handle.job
        if isinstance(job, ExclusiveJob):
            if self._running or self._models.loading():
                return BLOCK  # needs the machine to itself
            self._activity(describe_job(job))
            self._run_whole(handle)
            return ADMITTED
        if handle.record is None:
            handle.record = self._resolve(job.model_id)
        record = handle.record
        embeddings = job.pooling if isinstance(job, EmbedJob) else False
        model = self._models.model_or_load(handle, record, embeddings, self._busy_keys())
        if isinstance(model, str):
            return model
        if isinstance(job, EmbedJob) and not job.inputs:
            handle._put(Embeddings([], 0, record.id))
            handle._put(JOB_DONE)
            return ADMITTED
        if isinstance(job, EmbedJob):
            self._embeddings.add(handle, model)
            self._report_activity()
            return ADMITTED
        if job.load_only:
            handle._put(JOB_DONE)
            return ADMITTED
        if job.count_only:
            # Tokenizing needs the vocabulary, not a free sequence: it runs between steps.
            counted = len(prompt_tokens(model, job, handle.cancel_event))
            handle._put(Finished("stop", Usage(prompt_tokens=counted), Timings(), record.id))
            handle._put(JOB_DONE)
            return ADMITTED
        if not self._lora_ready(model, job):
            return WAIT  # its adapters differ from those of the running sequences
        if all(slot.busy for slot in model.slots):
            return WAIT  # every sequence is busy: the next free one takes it
        running = open_job(model, handle, job, self.cache)
        if running is None:
            return WAIT
        self._models.touch((record.id, False))
        self._running.append(running)
        return ADMITTED

    def _lora_ready(self, model: BatchedModel, job: GenerateJob) -> bool:
        """Whether ``job`` may run on ``model`` now as far as LoRA adapters go. A step applies
        one adapter set to every row, so a job joins running sequences only with their set;
        with none running, the model switches to the job's set (no reload). A job waiting
        for a switch holds back later jobs of the running set on that model."""
        wanted = job.lora.key
        held = self._lora_held.get(id(model))
        if held is not None and held != wanted:
            return False
        if any(r.sequence.model is model for r in self._running):
            if model.lora_key == wanted:
                return True
            self._lora_held.setdefault(id(model), wanted)
            return False
        model.use_lora(job.lora)  # an adapter that does not fit: AdapterError, for this job alone
        return True

    def _step(self) -> None:
        """One step of every resident model with admitted sequences, in turn."""
        groups: dict[int, list[Running]] = {}
        for running in self._running:
            groups.setdefault(id(running.sequence.model), []).append(running)
        for group in groups.values():
            self._step_model(group[0].sequence.model, group)

    def _step_model(self, model: BatchedModel, group: list[Running]) -> None:
        costs = self._costs.setdefault(model.record.id, StepCosts())
        decoding = any(r.sequence.state == DECODE for r in group)
        budget = costs.prefill_budget(model, decoding, self.prefill_chunk)
        started = time.perf_counter()
        try:
            fed = model.step([r.sequence for r in group], budget)
            costs.learn(time.perf_counter() - started, fed, decoding)
        except InglenookError as exc:
            for running in group:
                model.release(running.sequence)
                running.handle._put(exc)
                running.handle._put(JOB_DONE)
                self._running.remove(running)
            self._report_activity()
            return
        for running in group:
            for event in running.sequence.drain():
                running.handle._put(event)
                if isinstance(event, Finished):
                    self._observe_finished(running.handle.job, event)
            if running.sequence.done:
                self._finish(model, running)

    def _page_in_spare(self) -> None:
        """Let the prompt cache page in its next save's buffer once no prompt is being read
        (``cache_spare``): on a machine of few cores it would slow a first token down."""
        if self.cache is not None and all(r.sequence.state == DECODE for r in self._running):
            self.cache.prompts_read()

    def _finish(self, model: BatchedModel, running: Running) -> None:
        self._running.remove(running)
        model.release(running.sequence)
        self._models.touch((model.record.id, False))
        cache = self.cache if running.use_cache else None
        if cache is not None:
            cache.reserve_save()  # a flush() from now on waits for this state
        running.handle._put(JOB_DONE)
        if cache is not None:
            # The answer is delivered; the state is copied out before the next step.
            save_prompt_state(cache, model, running)
        self._report_activity()

    def _observe_finished(self, job: Job, finished: Finished) -> None:
        if not isinstance(job, GenerateJob):
            return
        for observer in self._finished_observers:
            try:
                observer(job, finished)
            except Exception:  # accounting must never cost an answer
                log.exception("a finished-job observer failed")

    def _report_activity(self) -> None:
        doing = [describe_job(r.handle.job) for r in self._running]
        doing += [describe_job(handle.job) for handle in self._embeddings.handles()]
        doing += [f"loading the model {model_id}" for model_id in self.loading_models()]
        self._activity("; ".join(doing))

    def _run_whole(self, handle: JobHandle) -> None:
        """A job that runs start to end on the worker: exclusive work (the lab)."""
        job = handle.job
        try:
            if handle.cancelled:
                handle._put(Finished("cancelled", Usage(), Timings(), job.model_id))
            elif isinstance(job, ExclusiveJob):
                self._beat(None)  # the lab measures for minutes on purpose: not a stuck step
                self._unload_idle_models()
                handle._put(ExclusiveResult(job.work()))
        except InglenookError as exc:
            handle._put(exc)
        except Exception as exc:  # an engine bug (or the lab's) must not kill the worker
            log.exception("job %d failed", handle.id)
            handle._put(InglenookError(f"internal error: {exc.__class__.__name__}"))
        handle._put(JOB_DONE)
        self._report_activity()

    def _embedding_ended(self, key: ModelKey) -> None:
        self._models.touch(key)
        self._report_activity()

    # -- resident models ------------------------------------------------------------

    def _busy_keys(self) -> set[ModelKey]:
        busy: set[ModelKey] = {(r.sequence.model.record.id, False) for r in self._running}
        return busy | self._embeddings.model_keys()

    def _unload_idle_models(self) -> None:
        self._models.unload_all_but(self._busy_keys())

    def _serve_unload_requests(self) -> None:
        with self._wake:
            requests, self._unload_requests = self._unload_requests, []
        if requests:
            self._models.take_loaded()
            self._unload_idle_models()
        for done in requests:
            done.set()

    def _unload_idle(self) -> None:
        self._idle_checked = time.monotonic()
        self._models.unload_idle(self.idle_unload_s, self._busy_keys())

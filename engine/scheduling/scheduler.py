"""The scheduler: the one owner of loaded models, and the step loop that runs them.

Every request — a chat turn from the GUI or the terminal, a call to the HTTP API — is a
job submitted here from any thread. A worker thread admits jobs into the sequences of the
resident model (loading the model a job names just in time, unloading models that sit
idle) and advances all admitted sequences together, one batched decode per step. Each job
streams its events back through its own queue and carries a cancel event checked at every
step. Callers see only ``submit`` and ``JobHandle`` (``jobs.py``).

Why this file is longer than most (about 700 lines): admission, the step loop and the
resident models' lifecycle (loads in flight, landed loads, eviction, idle unloads) all read
and change the worker's one state — running sequences, waiting jobs, the pool — under one
lock, and the order rules between them (a chat turn before API jobs, a landed load installed
at a pass's start, one adapter set per step) are easiest to check in one place.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..base import (
    API, JOB_DONE, EmbedJob, Embeddings, ExclusiveJob, ExclusiveResult, Finished, FinishedObserver,
    GenerateJob, InglenookError, InvalidRequest, Job, JobCancelled, JobHandle, ModelListener, ModelLoadError,
    ModelRecord, PromptProgress, QueueFull, SamplingParams, Timings, Usage, describe_job,
)
from ..runtime import DECODE, LoadOptions, LoadedModel
from ..store import PrefixCache
from .batched import BatchedModel, SteppedSequence
from .model_pool import (
    MIB, Key, LoadOutcome, ModelLoader, ModelPool, auto_budget_bytes, estimate_resident_bytes,
)

log = logging.getLogger(__name__)


# A prompt chunk fed beside streaming answers costs about this many of their decode steps:
# their worst gap between tokens stays a few times the usual one.
GAP_FACTOR = 4.0
MIN_PREFILL_CHUNK = 8


def _end_cancelled(handle: JobHandle) -> None:
    """End a job that never ran like a stopped one, so its stream closes cleanly."""
    handle._put(Finished("cancelled", Usage(), Timings(), handle.job.model_id))
    handle._put(JOB_DONE)


def _ewma(previous: float, sample: float, weight: float = 0.3) -> float:
    return sample if previous <= 0 else previous + weight * (sample - previous)


@dataclass(frozen=True)
class Heartbeat:
    """The worker's current unit of work (a step, a prompt's preparation, a load) and how
    long it has run. A unit that runs far longer than any healthy one means the engine is
    stuck inside it, and everything queued behind it waits."""

    busy_s: float
    doing: str


@dataclass
class _Running:
    """An admitted generate job: its handle, its sequence, what the prefix cache needs."""

    handle: JobHandle
    sequence: SteppedSequence
    prompt_tokens: int
    use_cache: bool
    shared_tokens: int = 0  # the prompt's leading tokens every chat with its documents shares


@dataclass
class _Embedding:
    """An admitted embedding job: one input is embedded per pass of the step loop, so the
    running answers keep streaming between its inputs."""

    handle: JobHandle
    model: BatchedModel
    vectors: list[list[float]] = field(default_factory=list)
    prompt_tokens: int = 0


class _StepCosts:
    """Measured costs (seconds) of one model's decode step and prompt token, which size its
    prefill chunks while answers stream."""

    def __init__(self) -> None:
        self.decode_step_s = 0.0
        self.prefill_token_s = 0.0

    def prefill_budget(self, model: BatchedModel, decoding: bool, most: int) -> int:
        """Prompt tokens for this step. With nobody decoding, a whole batch. While answers
        stream, as many as cost about ``GAP_FACTOR`` decode steps, measured as it goes: a
        prompt token deep in a long context costs far more than one near its start (on a
        CPU a 512-token chunk at position 4,000 took 6 s, 400 decode steps), so a fixed
        chunk would stall the streams exactly when the prompt is longest."""
        if not decoding:
            return model.options.batch_size
        if self.prefill_token_s <= 0 or self.decode_step_s <= 0:
            return min(most, MIN_PREFILL_CHUNK * 2)
        fits = int(GAP_FACTOR * self.decode_step_s / self.prefill_token_s)
        return max(MIN_PREFILL_CHUNK, min(most, fits))

    def learn(self, seconds: float, prefill_tokens: int, decoding: bool) -> None:
        if prefill_tokens == 0:
            if decoding:
                self.decode_step_s = _ewma(self.decode_step_s, seconds)
            return
        extra = seconds - (self.decode_step_s if decoding else 0.0)
        self.prefill_token_s = _ewma(self.prefill_token_s, max(extra, 0.0) / prefill_tokens)


def _capped(sampling: SamplingParams, cap: int | None, room: int) -> SamplingParams:
    """``sampling`` with a job's ``token_cap`` as its max_tokens, clipped to ``room`` (the
    context left after the prompt). With no room the prompt alone is too long: the model
    refuses it with its own error (ContextLengthExceeded)."""
    if cap is None or sampling.max_tokens is not None or room < 1:
        return sampling
    return dataclasses.replace(sampling, max_tokens=min(cap, room))


# What admission decided for a waiting job.
ADMITTED = "admitted"  # started, or ended (done, failed, cancelled): it leaves the queue
WAIT = "wait"  # not yet (its model is loading, its sequences are busy): look at the next job
BLOCK = "block"  # needs running work to end first (memory, the machine alone): admit nothing more now

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
        self.loader = loader
        self._load_options = load_options
        self._estimate = estimate
        self.idle_unload_s = idle_unload_s
        self.prefill_chunk = prefill_chunk
        self._costs: dict[str, _StepCosts] = {}
        self._max_queue = max_queue
        self._waiting: list[JobHandle] = []
        self._running: list[_Running] = []
        self._embeddings: list[_Embedding] = []
        self._wake = threading.Condition()
        self._ids = itertools.count(1)
        self._pool = ModelPool(memory_budget or auto_budget_bytes)
        self._loads = ModelLoader(self._on_loaded)
        self._inbox: list[LoadOutcome] = []  # finished loads, installed by the worker
        # A failed load's error, for the jobs that were waiting for it: (when, error).
        self._load_failures: dict[ModelKey, tuple[float, BaseException]] = {}
        self._unload_requests: list[threading.Event] = []
        # Per admission pass: models a job is waiting to switch to another LoRA set, and that
        # set; later jobs of the running set wait too, so the switch is not starved.
        self._lora_held: dict[int, str] = {}
        self._idle_checked = time.monotonic()
        self._listeners: list[ModelListener] = []
        self._finished_observers: list[FinishedObserver] = []
        self._closed = False
        # (monotonic start, description) of the worker's unit of work; None while idle or
        # while exclusive work (the lab's long measurements) has the worker.
        self._unit: tuple[float, str] | None = None
        self._worker = threading.Thread(target=self._run, name="inglenook-scheduler", daemon=True)
        self._worker.start()

    # -- public ---------------------------------------------------------------------

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
        self._listeners.append(listener)

    def remove_listener(self, listener: ModelListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def loaded_models(self) -> list[BatchedModel]:
        """The resident models, most recently used first. Never waits for a load."""
        return self._pool.models()

    def loading_models(self) -> list[str]:
        """Ids of the models loading now."""
        return [record.id for record, _size in self._loads.loading().values()]

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
        units = [unit for unit in (self._unit, self._loads.unit) if unit is not None]
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
            for embedding in self._embeddings:
                embedding.handle.cancel()
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
        self._take_loaded()
        for key in self._pool.keys():
            self._unload(key)

    # -- the step loop --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._take_loaded()
            self._serve_unload_requests()
            with self._wake:
                if self._closed and not self._running and not self._embeddings:
                    self._beat(None)
                    return
                if not self._running and not self._waiting and not self._embeddings:
                    self._beat(None)
                    if not self._wake.wait(timeout=1.0):
                        self._unload_idle()
                    continue
            self._admit()
            if self._running or self._embeddings:
                if self._running:
                    self._beat(f"a step of {len(self._running)} sequence(s): {describe_job(self._running[0].handle.job)}")
                    self._step()
                if self._embeddings:
                    self._embed_next()
                if time.monotonic() - self._idle_checked > 1.0:
                    self._unload_idle()
            else:
                # Everything waiting waits for a load: sleep until it lands (or a job comes).
                self._beat(None)
                with self._wake:
                    if not self._inbox and not self._closed:
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
            if self._running or self._loads.loading():
                return BLOCK  # needs the machine to itself
            self._activity(describe_job(job))
            self._run_whole(handle)
            return ADMITTED
        if handle.record is None:
            handle.record = self._resolve(job.model_id)
        record = handle.record
        model = self._model_or_load(handle, record, embeddings=job.pooling if isinstance(job, EmbedJob) else False)
        if isinstance(model, str):
            return model
        if isinstance(job, EmbedJob) and not job.inputs:
            handle._put(Embeddings([], 0, record.id))
            handle._put(JOB_DONE)
            return ADMITTED
        if isinstance(job, EmbedJob):
            self._embeddings.append(_Embedding(handle, model))
            self._report_activity()
            return ADMITTED
        if job.load_only:
            handle._put(JOB_DONE)
            return ADMITTED
        if job.count_only:
            # Tokenizing needs the vocabulary, not a free sequence: it runs between steps.
            counted = len(self._prompt_tokens(model, job, handle.cancel_event))
            handle._put(Finished("stop", Usage(prompt_tokens=counted), Timings(), record.id))
            handle._put(JOB_DONE)
            return ADMITTED
        if not self._lora_ready(model, job):
            return WAIT  # its adapters differ from those of the running sequences
        if all(slot.busy for slot in model.slots):
            return WAIT  # every sequence is busy: the next free one takes it
        prompt = self._prompt_tokens(model, job, handle.cancel_event)
        slot = model.pick_slot(prompt)
        if slot is None:
            return WAIT
        # Measured with or without the cache: a prompt's shared block is read apart either way,
        # so a cold answer and a restored one read the same chunks (``shared_boundary``).
        shared = self._shared_tokens(model, job, prompt, handle.cancel_event)
        if self.cache is not None and job.use_cache:
            try:
                self.cache.restore(model.slot_view(slot), prompt, job.conversation_id, shared=shared)
            except Exception:  # a cache fault costs a full prefill, never the answer
                log.exception("restoring a saved prompt state failed; prefilling instead")
                model.free_slot(slot)
        sampling = _capped(job.sampling, job.token_cap, model.n_ctx - len(prompt))
        sequence = model.open_sequence(prompt, sampling, handle.cancel_event, handle.submitted_at,
                                       reuse_kv=job.use_cache, slot=slot, shared=shared,
                                       template_stops=model.chat_stops if job.messages is not None else ())
        cached = sequence.usage.cached_tokens
        log.debug("job %d: a prompt of %d tokens, %d of them cached (%d shared), %d to read",
                  handle.id, len(prompt), cached, shared, len(prompt) - cached)
        handle.prompt_usage = Usage(prompt_tokens=len(prompt), cached_tokens=cached)
        # The first progress event: the prompt fits and its cached prefix is restored, so
        # the HTTP API can open a stream now (errors before this point become HTTP errors).
        handle._put(PromptProgress(cached, len(prompt), cached, 0.0))
        self._pool.touch((record.id, False))
        self._running.append(_Running(handle, sequence, len(prompt), job.use_cache, shared))
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
        groups: dict[int, list[_Running]] = {}
        for running in self._running:
            groups.setdefault(id(running.sequence.model), []).append(running)
        for group in groups.values():
            self._step_model(group[0].sequence.model, group)

    def _step_model(self, model: BatchedModel, group: list[_Running]) -> None:
        costs = self._costs.setdefault(model.record.id, _StepCosts())
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

    def _finish(self, model: BatchedModel, running: _Running) -> None:
        self._running.remove(running)
        model.release(running.sequence)
        self._pool.touch((model.record.id, False))
        job = running.handle.job
        assert isinstance(job, GenerateJob)
        cache = self.cache if running.use_cache else None
        if cache is not None:
            cache.reserve_save()  # a flush() from now on waits for this state
        running.handle._put(JOB_DONE)
        if cache is not None:
            # The answer is delivered; the state is copied out before the next step.
            try:
                cache.save(model.slot_view(running.sequence.slot), running.prompt_tokens, job.conversation_id,
                           reserved=True, shared=running.shared_tokens, documents=job.shared_documents)
            except Exception:
                log.exception("saving the prompt state failed")
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
        doing += [describe_job(e.handle.job) for e in self._embeddings]
        doing += [f"loading the model {model_id}" for model_id in self.loading_models()]
        self._activity("; ".join(doing))

    def _embed_next(self) -> None:
        """Embed the next input of every admitted embedding job (between steps)."""
        for embedding in list(self._embeddings):
            handle, model = embedding.handle, embedding.model
            job = handle.job
            assert isinstance(job, EmbedJob)
            ended = True
            try:
                if handle.cancelled:
                    handle._put(Finished("cancelled", Usage(), Timings(), job.model_id))
                else:
                    text = job.inputs[len(embedding.vectors)]
                    self._beat(describe_job(job))  # each input is its own unit of work
                    embedding.vectors.append(model.embed(text))
                    embedding.prompt_tokens += len(model.tokenize(text))
                    ended = len(embedding.vectors) == len(job.inputs)
                    if ended:
                        handle._put(Embeddings(embedding.vectors, embedding.prompt_tokens, model.record.id))
            except InglenookError as exc:
                handle._put(exc)
            except Exception as exc:  # an engine bug must not kill the worker
                log.exception("job %d failed", handle.id)
                handle._put(InglenookError(f"internal error: {exc.__class__.__name__}"))
            if ended:
                handle._put(JOB_DONE)
                self._embeddings.remove(embedding)
                self._pool.touch((model.record.id, model.options.pooling))
                self._report_activity()

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

    @staticmethod
    def _shared_tokens(model: BatchedModel, job: GenerateJob, prompt: list[int], cancel: threading.Event) -> int:
        """How many leading tokens of ``prompt`` are the job's shared messages (its documents):
        the tokens those messages render to alone, as far as they agree with the prompt."""
        if not job.shared_messages or job.messages is None or len(job.messages) <= job.shared_messages:
            return 0
        try:
            alone = model.chat_tokens(job.messages[: job.shared_messages], tools=job.tools, cancel=cancel,
                                      options=job.template_options)
        except InglenookError as exc:  # a template that wants a user turn: no shared prefix, a normal turn
            log.debug("the shared messages do not render alone (%s); not keeping them as a prefix", exc)
            return 0
        limit = min(len(alone), len(prompt))
        common = 0
        while common < limit and alone[common] == prompt[common]:
            common += 1
        return common

    @staticmethod
    def _prompt_tokens(model: BatchedModel, job: GenerateJob, cancel: threading.Event) -> list[int]:
        """The job's prompt as tokens. The model stops early (and says so) once a prompt
        cannot fit its context, and ``cancel`` ends the preparation of a huge one."""
        if job.messages is not None:
            tokens = model.chat_tokens(job.messages, tools=job.tools, cancel=cancel, options=job.template_options)
            if job.answer_prefix:
                # Text, not special tokens: an answer that mentions "<|im_end|>" continues as text.
                tokens += model.tokenize(job.answer_prefix, add_special=False, parse_special=False)
            return tokens
        if job.text is not None:
            return model.prompt_tokens(job.text, cancel=cancel)
        return list(job.tokens or [])

    # -- resident models ------------------------------------------------------------

    def _busy_keys(self) -> set[ModelKey]:
        busy = {(r.sequence.model.record.id, False) for r in self._running}
        return busy | {(e.model.record.id, e.model.options.pooling) for e in self._embeddings}

    def _model_or_load(self, handle: JobHandle, record: ModelRecord, embeddings: str | bool) -> BatchedModel | str:
        """The resident model for ``record`` (``embeddings``: False, or the pooling of an
        embedding context), or what the job must do while it is not:
        ``WAIT`` (it is loading now, or another load is) or ``BLOCK`` (its memory is held by
        models answering now). Raises the error of a load the job was waiting for."""
        key = (record.id, embeddings)
        failure = self._load_failures.get(key)
        if failure is not None and handle.submitted_at <= failure[0]:
            raise failure[1]
        model = self._pool.get(key)
        if model is None and self._landed(key):
            # Installed at the next pass's start, not mid-pass: a job ranked before this one
            # was told WAIT for this load and must get the model first.
            return WAIT
        if model is not None:
            if model.record.fingerprint == record.fingerprint:
                self._pool.touch(key)
                return model
            if key in self._busy_keys():
                return BLOCK  # the file changed on disk: reload once its answers end
            self._unload(key)
        loading = self._loads.loading()
        if loading:
            return WAIT  # one load at a time; this one's turn comes when it lands
        options = self._options_for(embeddings)
        need = self._estimate(record, options)
        evict = self._pool.evictions_for(need, self._busy_keys(), self._loads.reserved_bytes())
        if evict is None:
            return BLOCK  # after the running answers end, their models can make room
        for other in evict:
            log.info("unloading %s to make room for %s", other[0], record.id)
            self._unload(other)
        self._start_load(key, record, options, need)
        return WAIT

    def _options_for(self, embeddings: str | bool) -> LoadOptions:
        options = self._load_options()
        if embeddings:
            options = dataclasses.replace(options, embeddings=True, parallel=1, pooling=str(embeddings))
        return options

    def _start_load(self, key: ModelKey, record: ModelRecord, options: LoadOptions, size: int) -> None:
        self._load_failures.pop(key, None)
        self._notify(key, "loading", 0.0)

        def build(progress: Callable[[float], None]) -> BatchedModel:
            def on_progress(fraction: float) -> None:
                progress(fraction)
                self._notify(key, "loading", fraction)

            return self.loader(record, options, progress=on_progress)

        self._loads.start(key, record, size, build)
        self._report_activity()

    def _on_loaded(self, outcome: LoadOutcome) -> None:
        """On the loader thread: hand the outcome to the worker, and wake it."""
        with self._wake:
            if not self._closed:
                self._inbox.append(outcome)
                self._wake.notify()
                return
        if outcome.model is not None:  # the engine closed while it loaded: nobody will use it
            outcome.model.close()

    def _landed(self, key: ModelKey) -> bool:
        """A load of ``key`` has finished (loaded or failed) and waits in the inbox."""
        with self._wake:
            return any(outcome.key == key for outcome in self._inbox)

    def _take_loaded(self) -> None:
        """Install finished loads into the pool (worker thread, or close)."""
        with self._wake:
            outcomes, self._inbox = self._inbox, []
        for outcome in outcomes:
            record = outcome.record
            if outcome.error is not None:
                self._load_failures[outcome.key] = (time.perf_counter(), outcome.error)
                if isinstance(outcome.error, ModelLoadError):
                    self._notify(outcome.key, "failed", str(outcome.error))
            elif self._closed:
                outcome.model.close()
            else:
                # The context it got may differ from the one estimated (an automatic context
                # chosen at load time, with the memory evictions freed): count the larger.
                model = outcome.model
                actual = estimate_resident_bytes(record, dataclasses.replace(model.options, context_size=model.n_ctx))
                self._pool.add(outcome.key, model, max(outcome.size, actual))
                log.info("%s resident (about %d MiB; %d MiB of %d MiB in use)", record.id, max(outcome.size, actual) // MIB,
                         self._pool.used_bytes() // MIB, self._pool.budget_bytes() // MIB)
                self._notify(outcome.key, "loaded", model)
        if outcomes:
            self._report_activity()

    def _unload(self, key: ModelKey) -> None:
        model = self._pool.pop(key)
        if model is not None:
            model.close()
            log.info("unloaded %s", key[0])
            self._notify(key, "unloaded", None)

    def _unload_idle_models(self) -> None:
        busy = self._busy_keys()
        for key in self._pool.keys():
            if key not in busy:
                self._unload(key)

    def _serve_unload_requests(self) -> None:
        with self._wake:
            requests, self._unload_requests = self._unload_requests, []
        if requests:
            self._take_loaded()
            self._unload_idle_models()
        for done in requests:
            done.set()

    def _unload_idle(self) -> None:
        self._idle_checked = time.monotonic()
        if self.idle_unload_s <= 0:
            return
        for key in self._pool.idle_for(self.idle_unload_s, self._busy_keys()):
            log.info("unloading %s after %.0fs idle", key[0], self.idle_unload_s)
            self._unload(key)

    def _notify(self, key: ModelKey, state: str, detail: Any) -> None:
        """Tell the listeners what became of a model. An embedding context (search by
        meaning, the API's embeddings) is the engine's own business apart from a failure: the
        window took its loading for the chat model's ("Loading smollm2…" over a vision chat)."""
        model_id, embeddings = key
        if embeddings and state != "failed":
            return
        for listener in list(self._listeners):
            try:
                listener(model_id, state, detail)
            except Exception:
                log.exception("model listener failed")

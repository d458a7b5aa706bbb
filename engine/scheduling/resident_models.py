"""The scheduler's resident models: which are loaded, which load now, and making room.

A job names a model; ``model_or_load`` returns it when it is resident, or starts its load
(one at a time, on the loader thread, evicting idle models that stand in the way of the
memory budget) and tells the job to wait. Finished loads come back through an inbox that the
scheduler's worker empties (``take_loaded``) at a pass's start, so a model is installed, and
closed, only between steps. Listeners hear what became of each chat model.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..base import JobHandle, ModelListener, ModelLoadError, ModelRecord
from ..runtime import LoadOptions
from .batched import BatchedModel
from .model_pool import MIB, Key, LoadOutcome, ModelLoader, ModelPool, estimate_resident_bytes

log = logging.getLogger(__name__)

# What a job must do while its model is not resident.
WAIT = "wait"  # not yet (its model is loading, its sequences are busy): look at the next job
BLOCK = "block"  # needs running work to end first (memory, the machine alone): admit nothing more now


class ResidentModels:
    """Loaded models within a memory budget, and the loads that bring more."""

    def __init__(self, loader: Callable[..., BatchedModel], load_options: Callable[[], LoadOptions],
                 estimate: Callable[[ModelRecord, LoadOptions], int], memory_budget: Callable[[], int],
                 wake: threading.Condition, closed: Callable[[], bool], changed: Callable[[], None]) -> None:
        """``wake``: the scheduler's condition (a landed load wakes its worker); ``closed()``:
        whether it has closed; ``changed()``: what the worker does has changed (a load began
        or landed)."""
        self.loader = loader
        self._load_options = load_options
        self._estimate = estimate
        self._wake = wake
        self._closed = closed
        self._changed = changed
        self._pool = ModelPool(memory_budget)
        self._loads = ModelLoader(self._on_loaded)
        self._inbox: list[LoadOutcome] = []  # finished loads, installed by the worker
        # A failed load's error, for the jobs that were waiting for it: (when, error).
        self._load_failures: dict[Key, tuple[float, BaseException]] = {}
        self.listeners: list[ModelListener] = []

    # -- what is resident -----------------------------------------------------------

    def models(self) -> list[BatchedModel]:
        """The resident models, most recently used first."""
        return self._pool.models()

    def keys(self) -> list[Key]:
        return self._pool.keys()

    def touch(self, key: Key) -> None:
        self._pool.touch(key)

    def loading_ids(self) -> list[str]:
        """Ids of the models loading now."""
        return [record.id for record, _size in self._loads.loading().values()]

    def loading(self) -> bool:
        return bool(self._loads.loading())

    @property
    def load_unit(self) -> tuple[float, str] | None:
        """(monotonic start, description) of the load in progress, for the heartbeat."""
        return self._loads.unit

    # -- a job's model --------------------------------------------------------------

    def model_or_load(self, handle: JobHandle, record: ModelRecord, embeddings: str | bool,
                      busy: set[Key]) -> BatchedModel | str:
        """The resident model for ``record`` (``embeddings``: False, or the pooling of an
        embedding context), or what the job must do while it is not:
        ``WAIT`` (it is loading now, or another load is) or ``BLOCK`` (its memory is held by
        models answering now, ``busy``). Raises the error of a load the job was waiting for."""
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
            if key in busy:
                return BLOCK  # the file changed on disk: reload once its answers end
            self.unload(key)
        if self._loads.loading():
            return WAIT  # one load at a time; this one's turn comes when it lands
        options = self._options_for(embeddings)
        need = self._estimate(record, options)
        evict = self._pool.evictions_for(need, busy, self._loads.reserved_bytes())
        if evict is None:
            return BLOCK  # after the running answers end, their models can make room
        for other in evict:
            log.info("unloading %s to make room for %s", other[0], record.id)
            self.unload(other)
        self._start_load(key, record, options, need)
        return WAIT

    def _options_for(self, embeddings: str | bool) -> LoadOptions:
        options = self._load_options()
        if embeddings:
            options = dataclasses.replace(options, embeddings=True, parallel=1, pooling=str(embeddings))
        return options

    def _start_load(self, key: Key, record: ModelRecord, options: LoadOptions, size: int) -> None:
        self._load_failures.pop(key, None)
        self.notify(key, "loading", 0.0)

        def build(progress: Callable[[float], None]) -> BatchedModel:
            def on_progress(fraction: float) -> None:
                progress(fraction)
                self.notify(key, "loading", fraction)

            return self.loader(record, options, progress=on_progress)

        self._loads.start(key, record, size, build)
        self._changed()

    # -- loads landing --------------------------------------------------------------

    def _on_loaded(self, outcome: LoadOutcome) -> None:
        """On the loader thread: hand the outcome to the worker, and wake it."""
        with self._wake:
            if not self._closed():
                self._inbox.append(outcome)
                self._wake.notify()
                return
        if outcome.model is not None:  # the engine closed while it loaded: nobody will use it
            outcome.model.close()

    def has_landed(self) -> bool:
        """Some load has finished and waits to be installed (call under the wake lock)."""
        return bool(self._inbox)

    def _landed(self, key: Key) -> bool:
        """A load of ``key`` has finished (loaded or failed) and waits in the inbox."""
        with self._wake:
            return any(outcome.key == key for outcome in self._inbox)

    def take_loaded(self) -> None:
        """Install finished loads into the pool (worker thread, or close)."""
        with self._wake:
            outcomes, self._inbox = self._inbox, []
        for outcome in outcomes:
            self._install(outcome)
        if outcomes:
            self._changed()

    def _install(self, outcome: LoadOutcome) -> None:
        record = outcome.record
        if outcome.error is not None:
            self._load_failures[outcome.key] = (time.perf_counter(), outcome.error)
            if isinstance(outcome.error, ModelLoadError):
                self.notify(outcome.key, "failed", str(outcome.error))
        elif self._closed():
            outcome.model.close()
        else:
            # The context it got may differ from the one estimated (an automatic context
            # chosen at load time, with the memory evictions freed): count the larger.
            model = outcome.model
            actual = estimate_resident_bytes(record, dataclasses.replace(model.options, context_size=model.n_ctx))
            self._pool.add(outcome.key, model, max(outcome.size, actual))
            log.info("%s resident (about %d MiB; %d MiB of %d MiB in use)", record.id, max(outcome.size, actual) // MIB,
                     self._pool.used_bytes() // MIB, self._pool.budget_bytes() // MIB)
            self.notify(outcome.key, "loaded", model)

    # -- unloading ------------------------------------------------------------------

    def unload(self, key: Key) -> None:
        model = self._pool.pop(key)
        if model is not None:
            model.close()
            log.info("unloaded %s", key[0])
            self.notify(key, "unloaded", None)

    def unload_all_but(self, busy: set[Key]) -> None:
        for key in self._pool.keys():
            if key not in busy:
                self.unload(key)

    def unload_idle(self, idle_s: float, busy: set[Key]) -> None:
        """Unload the models nobody has used for ``idle_s`` seconds (0: never)."""
        if idle_s <= 0:
            return
        for key in self._pool.idle_for(idle_s, busy):
            log.info("unloading %s after %.0fs idle", key[0], idle_s)
            self.unload(key)

    def notify(self, key: Key, state: str, detail: Any) -> None:
        """Tell the listeners what became of a model. An embedding context (search by
        meaning, the API's embeddings) is the engine's own business apart from a failure: the
        window took its loading for the chat model's ("Loading smollm2…" over a vision chat)."""
        model_id, embeddings = key
        if embeddings and state != "failed":
            return
        for listener in list(self.listeners):
            try:
                listener(model_id, state, detail)
            except Exception:
                log.exception("model listener failed")

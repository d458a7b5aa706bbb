"""Async access to scheduler jobs for the HTTP server.

The scheduler's thread hands each job's events to a ``LoopWaker``, which wakes the event
loop once per step for every stream that got something; a ``Run`` then reads its events
with ``JobHandle.poll`` on the loop. No thread waits per job, and the loop never waits on
inference. A ``Run`` cancels its job when the request goes away: the client disconnected,
the handler was cancelled, or the server is shutting down. (The server's default cap on
generated tokens is the job's ``token_cap``, applied by the scheduler as a sampling limit.)

A stream opens once its prompt is admitted (``until_admitted``: the first ``PromptProgress``),
not at its first token, and ``reading`` then hands it the prompt's progress and a keep-alive
every few seconds of silence until the first token: a long prompt's reading takes minutes
on a CPU, and clients give up on a response whose headers have not come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
from starlette.requests import Request

from ...base import (
    EMPTY, ENDED, Chunk, Finished, JobCancelled, JobHandle, PromptProgress, TokenLogprob, Usage,
)
from ...usage import ReasoningCount

log = logging.getLogger(__name__)

_END = object()
_SILENT = object()  # no event came within the wait's time limit

# While a prompt is read, a stream sends something at least this often (an SSE comment, or
# the Messages API's ping), so clients and proxies with idle timeouts see it alive.
KEEPALIVE_S = 5.0


class RunSet:
    """The runs in flight, so shutdown can end them; shared by the loop and ``stop()``."""

    def __init__(self) -> None:
        self._runs: set[Run] = set()
        self._lock = threading.Lock()

    def add(self, run: "Run") -> None:
        with self._lock:
            self._runs.add(run)

    def discard(self, run: "Run") -> None:
        with self._lock:
            self._runs.discard(run)

    def cancel_all(self) -> None:
        with self._lock:
            runs = list(self._runs)
        for run in runs:
            run.cancel()

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)


class LoopWaker:
    """Wakes waiting runs on one event loop from the scheduler's thread. A step hands events
    to every stream at once; the first wake-up schedules one callback on the loop, the
    others of the same step join it, so the loop wakes once per step, not once per stream."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._ready: list[asyncio.Event] = []
        self._lock = threading.Lock()

    def waker_for(self, ready: asyncio.Event) -> Callable[[], None]:
        def wake() -> None:
            with self._lock:
                self._ready.append(ready)
                if len(self._ready) > 1:
                    return  # a callback is already on its way
            try:
                self._loop.call_soon_threadsafe(self._fire)
            except RuntimeError:  # the loop has closed: nobody is waiting any more
                pass

        return wake

    def _fire(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for event in ready:
            event.set()


_wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWaker] = weakref.WeakKeyDictionary()


def loop_waker() -> LoopWaker:
    """The running loop's ``LoopWaker`` (one per loop)."""
    loop = asyncio.get_running_loop()
    waker = _wakers.get(loop)
    if waker is None:
        waker = _wakers[loop] = LoopWaker(loop)
    return waker


class Run:
    """One generate job as the server consumes it: prime, iterate, then read the totals."""

    def __init__(self, handle: JobHandle, registry: RunSet) -> None:
        self.handle = handle
        self.finished: Finished | None = None
        self.text_parts: list[str] = []
        self.logprobs: list[TokenLogprob] = []
        self._ready: asyncio.Event | None = None
        self._whole = False  # read as a whole answer (``drain``): woken at its end, not per chunk
        self._primed: list[Any] = []  # an event read ahead (by until_admitted or reading), read next
        self.progress: PromptProgress | None = None  # how far the prompt's reading has come
        self._registry = registry
        # Counts the answer's reasoning tokens for usage (set by whoever submitted the job).
        self.reasoning: ReasoningCount | None = None
        registry.add(self)

    def cancel(self) -> None:
        self.handle.cancel()

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    async def _next(self, timeout: float | None = None) -> Any:
        """The next event, ``_END`` once the job is over, ``_SILENT`` when ``timeout``
        seconds pass without one. Events are read on the event loop as the scheduler's waker
        announces them: no thread waits per job and no thread hop per token (on a 2-core
        machine those hops took CPU time from decoding)."""
        try:
            if self._ready is None:
                self._ready = asyncio.Event()
                self.handle.set_waker(loop_waker().waker_for(self._ready), on_chunks=not self._whole)
            while True:
                item = self.handle.poll()
                if item is EMPTY:
                    self._ready.clear()
                    item = self.handle.poll()  # an event put before the clear is not lost
                    if item is EMPTY:
                        if not await self._woken(timeout):
                            return _SILENT
                        continue
                return _END if item is ENDED else item
        except BaseException:
            self.close()
            raise

    async def _woken(self, timeout: float | None) -> bool:
        """Wait for the waker; False when ``timeout`` seconds passed first. (The time-out is
        caught here, so ``_next`` does not take it for the request going away.)"""
        assert self._ready is not None
        if timeout is None:
            await self._ready.wait()
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def until_admitted(self) -> None:
        """Wait until the prompt is admitted — tokenized, known to fit the context, its
        sequence open: the job's first ``PromptProgress`` — or the job ended early. An error
        (an over-long prompt, an unknown model) is raised here, so it becomes an HTTP error
        before any response is sent; a stream opens after this, not after the prefill."""
        if self.progress is not None or self._primed or self.finished is not None:
            return
        event = await self._next()
        if isinstance(event, PromptProgress):
            self.progress = event
        else:
            self._primed.append(event)  # a job with no progress (a fake) or the end: chunks() reads it

    async def reading(self, every_s: float = KEEPALIVE_S) -> AsyncIterator[PromptProgress | None]:
        """While the prompt is read: each ``PromptProgress`` as it comes, and None after
        every ``every_s`` seconds without one (a keep-alive is due). Ends once the first
        token, the end or an error is next, which ``chunks`` then reads (an error raised
        here comes inside the stream's own handling, so it is reported in the stream)."""
        while not self._primed and self.finished is None:
            event = await self._next(timeout=every_s)
            if event is _SILENT:
                yield None
            elif isinstance(event, PromptProgress):
                self.progress = event
                yield event
            else:
                self._primed.append(event)

    async def chunks(self) -> AsyncIterator[Chunk]:
        """Yield chunks until the job ends; ``finished`` is set afterwards."""
        while True:
            event = self._primed.pop() if self._primed else await self._next()
            if event is _END:
                break
            if isinstance(event, Finished):
                self.finished = event
                continue
            if not isinstance(event, Chunk):
                continue  # prompt progress: a whole answer has no use for it
            if self.reasoning is not None:
                self.reasoning.feed(event)
            self.text_parts.append(event.text)
            if event.logprobs:
                self.logprobs.extend(event.logprobs)
            yield event
        self.close()
        if self.finished is None:
            raise JobCancelled("the job ended without a result")
        if self.reasoning is not None:
            self.reasoning.done()

    async def drain(self) -> None:
        """Read the whole answer. Its chunks wait in the job's queue until its end instead
        of waking the loop one by one (``JobHandle.set_waker``)."""
        if not self._whole:
            self._whole = True
            if self._ready is not None:  # already waiting for events (``until_admitted``)
                self.handle.set_waker(loop_waker().waker_for(self._ready), on_chunks=False)
        async for _ in self.chunks():
            pass

    @property
    def finish_reason(self) -> str:
        reason = self.finished.finish_reason if self.finished else "length"
        # Stopped by shutdown: the text is cut short, as by a limit.
        return "length" if reason == "cancelled" else reason

    @property
    def usage(self) -> Usage:
        return self.finished.usage if self.finished else Usage()

    def close(self) -> None:
        """Cancel the job unless it already ended, and stop tracking it."""
        if self.finished is None:
            self.handle.cancel()
        self._registry.discard(self)


class Cancellable(Protocol):
    """What a client's disconnect stops: a ``Run``, or a bare ``JobHandle`` (embeddings)."""

    def cancel(self) -> None: ...


@asynccontextmanager
async def cancelled_on_disconnect(request: Request, runs: Sequence[Cancellable]) -> AsyncIterator[None]:
    """While the body runs, a client that goes away cancels ``runs``."""

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                log.info("client disconnected; cancelling %d job(s)", len(runs))
                for run in runs:
                    run.cancel()
                return

    # A plain task rather than a task group: errors of the body then reach the handler as
    # themselves, not wrapped in an exception group.
    watcher = asyncio.ensure_future(watch())
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def interleaved(runs: Sequence[Run]) -> AsyncIterator[tuple[int, Chunk | None]]:
    """Chunks of several runs as they arrive: ``(index, chunk)``, and ``(index, None)`` when
    run ``index`` has ended. The engine decodes ``n > 1`` choices side by side, so their
    streams interleave instead of arriving one after another."""
    send, receive = anyio.create_memory_object_stream[tuple[int, Chunk | None, BaseException | None]](len(runs) * 4)

    async def pump(index: int, run: Run) -> None:
        try:
            async for chunk in run.chunks():
                await send.send((index, chunk, None))
            await send.send((index, None, None))
        except Exception as exc:  # noqa: BLE001 — handed to the reader, which raises it
            await send.send((index, None, exc))

    async with anyio.create_task_group() as group:
        for index, run in enumerate(runs):
            group.start_soon(pump, index, run)
        remaining = len(runs)
        try:
            while remaining:
                index, chunk, error = await receive.receive()
                if error is not None:
                    raise error
                if chunk is None:
                    remaining -= 1
                yield index, chunk
        finally:
            group.cancel_scope.cancel()

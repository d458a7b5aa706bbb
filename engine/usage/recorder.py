"""Writes usage rows (usage.py) off the scheduler's thread, in batches, never costing an answer.

The scheduler calls ``observe`` on its worker thread when a generation ends; that only
queues a record. A writer thread collects what arrived within ``batch_delay_s`` and writes
it in one transaction. When the store is unavailable (disk full, locked, read-only) the rows
wait in memory (at most ``max_unwritten``) and are written on a later try; the answer was
delivered long before. Front ends that split reasoning from the answer report the reasoning
token count afterwards (``note_reasoning``); it updates the job's row, written or not.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base import Chunk, Finished, GenerateJob, StoreError
from ..store import Store
from .usage import TABLE, UNCOUNTED_PREFIX, ReasoningTally, local_day

log = logging.getLogger(__name__)

RETRY_AFTER_S = 15.0
PRUNE_EVERY_S = 6 * 3600.0
_REMEMBERED_ROWS = 4096  # recent jobs whose row id a late reasoning count may still update


@dataclass
class UsageRecord:
    at: float
    model_id: str
    client: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    duration_s: float
    finish_reason: str
    key: int = 0  # the job it came from (``id(job)``), for a late reasoning count

    @classmethod
    def of(cls, job: GenerateJob, finished: Finished, at: float | None = None) -> "UsageRecord":
        usage, timings = finished.usage, finished.timings
        return cls(
            at=time.time() if at is None else at,
            model_id=finished.model_id or job.model_id,
            client=job.client or "",
            prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
            completion_tokens=usage.completion_tokens,
            reasoning_tokens=0,
            duration_s=max(0.0, timings.prompt_s + timings.decode_s),
            finish_reason=finished.finish_reason,
            key=id(job),
        )

    def row(self) -> dict[str, Any]:
        return {
            "at": self.at, "day": local_day(self.at), "model_id": self.model_id, "client": self.client,
            "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens, "reasoning_tokens": self.reasoning_tokens,
            "duration_s": self.duration_s, "finish_reason": self.finish_reason,
        }


_COLUMNS = ("at", "day", "model_id", "client", "prompt_tokens", "cached_tokens", "completion_tokens",
            "reasoning_tokens", "duration_s", "finish_reason")
_INSERT = f"INSERT INTO {TABLE} ({', '.join(_COLUMNS)}) VALUES ({', '.join(':' + c for c in _COLUMNS)})"


class UsageRecorder:
    """Queues usage records and writes them from its own thread. ``close()`` writes what is left."""

    def __init__(self, store: Store, retention_days: Callable[[], int], batch_delay_s: float = 0.5,
                 max_unwritten: int = 10_000) -> None:
        self.store = store
        self._retention_days = retention_days
        self.batch_delay_s = batch_delay_s
        self.max_unwritten = max_unwritten
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._unwritten: list[UsageRecord] = []
        self._late: list[tuple[int, int]] = []  # (row id, reasoning tokens) not yet written
        self._rows: OrderedDict[int, int] = OrderedDict()  # job key -> row id
        self._last_prune = 0.0
        self._failing = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="inglenook-usage", daemon=True)
        self._thread.start()

    # -- producers (any thread) -----------------------------------------------------------

    def observe(self, job: GenerateJob, finished: Finished) -> None:
        """The scheduler's finished-job observer: quick, never raises."""
        if job.client.startswith(UNCOUNTED_PREFIX) or self._closed:
            return
        self._queue.put(("add", UsageRecord.of(job, finished)))

    def note_reasoning(self, job: GenerateJob, tokens: int) -> None:
        """``tokens`` of ``job``'s answer were reasoning. Call it after the job's events ended
        (the scheduler observes a job before it closes its stream, so the row is queued first)."""
        if tokens > 0 and not self._closed:
            self._queue.put(("reasoning", (id(job), tokens)))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued so far was handled (written, or kept for a retry)."""
        done = threading.Event()
        self._queue.put(("flush", done))
        return done.wait(timeout)

    @property
    def pending(self) -> int:
        """Rows waiting for the store (it was unavailable)."""
        return len(self._unwritten)

    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(("close", None))
        self._thread.join(timeout)
        if self._unwritten:
            log.warning("%d usage record(s) could not be written and are lost", len(self._unwritten))

    # -- the writer thread ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            wait = RETRY_AFTER_S if self._unwritten or self._late else None
            try:
                first = self._queue.get(timeout=wait)
            except queue.Empty:
                self._write()  # the store was unavailable: try again
                continue
            items = [first]
            if first[0] == "add":
                items.extend(self._burst())
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = self._take(items)
            self._write()
            for kind, value in items:
                if kind == "flush":
                    value.set()
            if stop:
                return

    def _burst(self) -> list[tuple[str, Any]]:
        """What arrives within ``batch_delay_s`` after a record, so that a burst of answers
        shares one transaction; a close or flush ends the wait at once (a terminal run's
        exit waited out the whole delay)."""
        items: list[tuple[str, Any]] = []
        deadline = time.monotonic() + self.batch_delay_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                item = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            items.append(item)
            if item[0] in ("close", "flush"):
                break
        return items

    def _take(self, items: list[tuple[str, Any]]) -> bool:
        stop = False
        for kind, value in items:
            if kind == "add":
                self._unwritten.append(value)
            elif kind == "reasoning":
                self._apply_reasoning(*value)
            elif kind == "close":
                stop = True
        excess = len(self._unwritten) - self.max_unwritten
        if excess > 0:
            log.warning("the store has been unavailable for a while: %d usage record(s) dropped", excess)
            del self._unwritten[:excess]
        return stop

    def _apply_reasoning(self, key: int, tokens: int) -> None:
        for record in reversed(self._unwritten):
            if record.key == key:
                record.reasoning_tokens = tokens
                return
        row_id = self._rows.get(key)
        if row_id is not None:
            self._late.append((row_id, tokens))
        else:
            log.debug("a reasoning count arrived for a job with no usage row; ignored")

    def _write(self) -> None:
        if not self._unwritten and not self._late:
            return
        batch, late = list(self._unwritten), list(self._late)
        try:
            with self.store.writing() as conn:
                ids = [conn.execute(_INSERT, record.row()).lastrowid for record in batch]
                conn.executemany(f"UPDATE {TABLE} SET reasoning_tokens = ? WHERE id = ?",
                                 [(tokens, row_id) for row_id, tokens in late])
                self._prune(conn)
        except StoreError as exc:
            if not self._failing:
                log.warning("usage not recorded yet (%s); %d record(s) kept for a retry", exc, len(batch))
            self._failing = True
            return
        except Exception:  # a bug here must not stop the writer: the rows are kept for a retry
            log.exception("writing usage records failed")
            return
        if self._failing:
            log.info("usage recording resumed; %d kept record(s) written", len(batch))
        self._failing = False
        del self._unwritten[: len(batch)]
        del self._late[: len(late)]
        for record, row_id in zip(batch, ids):
            if row_id is not None:
                self._rows[record.key] = row_id
                self._rows.move_to_end(record.key)
        while len(self._rows) > _REMEMBERED_ROWS:
            self._rows.popitem(last=False)

    def _prune(self, conn: Any) -> None:
        """Rows older than ``usage_retention_days`` (0 keeps everything), at most every few hours."""
        now = time.time()
        days = self._retention_days()
        if days <= 0 or now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        removed = conn.execute(f"DELETE FROM {TABLE} WHERE at < ?", [now - days * 86400.0]).rowcount
        if removed:
            log.info("usage: removed %d record(s) older than %d days", removed, days)


class ReasoningCount:
    """Counts one job's reasoning tokens as a front end reads its chunks, and reports the
    count to the recorder once the job's stream has ended (``usage.ReasoningTally``)."""

    def __init__(self, recorder: UsageRecorder, job: GenerateJob, inside: str | None = None) -> None:
        self._recorder = recorder
        self._job = job
        self._tally = ReasoningTally(inside)
        self._reported = False

    def feed(self, chunk: Chunk) -> None:
        self._tally.feed(chunk.text, len(chunk.token_ids))

    def done(self) -> None:
        if not self._reported:
            self._reported = True
            self._recorder.note_reasoning(self._job, self._tally.finish())

"""One assistant answer in progress, and how it is saved: the bottom of the chat package.

A turn reads a job's events (a local job on the scheduler, or a remote engine's answer) and
saves the answer when the job ends: complete, or marked ``partial`` when it was stopped or
failed, so nothing the user saw is lost. It knows the store and the job, nothing of the chat
service, so the service and tool turns can both build on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..base import EMPTY, ENDED, Chunk, Finished, InglenookError, JobHandle, PromptProgress
from ..remote import RemoteAnswer
from ..store import Conversation, Message, Store
from ..usage import ReasoningCount


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
                 model_id: str, reply_to: int | None, extends: Message | None = None) -> None:
        self.store = store
        # A cut-off answer this turn continues: saved as that message, made longer.
        self.extends = extends
        # The message this answer replies to, fixed when it started: the answer is saved as
        # its child (a version beside earlier answers to it) whatever the chosen path is by then.
        self.reply_to = reply_to
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
        if self.extends is not None:
            before = self.extends
            stats["completion_tokens"] = (before.completion_tokens or 0) + (stats.get("completion_tokens") or 0)
            self.message = self.store.update_message(before.id, content=before.content + text, **stats)
            return
        self.message = self.store.add_message(self.conversation.id, "assistant", text, parent_id=self.reply_to,
                                              **stats)

"""The speech lane: one worker thread that runs every transcription and speech request in turn.

Why not the scheduler: its step loop owns llama.cpp's contexts and batches every text stream
into one decode per step; a transcription (seconds of CTranslate2 work) submitted there would
hold every stream for its whole length. On its own thread, with CTranslate2's threads bounded
(``speech_threads``), the operating system shares the cores and both keep moving.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def speech_threads() -> int:
    """CTranslate2's threads: all cores but one (the step loop's), at least one, at most four
    (tiny models gain nothing past that). ``INGLENOOK_SPEECH_THREADS`` overrides."""
    configured = os.environ.get("INGLENOOK_SPEECH_THREADS")
    if configured and configured.isdigit() and int(configured) > 0:
        return int(configured)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(4, cores - 1))


class SpeechLane:
    """A single worker thread: requests run one at a time, in the order they came."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inglenook-speech")

    def submit(self, work: Callable[[], T]) -> Future[T]:
        return self._pool.submit(work)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

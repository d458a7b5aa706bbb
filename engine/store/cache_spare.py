"""A buffer paged in ahead of the prefix cache's next save.

Copying a state into fresh memory costs ~10x the copy itself (first-touch page faults: ~130 ms
against ~10 ms for 44 MB here), and that cost sits between an answer and the next job;
faulting the pages in on a helper thread while the model works moves it off that path.

While the model works, not while it reads a prompt: on two cores the page-in takes one of the
two cores the prompt's decode runs on, and llama.cpp's threads wait for each other at every
step, so a restored conversation's first token came ~100 ms later (SmolLM2, a 46-token
re-read after a restart: 0.21 s alone, 0.30-0.34 s beside the page-in). So the cache only
notes the size it ``want``s; the scheduler says when no prompt is being read (``start``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

PAGE_BYTES = 4096
SPARE_HEADROOM_BYTES = 8 * 1024 * 1024  # room for the next turn's tokens beyond the last state's size


class SpareBuffer:
    """At most one paged-in buffer, prepared on a helper thread, taken by one save."""

    def __init__(self, lock: threading.RLock, ram_budget: Callable[[], int]) -> None:
        self._lock = lock  # the cache's
        self._ram_budget = ram_budget
        self.buffer: np.ndarray | None = None
        self._preparing = False
        self._wanted = 0  # a size noted by ``want``, paged in at the next ``start``
        self.closed = False

    def take(self, size: int) -> np.ndarray | None:
        """The paged-in buffer, cut to ``size``, when it is large enough (it is then used up).

        The saved entry keeps the whole buffer alive, so one more than twice the state is
        not used: a small state is copied into memory of its own size (a few milliseconds)
        rather than holding the buffer's headroom in the RAM tier for as long as it stays."""
        with self._lock:
            spare = self.buffer
            if spare is None or not size <= len(spare) <= 2 * size:
                return None
            self.buffer = None
        return spare[:size]

    def want(self, size: int) -> None:
        """Note that the next save will need room for a state of about ``size`` bytes;
        nothing is paged in before ``start``."""
        with self._lock:
            self._wanted = max(self._wanted, size)

    def start(self) -> None:
        """Page in what ``want`` noted, on a helper thread (no prompt is being read now)."""
        if not self._wanted:  # the scheduler asks after every step: most find nothing noted
            return
        with self._lock:
            size, self._wanted = self._wanted, 0
        if size:
            self.prepare(size)

    def prepare(self, size: int) -> None:
        """Page in a buffer with room for a state of ``size`` bytes to grow, on a helper thread."""
        wanted = size + max(size // 4, SPARE_HEADROOM_BYTES)
        with self._lock:
            if self.closed or self._preparing or max(0, self._ram_budget()) < wanted:
                return
            if self.buffer is not None and len(self.buffer) >= wanted:
                return
            self._preparing = True

        def page_in() -> None:
            try:
                buffer = np.empty(wanted, dtype=np.uint8)
                buffer[::PAGE_BYTES] = 0  # one write per page makes the kernel back it now
                with self._lock:
                    if not self.closed and (self.buffer is None or len(self.buffer) < wanted):
                        self.buffer = buffer
            finally:
                with self._lock:
                    self._preparing = False

        threading.Thread(target=page_in, name="inglenook-cache-spare", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self.buffer = None

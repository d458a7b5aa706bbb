"""Waiting in tests for something another thread does, without measuring how long it takes."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float = 120.0, failure: str = "condition not reached",
               interval: float = 0.05) -> None:
    """Poll ``condition``; the timeout only bounds a hang, it is not what the test measures.
    ``failure`` says what did not happen; ``interval`` spaces polls that start a program."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(failure)
        time.sleep(interval)

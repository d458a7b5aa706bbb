"""A cancel event that can tell someone the moment it is set.

A ``threading.Event`` can only be waited on or polled. The runtime needs more while a long
prompt chunk is inside ``llama_decode`` (seconds on a CPU, with no Python running): the
moment Stop is pressed it flips a flag that llama.cpp reads between graph nodes, so the
chunk ends at once instead of after the whole chunk. Hooks run on the thread that sets the
event and must be quick: they set flags, nothing more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class CancelEvent(threading.Event):
    """A ``threading.Event`` whose ``set`` also calls the hooks registered with ``on_set``."""

    def __init__(self) -> None:
        super().__init__()
        self._hooks: list[Callable[[], None]] = []
        self._hooks_lock = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._hooks_lock:
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def on_set(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Call ``hook`` when the event is set (at once if it already is); returns the function
        that removes the hook again."""
        with self._hooks_lock:
            self._hooks.append(hook)
        if self.is_set():
            hook()

        def remove() -> None:
            with self._hooks_lock:
                if hook in self._hooks:
                    self._hooks.remove(hook)

        return remove

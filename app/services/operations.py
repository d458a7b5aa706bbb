"""The one way the window runs background work: a callable on a worker lane, its result back on
the GUI thread, its failure put into words by ``errors.explain``.

Pages and controllers ask ``Operations`` instead of holding lanes themselves. A failure goes to
the caller's own handler when it passes one (a page that shows the words beside the form that
failed), and otherwise to ``failed``, which the window shows in its banner. Either way the
handler gets an ``Explanation``, never the raw exception, so no corner of the window shows a
bare ``str(exc)`` to a person.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from PySide6.QtCore import QObject, Signal

from inglenook.app.services.errors import Explanation, explain
from inglenook.app.services.workers import Lane, Workers

log = logging.getLogger(__name__)

T = TypeVar("T")
# The lanes of services/workers.py, by the kind of work each one holds.
LaneName = Literal["answers", "downloads", "models", "disk", "network", "server", "lab", "voice"]
OnFailed = Callable[[Explanation], None]


class Operations(QObject):
    """Runs work on the window's lanes and reports failures in one way."""

    failed = Signal(object)  # an Explanation nobody else handled: the window's banner shows it

    def __init__(self, workers: Workers, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.workers = workers

    @classmethod
    def of_its_own(cls, parent: QObject | None = None) -> Operations:
        """Operations on lanes of their own, for a page opened outside the window (a test, a
        script); its owner closes them with ``close``."""
        return cls(Workers(parent), parent)

    def wait(self, lane: LaneName, timeout_ms: int = 10_000) -> bool:
        """Wait until what is queued on ``lane`` has run (shutdown and tests only)."""
        return self.lane(lane).wait(timeout_ms)

    def close(self, timeout_ms: int = 5_000) -> None:
        """End the lanes (only for ``of_its_own``: the window closes its own Workers)."""
        self.workers.close(timeout_ms)

    def lane(self, name: LaneName) -> Lane:
        lane: Lane = getattr(self.workers, name)
        return lane

    def run(self, lane: LaneName, fn: Callable[[], Any], on_done: Callable[[Any], None] | None = None,
            on_failed: OnFailed | None = None) -> None:
        """Run ``fn`` on ``lane``; ``on_done(result)`` runs on the GUI thread. A failure is
        explained and handed to ``on_failed``, or to the banner when there is none."""
        self.lane(lane).run(fn, on_done, self.failure_handler(on_failed))

    def run_typed(self, lane: LaneName, fn: Callable[[], Any], on_done: Callable[[Any], None],
                  on_exception: Callable[[BaseException], None]) -> None:
        """Like ``run``, but ``on_exception`` gets the exception itself: for the few callers
        that tell a failure by its type (a cancelled download is no failure) or pass it on with
        a retry (the Models page's banner); they hand it to ``errors.explain`` themselves."""
        self.lane(lane).run(fn, on_done, on_exception)

    def relay(self, lane: LaneName, callback: Callable[[T], None]) -> Callable[[T], None]:
        """A function any thread may call: ``callback`` gets its argument on the GUI thread."""
        return self.lane(lane).relay(callback)

    def run_apart(self, name: str, fn: Callable[[], Any], on_done: Callable[[Any], None] | None = None,
                  on_failed: OnFailed | None = None) -> None:
        """Run ``fn`` on a thread of its own, for work that may wait on a person for minutes
        (a browser sign-in) and must not hold a lane's thread meanwhile."""
        lane = self.lane("network")  # only its relay: the work itself never enters the lane
        done = lane.relay(on_done) if on_done is not None else None
        failed = lane.relay(self.failure_handler(on_failed))

        def work() -> None:
            try:
                value = fn()
            except Exception as exc:  # noqa: BLE001 — handed back to the GUI thread, never swallowed
                failed(exc)
            else:
                if done is not None:
                    done(value)

        threading.Thread(target=work, name=f"inglenook-{name}", daemon=True).start()

    def failure_handler(self, on_failed: OnFailed | None = None) -> Callable[[BaseException], None]:
        """What a lane calls with an exception: explained, then to ``on_failed`` or the banner."""

        def handle(exc: BaseException) -> None:
            explanation = explain(exc)
            log.info("background work failed: %s", explanation.detail or explanation.text)
            if on_failed is not None:
                on_failed(explanation)
            else:
                self.failed.emit(explanation)

        return handle

    def report(self, exc: BaseException, on_failed: OnFailed | None = None) -> None:
        """Explain a failure met on the GUI thread (a form that did not parse) the same way."""
        self.failure_handler(on_failed)(exc)

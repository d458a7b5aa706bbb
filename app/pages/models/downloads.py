"""Downloads on the Models page: one card per download in progress, one per interrupted one.

A download runs on the downloads lane (``Workers.downloads``) and blocks there; its progress callback
is called on that thread, so ``DownloadJob`` re-emits it as a signal delivered over a queued
connection to the GUI thread. Cancel sets the job's event; the engine then raises
``JobCancelled`` and keeps the partial file, which comes back as an interrupted download
offered for Resume or Discard.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from inglenook.engine import (
    DownloadProgress,
    Engine,
    JobCancelled,
    ModelRecord,
    PendingDownload,
    QuantOption,
    downloader_for,
    quant_from_name,
)
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.app.text.formatting import human_duration, human_size
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

_SPLIT_PART = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)


def time_left(seconds: float | None) -> str:
    return "estimating…" if seconds is None else f"{human_duration(seconds)} left"


def progress_text(p: DownloadProgress) -> str:
    """'45.2 MB of 104.0 MB · 3.1 MB/s · 32 s left' (or the verifying / done phase)."""
    amount = f"{human_size(p.done_bytes)} of {human_size(p.total_bytes)}"
    if p.phase == "verifying":
        return f"Verifying checksum… {amount}"
    if p.phase == "done":
        return f"Installed · {human_size(p.total_bytes)}"
    parts = f"part {p.part} of {p.parts} · " if p.parts > 1 else ""
    speed = f"{human_size(p.bytes_per_s)}/s" if p.bytes_per_s > 0 else "starting…"
    return f"{parts}{amount}  ·  {speed}  ·  {time_left(p.eta_s)}"


class DownloadJob(QObject):
    """One running download. Lives on the GUI thread; the worker only emits its signals."""

    progressed = Signal(object)  # DownloadProgress
    finished = Signal(object)  # ModelRecord
    failed = Signal(object)  # BaseException (JobCancelled when cancelled)

    def __init__(self, key: tuple[str, str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.key = key  # (repo, first file path): one job per model at a time
        self.cancel_event = threading.Event()
        self.last: DownloadProgress | None = None

    def report(self, progress: DownloadProgress) -> None:
        """Called on the download thread; crosses to the GUI thread as a queued signal."""
        self.progressed.emit(progress)

    def run(self, operations: Operations, work: Callable[[DownloadJob], ModelRecord]) -> None:
        # Typed: a cancelled download (JobCancelled) is told apart from a failed one.
        operations.run_typed("downloads", lambda: work(self), self.finished.emit, self.failed.emit)

    def cancel(self) -> None:
        self.cancel_event.set()


class DownloadCard(QFrame):
    """Name, progress bar, bytes · speed · time left, Cancel."""

    cancel_requested = Signal()

    def __init__(self, repo: str, title: str, quant: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("DownloadCard")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 14, 12)
        layout.setSpacing(7)
        top = QHBoxLayout()
        top.setSpacing(8)
        self.title = QLabel(title, self)
        self.title.setObjectName("ModelName")
        self.repo = repo
        badge = QLabel(quant, self)
        badge.setObjectName("Badge")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("SmallButton")
        self.cancel_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.cancel_button.clicked.connect(self._cancel)
        top.addWidget(self.title)
        top.addWidget(badge)
        top.addStretch(1)
        top.addWidget(self.cancel_button)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.status = QLabel(f"{repo}  ·  connecting…", self)
        self.status.setObjectName("ProgressText")
        layout.addLayout(top)
        layout.addWidget(self.bar)
        layout.addWidget(self.status)

    def set_progress(self, progress: DownloadProgress) -> None:
        self.bar.setValue(int(progress.fraction * 1000))
        self.status.setText(f"{self.repo}  ·  {progress_text(progress)}")

    def _cancel(self) -> None:
        self.cancel_button.setEnabled(False)
        self.status.setText("Cancelling…")
        self.cancel_requested.emit()


@dataclass
class PendingGroup:
    """The interrupted parts of one model (a split set is several staging files)."""

    repo: str
    parts: list[PendingDownload]

    @property
    def first(self) -> PendingDownload:
        return self.parts[0]

    @property
    def name(self) -> str:
        base = self.first.path.rsplit("/", 1)[-1]
        return _SPLIT_PART.sub(".gguf", base) if _SPLIT_PART.search(base) else base

    @property
    def done_bytes(self) -> int:
        return sum(p.done_bytes for p in self.parts)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)


def group_pending(pending: list[PendingDownload]) -> list[PendingGroup]:
    groups: dict[tuple[str, str | None, str], PendingGroup] = {}
    for item in sorted(pending, key=lambda p: (p.repo, p.path)):
        stem = _SPLIT_PART.sub("", item.path)
        groups.setdefault((item.repo, item.commit, stem), PendingGroup(item.repo, [])).parts.append(item)
    return list(groups.values())


class PendingCard(QFrame):
    """An interrupted download: how far it got, Resume and Discard."""

    resume_requested = Signal(object)  # PendingGroup
    discard_requested = Signal(object)

    def __init__(self, group: PendingGroup, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("DownloadCard")
        self.group = group
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 14, 12)
        layout.setSpacing(7)
        top = QHBoxLayout()
        top.setSpacing(8)
        title = QLabel(group.name, self)
        title.setObjectName("ModelName")
        badge = QLabel("Interrupted", self)
        badge.setObjectName("MutedBadge")
        self.resume_button = QPushButton("Resume", self)
        self.resume_button.setObjectName("PrimarySmallButton")
        self.discard_button = QPushButton("Discard", self)
        self.discard_button.setObjectName("SmallButton")
        for button in (self.resume_button, self.discard_button):
            button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.resume_button.clicked.connect(lambda: self.resume_requested.emit(group))
        self.discard_button.clicked.connect(lambda: self.discard_requested.emit(group))
        top.addWidget(title)
        quant = quant_from_name(group.first.path)
        if quant:
            quant_badge = QLabel(quant, self)
            quant_badge.setObjectName("Badge")
            top.addWidget(quant_badge)
        top.addWidget(badge)
        top.addStretch(1)
        top.addWidget(self.resume_button)
        top.addWidget(self.discard_button)
        bar = QProgressBar(self)
        bar.setObjectName("PausedBar")
        bar.setRange(0, 1000)
        bar.setTextVisible(False)
        bar.setValue(int(group.done_bytes / group.size * 1000) if group.size else 0)
        status = QLabel(f"{group.repo}  ·  stopped at {human_size(group.done_bytes)} of {human_size(group.size)}; "
                        "Resume continues from there", self)
        status.setObjectName("ProgressText")
        layout.addLayout(top)
        layout.addWidget(bar)
        layout.addWidget(status)


class DownloadsPanel(QWidget):
    """The DOWNLOADS section: hidden while there is nothing to show."""

    installed = Signal(object)  # ModelRecord
    failed = Signal(object)  # BaseException (never JobCancelled)
    changed = Signal()  # the set of running downloads changed

    def __init__(self, engine: Engine, operations: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.operations = operations
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        label = QLabel("DOWNLOADS", self)
        label.setObjectName("SectionLabel")
        layout.addWidget(label)
        self.cards_layout = QVBoxLayout()
        self.cards_layout.setSpacing(8)
        layout.addLayout(self.cards_layout)
        self.jobs: dict[tuple[str, str], tuple[DownloadJob, DownloadCard]] = {}
        self.pending: list[PendingGroup] = []
        self.pending_cards: list[PendingCard] = []
        self.retry: Callable[[], None] | None = None  # restarts the download that failed last
        self.hide()

    # -- starting ---------------------------------------------------------------------------

    def is_running(self, repo: str, path: str) -> bool:
        return (repo, path) in self.jobs

    def start(self, repo: str, option: QuantOption, commit: str | None) -> DownloadJob | None:
        """Download ``option`` of ``repo``; None when it is already downloading."""
        engine = self.engine

        def work(job: DownloadJob) -> ModelRecord:
            dl = downloader_for(engine)
            return dl.download(repo, option, commit=commit, progress=job.report, cancel=job.cancel_event)

        return self._launch((repo, option.name), option.display_name, option.quant, work,
                            lambda: self.start(repo, option, commit))

    def resume(self, group: PendingGroup) -> DownloadJob | None:
        engine = self.engine
        first = group.first

        def work(job: DownloadJob) -> ModelRecord:
            return downloader_for(engine).resume(first, progress=job.report, cancel=job.cancel_event)

        return self._launch((group.repo, first.path), group.name, quant_from_name(first.path) or "GGUF", work,
                            lambda: self.resume(group))

    def _launch(self, key: tuple[str, str], title: str, quant: str,
                work: Callable[[DownloadJob], ModelRecord], again: Callable[[], object]) -> DownloadJob | None:
        if key in self.jobs:
            return None
        job = DownloadJob(key, self)
        card = DownloadCard(key[0], title, quant, self)
        job.progressed.connect(lambda p, j=job: self._progressed(j, p), Qt.ConnectionType.QueuedConnection)
        job.finished.connect(lambda record, j=job: self._finished(j, record))
        job.failed.connect(lambda exc, j=job, a=again: self._failed(j, exc, a))
        card.cancel_requested.connect(job.cancel)
        self.jobs[key] = (job, card)
        self.cards_layout.insertWidget(len(self.jobs) - 1, card)
        self._show_pending()  # a resumed download leaves the interrupted list
        self.setVisible(True)
        job.run(self.operations, work)
        self.changed.emit()
        return job

    # -- running ----------------------------------------------------------------------------

    def _progressed(self, job: DownloadJob, progress: DownloadProgress) -> None:
        entry = self.jobs.get(job.key)
        if entry is not None and not job.cancel_event.is_set():
            job.last = progress
            entry[1].set_progress(progress)

    def _finished(self, job: DownloadJob, record: ModelRecord) -> None:
        self._drop(job)
        self.installed.emit(record)
        self.refresh_pending()

    def _failed(self, job: DownloadJob, exc: BaseException, again: Callable[[], object]) -> None:
        self._drop(job)
        if not isinstance(exc, JobCancelled):
            self.retry = lambda: (again(), None)[1]
            log.info("download of %s failed: %s", job.key, exc)
            self.failed.emit(exc)
        self.refresh_pending()

    def _drop(self, job: DownloadJob) -> None:
        _, card = self.jobs.pop(job.key, (None, None))
        if card is not None:
            card.hide()
            card.deleteLater()
        job.deleteLater()
        self._update_visibility()
        self.changed.emit()

    def cancel_all(self) -> None:
        for job, _ in self.jobs.values():
            job.cancel()

    # -- interrupted downloads ----------------------------------------------------------------

    def refresh_pending(self) -> None:
        engine = self.engine
        self.operations.run_typed("disk", lambda: group_pending(downloader_for(engine).pending()), self._pending_loaded,
                                  self._side_failed)

    def _pending_loaded(self, groups: list[PendingGroup]) -> None:
        self.pending = groups
        self._show_pending()

    def _show_pending(self) -> None:
        for card in self.pending_cards:
            card.hide()
            card.deleteLater()
        self.pending_cards = []
        for group in self.pending:
            if any((group.repo, p.path) in self.jobs for p in group.parts) or \
                    any(key[0] == group.repo and _SPLIT_PART.sub("", key[1]) == _SPLIT_PART.sub("", group.first.path)
                        for key in self.jobs):
                continue  # being resumed right now
            card = PendingCard(group, self)
            card.resume_requested.connect(self.resume)
            card.discard_requested.connect(self.discard)
            self.cards_layout.addWidget(card)
            self.pending_cards.append(card)
        self._update_visibility()

    def discard(self, group: PendingGroup) -> None:
        engine = self.engine

        def work() -> None:
            dl = downloader_for(engine)
            for part in group.parts:
                dl.discard(part.sha256)

        self.operations.run_typed("disk", work, lambda _: self.refresh_pending(), self._side_failed)

    def _side_failed(self, exc: BaseException) -> None:
        self.retry = None
        self.failed.emit(exc)

    def _update_visibility(self) -> None:
        self.setVisible(bool(self.jobs) or bool(self.pending_cards))

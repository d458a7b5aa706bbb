"""Keeps the composer's attachment chips in step with the open conversation's documents, and
attaches new ones.

Conversion runs in the engine's conversion worker (a separate process), called from the
window's models lane (long work, like a model import), never on the GUI thread; the chips
come back as queued results. A file attached in a new chat creates the chat first (it then
opens, with its documents, ready for the first question).
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog

from inglenook.engine import Document, DocumentError, Engine

from .active_chat import ActiveChat
from .attachments import AttachmentBar, DocumentPreview
from .workers import Workers

log = logging.getLogger(__name__)


class Attachments(QObject):
    """Keeps the bar in step with the open conversation's documents and attaches new ones."""

    changed = Signal()  # the chips were redrawn (tests wait for it)

    def __init__(self, engine: Engine, workers: Workers, bar: AttachmentBar, active: ActiveChat,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.workers = workers
        self.bar = bar
        self.active = active
        self.documents: list[Document] = []
        self.preview: DocumentPreview | None = None
        bar.attach_requested.connect(self.choose_files)
        bar.preview_requested.connect(self.show_preview)
        bar.remove_requested.connect(self.remove)
        active.current_changed.connect(self.reload)

    def choose_files(self) -> None:
        names, _ = QFileDialog.getOpenFileNames(self.bar, "Attach documents")
        if names:
            self.attach([Path(n) for n in names])

    def reload(self, conversation_id: int | None = None) -> None:
        conversation_id = self.active.current_id if conversation_id is None else conversation_id
        if conversation_id is None:
            self._shown(([], "whole", []))
            return
        chats, model = self.engine.chats, self.active.model_for(self.active.conversation)

        def load() -> tuple[list[Document], str, list[str]]:
            documents = chats.attached_documents(conversation_id)
            return documents, chats.document_placement(documents, model), []

        self.workers.disk.run(load, self._shown, self._failed)

    def attach(self, paths: list[Path]) -> None:
        """Convert ``paths`` (in the conversion worker) and attach what could be read."""
        chats = self.engine.chats
        conversation_id = self.active.current_id
        model = self.active.model_for(self.active.conversation)
        names = ", ".join(p.name for p in paths)
        self.bar.show_status(f"Reading {names}…")

        def convert_and_attach() -> tuple[int, bool, list[Document], str, list[str]]:
            from inglenook.engine import convert_file  # noqa: PLC0415 — the engine's conversion worker

            read, errors = [], []
            for path in paths:
                try:
                    read.append(convert_file(path))
                except DocumentError as exc:
                    errors.append(str(exc))
            created = False
            target = conversation_id
            if target is None and read:
                target, created = chats.new_conversation(model_id=self.active.draft_model).id, True
            documents = chats.attach_documents(target, read) if target is not None and read else []
            return target or 0, created, documents, chats.document_placement(documents, model), errors

        def done(result: tuple[int, bool, list[Document], str, list[str]]) -> None:
            target, created, documents, placement, errors = result
            if created:
                self.active.open(target)
                self.active.conversation_changed.emit()
            if documents or target == self.active.current_id:
                self._shown((documents, placement, errors))
            else:
                self._shown((self.documents, "whole", errors))

        self.workers.models.run(convert_and_attach, done, self._failed)

    def remove(self, sha256: str) -> None:
        conversation_id = self.active.current_id
        if conversation_id is None:
            return
        chats = self.engine.chats
        self.workers.disk.run(lambda: chats.detach_document(conversation_id, sha256), lambda _: self.reload(),
                              self._failed)

    def show_preview(self, sha256: str) -> None:
        document = next((d for d in self.documents if d.sha256 == sha256), None)
        if document is not None:
            self.preview = DocumentPreview(document, self.bar.window())
            self.preview.show()

    def _shown(self, result: tuple[list[Document], str, list[str]]) -> None:
        documents, placement, errors = result
        self.documents = documents
        self.bar.show_documents(documents, placement)
        self.bar.show_status("\n".join(errors))
        self.changed.emit()

    def _failed(self, exc: BaseException) -> None:
        log.info("attaching documents failed: %s", exc)
        self.bar.show_status(str(exc))
        self.changed.emit()

"""The composer's documents: the paperclip, one chip per document (name, pages, about how
many tokens, "whole" or "searched"; click for a preview of the text the model reads,
Shift+click to remove it) and a line for a file that could not be read. The controller that
fills them is ``attachments_controller``."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QToolButton, QVBoxLayout, QWidget

from inglenook.engine import Document, human_count

CHARS_PER_TOKEN = 4  # what a chip shows is an estimate: the model's tokenizer decides


def chip_text(document: Document, placement: str) -> str:
    pages = f" · {document.page_count} pages" if document.page_count else ""
    tokens = human_count(max(1, len(document.text) // CHARS_PER_TOKEN))
    return f"{document.name}{pages} · ≈{tokens} tokens · {placement}"


class DocumentPreview(QDialog):
    """The text the model reads of one document."""

    def __init__(self, document: Document, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(document.name)
        self.resize(720, 560)
        layout = QVBoxLayout(self)
        notes = "  ".join(document.notes)
        summary = QLabel(f"{document.kind.upper()} · {len(document.text):,} characters"
                         + (f" · {document.page_count} pages" if document.page_count else "") + (f"  —  {notes}" if notes else ""))
        layout.addWidget(summary)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setPlainText(document.text)
        layout.addWidget(self.text, 1)


class AttachmentBar(QWidget):
    """Chips above the message box; hidden while the chat has none."""

    preview_requested = Signal(str)  # a document's sha256
    remove_requested = Signal(str)
    attach_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attach_button = QToolButton()
        self.attach_button.setText("+")
        self.attach_button.setObjectName("AttachButton")
        self.attach_button.setFixedSize(32, 32)
        self.attach_button.setToolTip("Attach documents (PDF, Word, PowerPoint, Excel, CSV, HTML, text)")
        self.attach_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.attach_button.clicked.connect(self.attach_requested)
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self.status = QLabel(self)
        self.status.setObjectName("AttachmentStatus")
        self.status.setWordWrap(True)
        self._chips: dict[str, QPushButton] = {}
        self._layout.addWidget(self.status, 1)
        self.show_documents([], "whole")

    def chips(self) -> dict[str, QPushButton]:
        return dict(self._chips)

    def show_documents(self, documents: list[Document], placement: str) -> None:
        for chip in self._chips.values():
            self._layout.removeWidget(chip)
            chip.deleteLater()
        self._chips = {}
        for index, document in enumerate(documents):
            chip = QPushButton(chip_text(document, placement) + "  ✕", self)
            chip.setObjectName("AttachmentChip")
            chip.setToolTip("Click to see the text the model reads; Shift+click to remove it")
            chip.clicked.connect(lambda _=False, sha=document.sha256: self._chip_clicked(sha))
            self._layout.insertWidget(index, chip)
            self._chips[document.sha256] = chip
        self._update_visibility()

    def _chip_clicked(self, sha256: str) -> None:
        from PySide6.QtWidgets import QApplication  # noqa: PLC0415 — keyboard state at the click

        if QApplication.keyboardModifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.remove_requested.emit(sha256)
        else:
            self.preview_requested.emit(sha256)

    def show_status(self, text: str) -> None:
        self.status.setText(text)
        self._update_visibility()

    def _update_visibility(self) -> None:
        self.setVisible(bool(self._chips) or bool(self.status.text()))

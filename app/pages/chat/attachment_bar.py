"""The composer's documents: the paperclip, one chip per document (name, pages, about how
many tokens, "whole" or "searched"; click for a preview of the text the model reads,
Shift+click to remove it) and a line for a file that could not be read. The controller that
fills them is ``attachments_controller``.

Images waiting to be sent with the next message are chips too: a thumbnail (click to see it
larger) and ✕ to remove it; when the chat's model cannot read images, a line says so and
offers the installed vision models (``image_attachments`` fills them).

When documents are searched and no embedding model is installed, a quiet line under the chips
says search uses the chat model and offers the recommended encoder's download, or "Not now".

Citations: an answer cites a passage as ``[report.pdf, page 3]`` (the documents' block and
the retrieved passages ask for that form); ``markdown.render_markdown`` makes each one a
``cite:`` link, and a click opens the preview at that page, slide or heading. A recording's
citation names a time (``[meeting.m4a, 12:31]``): a click plays the recording from there
(``widgets/recording_player``). While a recording is transcribed, a line under the chips
shows how far it is, with Stop.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QColor, QImage, QTextCharFormat, QTextCursor, QTextFormat
from PySide6.QtWidgets import (
    QDialog, QFileDialog, QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QProgressBar, QPushButton, QTextEdit, QToolButton,
    QVBoxLayout, QWidget,
)

from inglenook.engine import Document, human_count

from inglenook.app.widgets.flow_layout import FlowLayout
from inglenook.app.widgets.image_viewer import ImageViewer, Picture, thumbnail_button
from inglenook.app.widgets.recording_player import RecordingPlayer
from inglenook.app.text.markdown import CITE_SCHEME as CITE_SCHEME

IMAGE_CHIP = 48  # a waiting image's thumbnail side
MAX_OFFERED_MODELS = 3  # vision models offered as buttons when the chat's model reads no images
CHARS_PER_TOKEN = 4  # what a chip shows is an estimate: the model's tokenizer decides
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)


def parse_citation(url: QUrl) -> tuple[str, str]:
    """(the document's name, where in it: "page 3", "slide 2", a heading or "") of a ``cite:`` link."""
    return unquote(url.path()), unquote(url.fragment())


def section_start(text: str, where: str) -> int | None:
    """Where in a document's text the cited page, slide or heading starts (None: not found)."""
    wanted = where.strip().lower()
    if not wanted:
        return None
    for heading in _HEADING.finditer(text):
        if heading.group(1).strip().lower() == wanted:
            return heading.start()
    return None


def pages_text(count: int) -> str:
    return f" · {count} page" + ("s" if count != 1 else "") if count else ""


def chip_text(document: Document, placement: str) -> str:
    pages = pages_text(document.page_count) or (" · recording" if document.kind == "audio" else "")
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
                         + pages_text(document.page_count) + (f"  —  {notes}" if notes else ""))
        layout.addWidget(summary)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setPlainText(document.text)
        layout.addWidget(self.text, 1)
        self.document = document

    def show_section(self, where: str) -> bool:
        """Scroll the cited section to the top and mark it; False when it is not found."""
        start = section_start(self.document.text, where)
        if start is None:
            return False
        following = _HEADING.search(self.document.text, start + 1)
        end = following.start() if following else len(self.document.text)
        cursor = QTextCursor(self.text.document())
        cursor.setPosition(start)
        self.text.setTextCursor(cursor)
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())  # then back up until the cursor shows: its line at the top
        self.text.ensureCursorVisible()
        mark = QTextEdit.ExtraSelection()
        mark.cursor = QTextCursor(self.text.document())
        mark.cursor.setPosition(start)
        mark.cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        highlight = QTextCharFormat()
        highlight.setBackground(QColor(255, 214, 102, 90))
        highlight.setProperty(QTextFormat.Property.FullWidthSelection, True)
        mark.format = highlight
        self.text.setExtraSelections([mark])
        return True


class AttachmentBar(QWidget):
    """Chips above the message box; hidden while the chat has none."""

    preview_requested = Signal(str)  # a document's sha256
    remove_requested = Signal(str)
    attach_requested = Signal()
    image_clicked = Signal(object)  # a waiting image's Picture
    image_remove_requested = Signal(int)  # its place among the waiting images
    model_offered = Signal(str)  # a vision model to switch the chat to
    send_without_images = Signal()  # "Send without images" on the line that says they cannot go
    models_wanted = Signal()  # "Models…" on it: where vision models are found
    encoder_download_clicked = Signal()  # "Download <encoder> (<size>)" on the search line
    encoder_dismissed = Signal()  # "Not now" on it
    recording_stop_clicked = Signal()  # "Stop" beside a recording's transcription progress

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attach_button = QToolButton()
        self.attach_button.setText("+")
        self.attach_button.setObjectName("AttachButton")
        self.attach_button.setFixedSize(32, 32)
        self.attach_button.setToolTip("Attach images (PNG, JPEG, WebP, GIF) or documents (PDF, Word, PowerPoint, "
                                      "Excel, CSV, HTML, text) or recordings (WAV, MP3, M4A, OGG, FLAC, WebM, MP4: "
                                      "transcribed with their times); images can be pasted too")
        self.attach_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.attach_button.clicked.connect(self.attach_requested)
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(6)
        self.status = QLabel(self)
        self.status.setObjectName("AttachmentStatus")
        self.status.setWordWrap(True)
        self._chips: dict[str, QPushButton] = {}
        self.image_chips: list[QFrame] = []
        self._layout.addWidget(self.status, 1)
        # Under the chips: why the images cannot go to this chat's model, and the models that can.
        self.vision_note = QWidget(parent)
        self.vision_note.setObjectName("VisionNote")
        note = QVBoxLayout(self.vision_note)
        note.setContentsMargins(0, 0, 0, 0)
        note.setSpacing(4)
        self.vision_text = QLabel(self.vision_note)
        self.vision_text.setObjectName("AttachmentStatus")
        self.vision_text.setWordWrap(True)
        note.addWidget(self.vision_text)
        # The ways on, in a row that wraps in a narrow window: a vision model, the message
        # without its images, or the Models page.
        buttons = QWidget(self.vision_note)
        self._vision_buttons = FlowLayout(buttons)
        note.addWidget(buttons)
        self.offer_buttons: list[QPushButton] = []
        self.without_button = QPushButton("Send without images", buttons)
        self.without_button.setToolTip("Send the message now, without the images")
        self.without_button.clicked.connect(self.send_without_images)
        self.models_button = QPushButton("Models…", buttons)
        self.models_button.setToolTip("Find a model that reads images")
        self.models_button.clicked.connect(self.models_wanted)
        self._vision_buttons.addWidget(self.without_button)
        self._vision_buttons.addWidget(self.models_button)
        self.vision_note.hide()
        # Under the chips too: searched documents without an embedding model, and the one to download.
        self.encoder_note = QWidget(parent)
        self.encoder_note.setObjectName("EncoderNote")
        # The words above the buttons: side by side, a narrow window squeezed them into a column.
        encoder_lines = QVBoxLayout(self.encoder_note)
        encoder_lines.setContentsMargins(0, 0, 0, 0)
        encoder_lines.setSpacing(4)
        encoder_row = QHBoxLayout()
        encoder_row.setSpacing(6)
        self.encoder_text = QLabel(self.encoder_note)
        self.encoder_text.setObjectName("EncoderNoteText")
        self.encoder_text.setWordWrap(True)
        self.encoder_button = QPushButton(self.encoder_note)
        self.encoder_button.setObjectName("SmallButton")
        self.encoder_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.encoder_button.clicked.connect(self.encoder_download_clicked)
        self.encoder_later = QPushButton("Not now", self.encoder_note)
        self.encoder_later.setObjectName("SmallButton")
        self.encoder_later.setCursor(Qt.CursorShape.PointingHandCursor)
        self.encoder_later.setToolTip("Stop offering it (Settings keep this)")
        self.encoder_later.clicked.connect(self.encoder_dismissed)
        encoder_lines.addWidget(self.encoder_text)
        encoder_row.addWidget(self.encoder_button)
        encoder_row.addWidget(self.encoder_later)
        encoder_row.addStretch(1)
        encoder_lines.addLayout(encoder_row)
        self.encoder_note.hide()
        # In the bar's row (the composer places only the bar and the notes it knows): a
        # recording being transcribed, how far, and Stop.
        self.recording_note = QWidget(self)
        self.recording_note.setObjectName("RecordingNote")
        recording_row = QHBoxLayout(self.recording_note)
        recording_row.setContentsMargins(0, 0, 0, 0)
        recording_row.setSpacing(6)
        self.recording_text = QLabel(self.recording_note)
        self.recording_text.setObjectName("AttachmentStatus")
        self.recording_progress = QProgressBar(self.recording_note)
        self.recording_progress.setRange(0, 1000)
        self.recording_progress.setTextVisible(False)
        self.recording_progress.setMaximumHeight(8)
        self.recording_stop = QPushButton("Stop", self.recording_note)
        self.recording_stop.setObjectName("SmallButton")
        self.recording_stop.setToolTip("Stop transcribing; the recording is not attached")
        self.recording_stop.clicked.connect(self.recording_stop_clicked)
        recording_row.addWidget(self.recording_text)
        recording_row.addWidget(self.recording_progress, 1)
        recording_row.addWidget(self.recording_stop)
        self._layout.addWidget(self.recording_note, 2)
        self.recording_note.hide()
        self.player: RecordingPlayer | None = None
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

    def show_images(self, pictures: list[Picture]) -> None:
        """The images waiting to go with the next message, as chips."""
        for chip in self.image_chips:
            self._layout.removeWidget(chip)
            chip.deleteLater()
        self.image_chips = []
        for index, picture in enumerate(pictures):
            chip = QFrame(self)
            chip.setObjectName("ImageChip")
            row = QHBoxLayout(chip)
            row.setContentsMargins(2, 2, 2, 2)
            row.setSpacing(2)
            thumb = thumbnail_button(picture, chip, IMAGE_CHIP)
            thumb.clicked.connect(lambda _=False, p=picture: self.image_clicked.emit(p))
            remove = QToolButton(chip)
            remove.setObjectName("ImageChipRemove")
            remove.setText("✕")
            remove.setAutoRaise(True)
            remove.setToolTip("Remove this image")
            remove.setCursor(Qt.CursorShape.PointingHandCursor)
            remove.clicked.connect(lambda _=False, i=index: self.image_remove_requested.emit(i))
            row.addWidget(thumb)
            row.addWidget(remove, 0, Qt.AlignmentFlag.AlignTop)
            self._layout.insertWidget(len(self._chips) + index, chip)
            self.image_chips.append(chip)
        self._update_visibility()

    def show_vision_problem(self, text: str, models: list[str]) -> None:
        """Say why the waiting images cannot go to this chat's model and offer ``models``
        (installed vision models) to switch to; an empty ``text`` hides the line."""
        for button in self.offer_buttons:
            self._vision_buttons.removeWidget(button)
            button.deleteLater()
        self.offer_buttons = []
        self.vision_text.setText(text)
        flow = self._vision_buttons
        for fixed in (self.without_button, self.models_button):
            flow.removeWidget(fixed)  # added again after the models offered
        parent = self.without_button.parentWidget()
        for model_id in models[:MAX_OFFERED_MODELS]:
            button = QPushButton(f"Use {model_id}", parent)
            button.setObjectName("VisionOffer")
            button.setToolTip(f"Answer this chat with {model_id}, which reads images")
            button.clicked.connect(lambda _=False, m=model_id: self.model_offered.emit(m))
            flow.addWidget(button)
            self.offer_buttons.append(button)
        flow.addWidget(self.without_button)
        flow.addWidget(self.models_button)
        self.vision_note.setVisible(bool(text))

    def show_encoder_offer(self, name: str, size: str, downloading: bool = False) -> None:
        """Say that searched documents are embedded by the chat model and offer ``name``
        (``size``) for it; an empty ``name`` hides the line."""
        self.encoder_text.setText("Searching these documents uses the chat model; "
                                  "a small embedding model finds passages better.")
        self.encoder_button.setText(f"Downloading {name}…" if downloading else f"Download {name} ({size})")
        self.encoder_button.setEnabled(not downloading)
        self.encoder_button.setToolTip(f"Download {name} ({size}) from Hugging Face; progress shows on the Models page")
        self.encoder_note.setVisible(bool(name))

    def show_transcribing(self, text: str, fraction: float | None = None) -> None:
        """A recording being transcribed: ``text`` and how far (None: not known yet, a busy
        bar); an empty ``text`` hides the line."""
        self.recording_text.setText(text)
        if fraction is None:
            self.recording_progress.setRange(0, 0)
        else:
            self.recording_progress.setRange(0, 1000)
            self.recording_progress.setValue(round(1000 * min(1.0, max(0.0, fraction))))
        self.recording_stop.setEnabled(True)
        self.recording_note.setVisible(bool(text))
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

    # -- the windows the bar opens for its controllers (which build no widgets) ------------

    def ask_files(self) -> list[Path]:
        """The files the person picks to attach ([] when cancelled)."""
        names, _ = QFileDialog.getOpenFileNames(
            self, "Attach images, documents or recordings", "",
            "Images, documents and recordings (*);;Images (*.png *.jpg *.jpeg *.webp *.gif);;"
            "Recordings (*.wav *.mp3 *.m4a *.ogg *.flac *.webm *.mp4)")
        return [Path(name) for name in names]

    def open_preview(self, document: Document) -> DocumentPreview:
        """A document's preview, shown beside the window."""
        preview = DocumentPreview(document, self.window())
        preview.show()
        return preview

    def play_recording(self, path: Path, seconds: float, name: str, device_id: str = "") -> RecordingPlayer:
        """The recording's player (one for the bar, kept between clicks), playing from ``seconds``
        on the speaker chosen in Settings → Voice (``device_id``; "" the system's default)."""
        if self.player is None:
            self.player = RecordingPlayer(self.window(), device_id)
        self.player.player.device_id = device_id
        self.player.play_from(path, seconds, name)
        self.player.show()
        return self.player

    def open_viewer(self, image: QImage, label: str) -> ImageViewer:
        """A picture at full size, shown beside the window."""
        viewer = ImageViewer(image, label, self.window())
        viewer.show()
        return viewer

    def _update_visibility(self) -> None:
        self.setVisible(bool(self._chips) or bool(self.image_chips) or bool(self.status.text())
                        or bool(self.recording_text.text()))

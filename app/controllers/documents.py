"""Keeps the composer's attachment chips in step with the open conversation's documents, and
attaches new ones.

Recordings (wav, mp3, m4a, ogg, flac, webm, mp4) are transcribed by the engine's speech room
on its own lane, with progress and Stop under the chips, and kept as documents whose text is
headed by times; a click on a citation with a time plays the kept copy from there.

Conversion runs in the engine's conversion worker (a separate process), called from the
window's models lane (long work, like a model import), never on the GUI thread; the chips
come back as queued results. A file attached in a new chat creates the chat first (it then
opens, with its documents, ready for the first question).

Searched documents with no embedding model installed: the bar's encoder line offers the
engine's recommended encoder (``Engine.encoder_offer``, read once on the network lane: its size
from the hub's listing); Download asks the window to start it on the Models page
(``encoder_download_requested``), "Not now" is kept in the settings, and once the model list
holds an encoder the line goes (search picks the smallest installed encoder at each use).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from PySide6.QtCore import QObject, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QWidget

from inglenook.engine import (
    AUDIO_KIND, Document, DocumentError, EncoderOffer, InglenookError, Recordings, human_size, is_recording_name,
    parse_clock, read_recording,
)

from inglenook.app.services.app_engine import AppEngine
from inglenook.app.controllers.active_chat import ActiveChat
from inglenook.app.pages.chat.attachment_bar import CITE_SCHEME, AttachmentBar, DocumentPreview, parse_citation
from inglenook.app.controllers.images import is_image_path
from inglenook.app.pages.models.installed import ModelDropFilter
from inglenook.app.services.errors import explain
from inglenook.app.services.workers import Lane, Workers

log = logging.getLogger(__name__)
T = TypeVar("T")


def document_paths(event: QDragEnterEvent | QDropEvent) -> list[Path]:
    """Local files in a drag that could be documents (not models, not folders)."""
    mime = event.mimeData()
    if not mime.hasUrls():
        return []
    paths = [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
    return [p for p in paths if p.is_file() and p.suffix.lower() != ".gguf"]


class _CitationLinks(QObject):
    """The process's one ``cite:`` handler, never deleted: Qt keeps a handler's receiver as a
    bare pointer (a click after the receiver was deleted crashed), so windows come and go
    behind this one, and a click goes to the newest window's controller still alive."""

    def __init__(self) -> None:
        super().__init__()
        self._controllers: list[Attachments] = []
        # (The method's name as str: PySide6 6.11 refuses the bytes its stub asks for.)
        QDesktopServices.setUrlHandler(CITE_SCHEME, self, "open_citation")  # type: ignore[arg-type]

    def follow(self, controller: Attachments) -> None:
        self._controllers.append(controller)
        controller.destroyed.connect(lambda: self._forget(controller))

    def _forget(self, controller: Attachments) -> None:
        self._controllers = [c for c in self._controllers if c is not controller]

    @Slot(QUrl)
    def open_citation(self, url: QUrl) -> None:
        if self._controllers:
            self._controllers[-1].open_citation(url)


_LINKS: list[_CitationLinks] = []


def _citation_links() -> _CitationLinks:
    if not _LINKS:
        _LINKS.append(_CitationLinks())
    return _LINKS[0]


class Attachments(QObject):
    """Keeps the bar in step with the open conversation's documents and attaches new ones."""

    changed = Signal()  # the chips were redrawn (tests wait for it)
    encoder_download_requested = Signal(object)  # the EncoderOffer to download (the window starts it)
    offer_changed = Signal()  # the encoder line was shown, changed or hidden

    def __init__(self, engine: AppEngine, workers: Workers, bar: AttachmentBar, active: ActiveChat,
                 on_images: Callable[[list[Path]], None] | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.workers = workers
        self.bar = bar
        self.active = active
        self.documents: list[Document] = []
        self.preview: DocumentPreview | None = None
        # Where image files go (the composer's waiting images); None: read as documents.
        self.on_images = on_images
        # Each load or attach is numbered; only the latest one's result is drawn, so a slow
        # load of the chat cannot redraw the bar over an attach that finished after it.
        self._latest = 0
        # The recommended encoder: None until asked (and after one is installed); asked once.
        self.offer: EncoderOffer | None = None
        self._offer_asked = False
        self._placement = "whole"
        self.encoder_downloading = False
        # Set by the bar's Stop while a recording is transcribed (a new attach makes a new one).
        self._stop_recording = threading.Event()
        self._recording_lane: Lane | None = None
        bar.recording_stop_clicked.connect(self._stop_recording_clicked)
        bar.encoder_download_clicked.connect(self._download_encoder)
        bar.encoder_dismissed.connect(self._dismiss_encoder)
        bar.attach_requested.connect(self.choose_files)
        bar.preview_requested.connect(self.show_preview)
        bar.remove_requested.connect(self.remove)
        active.current_changed.connect(self.reload)
        active.documents_changed.connect(self.reload)
        active.chat.answer_finished.connect(self._answered)
        # An answer's citations are cite: links (markdown.link_citations); the text views
        # hand links they do not open themselves to QDesktopServices, which calls this.
        _citation_links().follow(self)

    def accept_drops_on(self, widget: QWidget) -> None:
        """Files dropped on ``widget`` (the message box) are attached, not pasted as paths;
        model files and folders are left to the model import's filter."""
        self._drop_filter = ModelDropFilter(document_paths, self.attach, self)
        widget.installEventFilter(self._drop_filter)

    def choose_files(self) -> None:
        paths = self.bar.ask_files()
        if paths:
            self.attach(paths)

    def reload(self, conversation_id: int | None = None) -> None:
        conversation_id = self.active.current_id if conversation_id is None else conversation_id
        if conversation_id is None:
            self._shown(([], "whole", []))
            return
        chats, model = self.engine.chats, self.active.model_for(self.active.conversation)

        def load() -> tuple[list[Document], str, list[str]]:
            documents = chats.attached_documents(conversation_id)
            return documents, chats.document_placement(documents, model), []

        self.workers.disk.run(load, self._latest_only(self._shown), self._failed)

    def attach(self, paths: list[Path]) -> None:
        """Convert ``paths`` (in the conversion worker) and attach what could be read; images
        go to the next message instead (``on_images``)."""
        images = [p for p in paths if is_image_path(p)]
        if images and self.on_images is not None:
            self.on_images(images)
            paths = [p for p in paths if not is_image_path(p)]
            if not paths:
                return
        chats = self.engine.chats
        conversation_id = self.active.current_id
        model = self.active.model_for(self.active.conversation)
        create = self.active.conversation_maker()  # a new chat: as its first message would make it
        names = ", ".join(p.name for p in paths)
        self.bar.show_status(f"Reading {names}…")
        self._stop_recording = stop = threading.Event()

        def convert_and_attach() -> tuple[int, bool, list[Document], str, list[str]]:
            from inglenook.engine import convert_file  # noqa: PLC0415 — the engine's conversion worker

            read, errors = [], []
            for path in paths:
                try:
                    read.append(self._read_recording(path, stop) if is_recording_name(path) else convert_file(path))
                except DocumentError as exc:
                    errors.append(str(exc))
                except InglenookError as exc:  # a recording: no Whisper model, audio that does not decode
                    errors.append(f"{path.name}: {exc}")
            created = False
            target = conversation_id
            if target is None and read:
                target, created = create().id, True
            documents = chats.attach_documents(target, read) if target is not None and read else []
            return target or 0, created, documents, chats.document_placement(documents, model), errors

        def done(result: tuple[int, bool, list[Document], str, list[str]]) -> None:
            target, created, documents, placement, errors = result
            self.bar.show_transcribing("")
            if created:
                self.active.open(target)
                self.active.conversation_changed.emit()
            if documents or target == self.active.current_id:
                self._shown((documents, placement, errors))
            else:
                self._shown((self.documents, "whole", errors))

        # Superseded by a later load (the person switched chats meanwhile): read the open chat afresh.
        # A recording waits for Whisper for as long as it lasts: on a lane of its own, so documents
        # and model scans on the models lane are not held behind an hour of audio.
        lane = self._recordings_lane() if any(is_recording_name(p) for p in paths) else self.workers.models
        lane.run(convert_and_attach, self._latest_only(done, stale=lambda: self.reload()), self._failed)

    def _read_recording(self, path: Path, stop: threading.Event) -> Document:
        """A recording into a document, on the recordings lane: Whisper runs on the engine's speech
        lane (never the step loop, so a text stream keeps flowing), each recognised segment
        moves the bar's progress, and Stop ends it between segments."""
        speech = self.engine.speech
        def shown(fraction: float | None) -> None:
            self._transcribing(path.name, fraction)

        progress = self._recordings_lane().relay(shown)
        length = [0.0]

        def decoded(seconds: float) -> None:
            length[0] = seconds
            progress(0.0)

        def heard(segment: object) -> None:
            end = float(getattr(segment, "end", 0.0))
            progress(end / length[0] if length[0] else None)

        def transcribe(source: Path) -> object:
            return speech.transcribe(source, on_segment=heard, on_decoded=decoded, cancelled=stop.is_set).result()

        progress(None)
        return read_recording(path, transcribe, self.recordings(), stop.is_set)  # type: ignore[arg-type]

    def _recordings_lane(self) -> Lane:
        if self._recording_lane is None:
            self._recording_lane = Lane("recordings", 1, self)
        return self._recording_lane

    def recordings(self) -> Recordings:
        """Where the copies of attached recordings are kept (the data folder, beside images)."""
        return Recordings(self.engine.paths.data / "recordings")

    def _transcribing(self, name: str, fraction: float | None) -> None:
        if not self._stop_recording.is_set():
            self.bar.show_transcribing(f"Transcribing {name}…", fraction)

    def _stop_recording_clicked(self) -> None:
        self._stop_recording.set()
        self.bar.show_transcribing("Stopping…", None)
        self.bar.recording_stop.setEnabled(False)

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
            self.preview = self.bar.open_preview(document)

    def open_citation(self, url: QUrl) -> None:
        """A citation in an answer was clicked: the open chat's document of that name, in
        its preview, scrolled to the cited page, slide or heading."""
        name, where = parse_citation(url)
        document = next((d for d in self.documents if d.name == name), None)
        if document is None:
            self.bar.show_status(f"{name} is not attached to this chat")
            return
        seconds = parse_clock(where)
        if document.kind == AUDIO_KIND and seconds is not None:
            self.play_recording(document, seconds)
            return
        if self.preview is not None:
            self.preview.close()
        self.preview = self.bar.open_preview(document)
        self.preview.show_section(where)

    def play_recording(self, document: Document, seconds: float) -> None:
        """Play a recording attached as a document from ``seconds`` (its kept copy, found on
        the disk lane)."""
        recordings = self.recordings()

        def found(path: Path | None) -> None:
            if path is None:
                self.bar.show_status(f"The recording of {document.name} is no longer kept; attach it again to play it")
                return
            self.bar.play_recording(path, seconds, document.name, self.engine.settings.voice_output_device)
            self.changed.emit()

        self.workers.disk.run(lambda: recordings.find(document.sha256), found, self._failed)

    def _latest_only(self, callback: Callable[[T], None], stale: Callable[[], None] | None = None) -> Callable[[T], None]:
        self._latest += 1
        number = self._latest

        def deliver(result: T) -> None:
            if number == self._latest:
                callback(result)
            elif stale is not None:
                stale()
            else:
                log.debug("an older attachments result arrived after a newer one; not drawn")

        return deliver

    def _answered(self, conversation_id: int, _message: object) -> None:
        """After an answer from searched documents, name the passages it was given."""
        used = self.engine.passages_used(conversation_id)
        if used and conversation_id == self.active.current_id:
            self.bar.show_status("Passages used: " + "  ".join(f"[{p.citation()}]" for p in used))
            self.changed.emit()

    def _shown(self, result: tuple[list[Document], str, list[str]]) -> None:
        documents, placement, errors = result
        self.documents = documents
        self._placement = placement if documents else "whole"
        self.bar.show_documents(documents, placement)
        self.bar.show_status("\n".join(errors))
        self._show_offer()
        self.changed.emit()

    # -- the recommended encoder ---------------------------------------------------------------

    def _offer_wanted(self) -> bool:
        return self._placement == "searched" and not self.engine.settings.encoder_offer_dismissed

    def _show_offer(self) -> None:
        if not self._offer_wanted():
            self.bar.show_encoder_offer("", "")
        elif not self._offer_asked:
            self._offer_asked = True
            engine = self.engine
            self.workers.network.run(engine.encoder_offer, self._offer_known, self._offer_failed)
            return
        elif self.offer is None:
            self.bar.show_encoder_offer("", "")
        else:
            self.bar.show_encoder_offer(self.offer.name, human_size(self.offer.size_bytes), self.encoder_downloading)
        self.offer_changed.emit()

    def _offer_known(self, offer: EncoderOffer | None) -> None:
        self.offer = offer
        self._show_offer()

    def _offer_failed(self, exc: BaseException) -> None:
        log.info("no embedding model to offer: %s", exc)
        self.offer = None
        self._show_offer()

    def models_changed(self) -> None:
        """The installed models changed: an encoder among them ends the offer (no network)."""
        if self.offer is None:
            return
        engine = self.engine
        self.workers.disk.run(lambda: engine.encoder_offer(online=False), self._still_offered, self._offer_failed)

    def _still_offered(self, offer: EncoderOffer | None) -> None:
        if offer is None:
            self.offer = None
            self.encoder_downloading = False
        self._show_offer()

    def set_encoder_downloading(self, downloading: bool) -> None:
        """Whether the offered encoder is downloading now (the Models page's downloads say)."""
        if downloading != self.encoder_downloading:
            self.encoder_downloading = downloading
            self._show_offer()

    def _download_encoder(self) -> None:
        if self.offer is not None:
            self.encoder_download_requested.emit(self.offer)

    def _dismiss_encoder(self) -> None:
        engine = self.engine
        engine.override_settings(encoder_offer_dismissed=True)  # at once for this window; stored below
        self.workers.disk.run(lambda: engine.update_settings(encoder_offer_dismissed=True), None, self._failed)
        self._show_offer()

    def _failed(self, exc: BaseException) -> None:
        log.info("attaching documents failed: %s", exc)
        self.bar.show_status(explain(exc).text)
        self.changed.emit()

"""The Models page's Speech tab: the speech models installed (Whisper for speech to text, Piper
voices for text to speech, each with its licence), Whisper models in CTranslate2 format found
on Hugging Face, and Piper's voices listed by language and quality, each downloadable here.

Hub calls run on the network lane, downloads on the downloads lane (``engine.pull_speech``
into ``<models>/speech``, where the engine's ``Speech`` finds them at once). Preview speaks a
sentence with an installed voice on the models lane, or fetches the sample Piper's repository
keeps beside a voice not downloaded yet, and plays it through the window's PCM speaker
(``services.file_player``: PyAV decodes it; no Qt media plugin is needed).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox, QHBoxLayout, QLabel, QPushButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget,
)

from inglenook.engine import (
    Engine, HubModel, SpeechDownload, SpeechModel, downloader_for, encode_pcm, human_size, piper_voices,
    pull_speech, search_whisper, voice_sample, whisper_download,
)

from inglenook.app.services.file_player import FilePlayer
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

PREVIEW_TEXT = "Hello! This is how I sound when I read an answer aloud."
ANY_LANGUAGE = "All languages"


class SpeechModels(QWidget):
    """Installed speech models, and Whisper models and voices to download."""

    changed = Signal()  # a list was drawn again (tests wait for it)
    installed_changed = Signal()  # a download finished: the speech models changed
    failed = Signal(object)  # an exception for the page's banner
    preview_ready = Signal(str)  # a preview's audio file started playing (its path)

    def __init__(self, engine: Engine, operations: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.operations = operations
        self.voices: list[SpeechDownload] = []
        self.whisper: list[HubModel] = []
        self.installed_ids: set[str] = set()
        self.downloading: set[str] = set()
        self.loaded = False
        self.player = FilePlayer(self)
        self.player.failed.connect(self._play_failed)
        self._preview_dir = tempfile.TemporaryDirectory(prefix="inglenook-preview-")

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(_heading("Installed", self))
        self.installed = _tree(self, ["Model", "Kind", "Licence", ""])
        self.installed.setColumnWidth(3, 200)
        layout.addWidget(self.installed, 1)
        layout.addWidget(_heading("Whisper models on Hugging Face (speech to text)", self))
        self.whisper_list = _tree(self, ["Repository", "Downloads", "Licence", ""])
        layout.addWidget(self.whisper_list, 1)
        row = QHBoxLayout()
        row.addWidget(_heading("Piper voices on Hugging Face (text to speech)", self))
        self.language = QComboBox(self)
        self.language.addItem(ANY_LANGUAGE)
        self.language.currentTextChanged.connect(lambda _text: self._show_voices())
        row.addStretch(1)
        row.addWidget(self.language)
        layout.addLayout(row)
        self.voice_list = _tree(self, ["Voice", "Language", "Quality", "Size", ""])
        layout.addWidget(self.voice_list, 2)
        self.status = QLabel("", self)
        self.status.setObjectName("PageHint")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Read what is installed (disk lane) and what the hub offers (network lane)."""
        self.loaded = True
        self.refresh_installed()
        hub = downloader_for(self.engine).hub
        self.status.setText("Looking for Whisper models and voices on Hugging Face…")
        self.operations.run_typed("network", lambda: (search_whisper(hub), piper_voices(hub)), self._found,
                                  self._failed)

    def refresh_installed(self) -> None:
        speech = self.engine.speech
        self.operations.run_typed("disk", speech.models, self._show_installed, self._failed)

    def _found(self, found: tuple[list[HubModel], list[SpeechDownload]]) -> None:
        self.whisper, self.voices = found
        self.status.setText("")
        languages = sorted({v.language for v in self.voices})
        current = self.language.currentText()
        self.language.blockSignals(True)
        self.language.clear()
        self.language.addItems([ANY_LANGUAGE, *languages])
        self.language.setCurrentText(current if current in languages else ANY_LANGUAGE)
        self.language.blockSignals(False)
        self._show_whisper()
        self._show_voices()

    def _failed(self, exc: BaseException) -> None:
        log.info("speech models: %s", exc)
        self.status.setText("")
        self.failed.emit(exc)

    # -- drawing ---------------------------------------------------------------------------

    def _show_installed(self, models: list[SpeechModel]) -> None:
        self.installed_ids = {m.id for m in models}
        self.installed.clear()
        for model in models:
            kind = "Speech to text" if model.kind == "speech-to-text" else "Voice"
            item = QTreeWidgetItem([model.id, kind, model.licence or "—", ""])
            self.installed.addTopLevelItem(item)
            buttons = QWidget()
            row = QHBoxLayout(buttons)
            row.setContentsMargins(0, 0, 0, 0)
            if model.kind == "text-to-speech":
                row.addWidget(self._button("Preview", lambda _=False, m=model.id: self.preview(m)))
            if self._pulled(model):
                row.addWidget(self._button("Remove", lambda _=False, m=model.id: self.remove(m)))
            row.addStretch(1)
            self.installed.setItemWidget(item, 3, buttons)
        self._show_whisper()
        self._show_voices()

    def _show_whisper(self) -> None:
        self.whisper_list.clear()
        for model in self.whisper:
            item = QTreeWidgetItem([model.repo, str(model.downloads or "?"), model.licence or "?", ""])
            self.whisper_list.addTopLevelItem(item)
            name = model.repo.rsplit("/", 1)[-1].removeprefix("faster-")
            self.whisper_list.setItemWidget(item, 3, self._download_button(
                name, lambda _=False, repo=model.repo: self.download_whisper(repo)))
        self.changed.emit()

    def _show_voices(self) -> None:
        wanted = self.language.currentText()
        self.voice_list.clear()
        for voice in self.voices:
            if wanted not in ("", ANY_LANGUAGE) and voice.language != wanted:
                continue
            item = QTreeWidgetItem([voice.name, voice.language, voice.quality, human_size(voice.size), ""])
            self.voice_list.addTopLevelItem(item)
            if voice.name in self.installed_ids:
                preview = self._button("Preview", lambda _=False, v=voice.name: self.preview(v))
            else:  # the sample Piper's repository keeps beside the voice: heard before a download
                preview = self._button("Preview", lambda _=False, v=voice: self.preview_sample(v))
            buttons = QWidget()
            row = QHBoxLayout(buttons)
            row.setContentsMargins(0, 0, 0, 0)
            row.addWidget(preview)
            row.addWidget(self._download_button(voice.name, lambda _=False, v=voice: self.download(v)))
            self.voice_list.setItemWidget(item, 4, buttons)
        self.changed.emit()

    def _button(self, text: str, on_click: object) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName("SmallButton")
        button.clicked.connect(on_click)
        return button

    def _download_button(self, name: str, on_click: object) -> QPushButton:
        if name in self.installed_ids:
            button = QPushButton("Installed")
            button.setEnabled(False)
            return button
        button = self._button("Downloading…" if name in self.downloading else "Download", on_click)
        button.setEnabled(name not in self.downloading)
        return button

    def _pulled(self, model: SpeechModel) -> bool:
        """Whether ``model`` was downloaded here (the starters belong to their packages)."""
        folder = self.engine.speech.folder
        return folder is not None and folder in model.path.parents

    def remove(self, model_id: str) -> None:
        speech = self.engine.speech

        def done(_record: SpeechModel) -> None:
            self.status.setText(f"{model_id} was removed")
            self.installed_changed.emit()
            self.refresh_installed()

        self.operations.run_typed("disk", lambda: speech.remove(model_id), done, self._failed)

    # -- downloads -------------------------------------------------------------------------

    def download_whisper(self, repo: str) -> None:
        hub = downloader_for(self.engine).hub

        def found(download: SpeechDownload | None) -> None:
            if download is None:
                self.status.setText(f"{repo} holds no Whisper model in CTranslate2 format")
                return
            self.download(download)

        self.operations.run_typed("network", lambda: whisper_download(hub, repo), found, self._failed)

    def download(self, download: SpeechDownload) -> None:
        """Fetch a Whisper model or a voice into <models>/speech, with progress in the status line."""
        hub = downloader_for(self.engine).hub
        folder = self.engine.speech.folder or self.engine.paths.models / "speech"
        self.downloading.add(download.name)
        def shown(done_bytes: int) -> None:
            self._progress(download, done_bytes)

        progress = self.operations.relay("downloads", shown)

        def done(_path: Path) -> None:
            self.downloading.discard(download.name)
            self.status.setText(f"{download.name} is installed")
            self.installed_changed.emit()
            self.refresh_installed()

        def failed(exc: BaseException) -> None:
            self.downloading.discard(download.name)
            self._failed(exc)
            self._show_voices()

        self.operations.run_typed(
            "downloads", lambda: pull_speech(hub, download, folder, lambda d, _t: progress(d)), done, failed)
        self._show_whisper()
        self._show_voices()

    def _progress(self, download: SpeechDownload, done: int) -> None:
        self.status.setText(f"Downloading {download.name}: {human_size(done)} of {human_size(download.size)}")

    # -- preview -------------------------------------------------------------------------

    def preview(self, voice: str) -> None:
        """Speak ``PREVIEW_TEXT`` with an installed voice (models lane) and play it."""
        speech = self.engine.speech
        target = Path(self._preview_dir.name) / f"{voice}.wav"
        self.status.setText(f"Preparing a preview of {voice}…")

        def speak() -> Path:
            rate, pcm = speech.speak(PREVIEW_TEXT, voice=voice)
            target.write_bytes(encode_pcm(b"".join(pcm), rate, "wav"))
            return target

        self.operations.run_typed("models", speak, self._play, self._failed)

    def preview_sample(self, voice: SpeechDownload) -> None:
        """Play the sample Piper's repository keeps for a voice not downloaded yet (network lane)."""
        hub = downloader_for(self.engine).hub
        folder = Path(self._preview_dir.name)
        self.status.setText(f"Fetching a sample of {voice.name}…")
        self.operations.run_typed("network", lambda: voice_sample(hub, voice, folder), self._play, self._failed)

    def _play(self, path: Path) -> None:
        self.status.setText("")
        # The speaker chosen in Settings → Voice (the system's default where none is).
        self.player.device_id = self.engine.settings.voice_output_device
        if self.player.play(path):  # each play reads the file afresh, the same name or not
            self.preview_ready.emit(str(path))

    def _play_failed(self, text: str) -> None:
        self.status.setText(f"The preview cannot be played: {text}")

    def shutdown(self) -> None:
        self.player.close()
        self._preview_dir.cleanup()


def _heading(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("SectionTitle")
    return label


def _tree(parent: QWidget, columns: list[str]) -> QTreeWidget:
    tree = QTreeWidget(parent)
    tree.setHeaderLabels(columns)
    tree.setRootIsDecorated(False)
    tree.setUniformRowHeights(True)
    tree.setColumnWidth(0, 260)
    return tree

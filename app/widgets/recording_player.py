"""A small player for a recording attached as a document: a click on a citation with a time
(``[meeting.m4a, 12:31]``) opens it and plays from there.

Qt's own multimedia module plays it (``QMediaPlayer`` with its FFmpeg backend, the same
libraries that decoded the file for Whisper), so every format that could be transcribed can
be played. A seek asked for before the file is loaded waits for the load: a position set on
a player still loading is dropped by some backends.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtMultimedia import QAudioOutput, QMediaPlayer
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPushButton, QSlider, QVBoxLayout, QWidget

log = logging.getLogger(__name__)


def clock_text(milliseconds: int) -> str:
    seconds = max(0, milliseconds // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class RecordingPlayer(QDialog):
    """Play, pause and a position slider for one recording, beside the window."""

    seeked = Signal(int)  # the position asked for took effect (ms; tests wait for it)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Recording")
        self.resize(420, 110)
        self.player = QMediaPlayer(self)
        self.output = QAudioOutput(self)
        self.player.setAudioOutput(self.output)
        self.source: Path | None = None
        self._pending: int | None = None  # a position to seek to once the file is loaded
        self.last_seek: int | None = None  # the last position that took effect (ms)
        self.title = QLabel(self)
        self.play_button = QPushButton("Pause", self)
        self.play_button.clicked.connect(self._toggle)
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.sliderMoved.connect(self.player.setPosition)
        self.time = QLabel("00:00", self)
        row = QHBoxLayout()
        row.addWidget(self.play_button)
        row.addWidget(self.slider, 1)
        row.addWidget(self.time)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addLayout(row)
        self.player.durationChanged.connect(lambda ms: self.slider.setRange(0, max(0, ms)))
        self.player.positionChanged.connect(self._moved)
        self.player.mediaStatusChanged.connect(self._status)
        self.player.playbackStateChanged.connect(self._state)
        self.player.errorOccurred.connect(lambda _error, text: self.title.setText(f"Cannot play: {text}"))

    def play_from(self, path: Path, seconds: float, name: str = "") -> None:
        """Play ``path`` from ``seconds`` (loading it first when it is not the one loaded)."""
        position = max(0, int(seconds * 1000))
        self.title.setText(f"{name or path.name} — from {clock_text(position)}")
        if self.source != path:
            self.source = path
            self._pending = position
            self.player.setSource(QUrl.fromLocalFile(str(path)))
            return
        self._seek(position)

    def _status(self, status: QMediaPlayer.MediaStatus) -> None:
        loaded = (QMediaPlayer.MediaStatus.LoadedMedia, QMediaPlayer.MediaStatus.BufferedMedia)
        if status in loaded and self._pending is not None:
            position, self._pending = self._pending, None
            self._seek(position)

    def _seek(self, position: int) -> None:
        self.player.setPosition(position)
        self.player.play()
        self.last_seek = position
        self.seeked.emit(position)

    def _moved(self, position: int) -> None:
        if not self.slider.isSliderDown():
            self.slider.setValue(position)
        self.time.setText(clock_text(position))

    def _state(self, state: QMediaPlayer.PlaybackState) -> None:
        self.play_button.setText("Pause" if state == QMediaPlayer.PlaybackState.PlayingState else "Play")

    def _toggle(self) -> None:
        if self.player.playbackState() == QMediaPlayer.PlaybackState.PlayingState:
            self.player.pause()
        else:
            self.player.play()

    def closeEvent(self, event: object) -> None:  # noqa: N802 — Qt's name
        self.player.stop()  # closing the window ends the sound, not only hides it
        super().closeEvent(event)  # type: ignore[arg-type]

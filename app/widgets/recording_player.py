"""A small player for a recording attached as a document: a click on a citation with a time
(``[meeting.m4a, 12:31]``) opens it and plays from there.

The sound goes through ``services.file_player.FilePlayer``: PyAV (the FFmpeg that decoded the
file for Whisper) reads it from the cited time a chunk at a time, on a lane of its own, and the
window's PCM speaker plays it. No Qt media plugin is needed, so the packaged app plays it too.
The slider seeks by starting again from where it is let go; closing the window ends the sound.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QAbstractSlider, QDialog, QHBoxLayout, QLabel, QPushButton, QSlider, QVBoxLayout, QWidget

from inglenook.app.services.file_player import FilePlayer

log = logging.getLogger(__name__)


def clock_text(milliseconds: int) -> str:
    seconds = max(0, milliseconds // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class RecordingPlayer(QDialog):
    """Play, pause and a position slider for one recording, beside the window."""

    seeked = Signal(int)  # playing started from this position (ms; tests wait for it)

    def __init__(self, parent: QWidget | None = None, device_id: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Recording")
        self.resize(420, 110)
        self.player = FilePlayer(self, device_id)
        self.source: Path | None = None
        self.last_seek: int | None = None  # the last position playing started from (ms)
        self.title = QLabel(self)
        self.play_button = QPushButton("Pause", self)
        self.play_button.clicked.connect(self._toggle)
        self.time = QLabel("00:00", self)
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.sliderMoved.connect(lambda ms: self.time.setText(clock_text(ms)))
        self.slider.sliderReleased.connect(lambda: self._seek(self.slider.value()))
        self.slider.actionTriggered.connect(self._slider_action)
        row = QHBoxLayout()
        row.addWidget(self.play_button)
        row.addWidget(self.slider, 1)
        row.addWidget(self.time)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addLayout(row)
        self.player.duration_changed.connect(self._length_known)
        self.player.position_changed.connect(self._moved)
        self.player.playing_changed.connect(lambda on: self.play_button.setText("Pause" if on else "Play"))
        self.player.failed.connect(lambda text: self.title.setText(f"Cannot play: {text}"))

    def play_from(self, path: Path, seconds: float, name: str = "") -> None:
        """Play ``path`` from ``seconds``."""
        position = max(0, int(seconds * 1000))
        self.title.setText(f"{name or path.name} — from {clock_text(position)}")
        self.source = path
        self._seek(position)

    def position(self) -> int:
        """Where playing is, in ms."""
        return self.player.position()

    @property
    def playing(self) -> bool:
        return self.player.playing

    def pause(self) -> None:
        self.player.pause()

    def _seek(self, position: int) -> None:
        if self.source is None:
            return
        if self.player.play(self.source, position):
            self.last_seek = position
            self.seeked.emit(position)
        self._moved(position)

    def _slider_action(self, action: int) -> None:
        # A click beside the handle or a key: the new place is known now; a drag seeks on release.
        if action != QAbstractSlider.SliderAction.SliderMove.value:
            self._seek(self.slider.sliderPosition())

    def _length_known(self, ms: int) -> None:
        self.slider.setRange(0, max(0, ms))
        # A position set before the range was known was clamped to Qt's default range (0-99).
        self._moved(self.player.position())

    def _moved(self, position: int) -> None:
        if not self.slider.isSliderDown():
            self.slider.setValue(position)
            self.time.setText(clock_text(position))

    def _toggle(self) -> None:
        if self.player.playing:
            self.player.pause()
        else:
            self.player.resume()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 — Qt's name
        self.player.stop()  # closing the window ends the sound, not only hides it
        super().closeEvent(event)

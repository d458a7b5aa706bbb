"""An audio file played through the window's PCM speaker: a recording from a cited time, a
voice's preview. No ``QMediaPlayer``: that needs Qt's FFmpeg media plugin (QtQuick, QtQml and
a second FFmpeg), which the package leaves out. The engine's ``PcmReader`` (PyAV, the FFmpeg
that already decodes recordings for Whisper) turns the file into PCM and ``Speaker`` plays it.

Decoding runs on a lane of the player's own, one chunk per call, so the GUI thread only moves
bytes and a long transcription on the voice lane never starves the sound. A timer tops the
speaker up while it holds less than ``AHEAD_S`` of sound not yet written to the device, so an
hour-long file costs a couple of seconds of memory. Pause stops the speaker and remembers the
position; Play and a seek start a fresh reader from there (PyAV seeks, then decodes forward).

The position is the start plus what the speaker has written to the device: it runs ahead of
the ear by the device's buffer (a fraction of a second), which a slider does not show.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from inglenook.engine import PLAYBACK_RATE, PcmReader

from inglenook.app.services.errors import explain
from inglenook.app.services.speaker import Speaker
from inglenook.app.services.workers import Lane

log = logging.getLogger(__name__)

CHUNK_S = 0.5  # decoded per call on the lane
AHEAD_S = 1.5  # fed to the speaker beyond what it has written to the device
TICK_MS = 50


class FilePlayer(QObject):
    """Play, pause and seek one audio file at a time through a ``Speaker``."""

    position_changed = Signal(int)  # ms, while playing and after a pause or seek
    duration_changed = Signal(int)  # ms, once the file's header is read
    playing_changed = Signal(bool)
    finished = Signal()  # played to its end
    failed = Signal(str)  # in words for a person

    def __init__(self, parent: QObject | None = None, device_id: str = "") -> None:
        super().__init__(parent)
        self.device_id = device_id
        self.speaker = Speaker(self)
        self.speaker.finished.connect(self._played_out)
        self.speaker.failed.connect(self._failed)
        self._lane = Lane("playback", 1, self)
        self.source: Path | None = None
        self.duration_ms = 0
        self.playing = False
        self._reader: PcmReader | None = None
        self._generation = 0  # bumped by every stop: chunks of an older reader are dropped
        self._reading = False  # a chunk is being decoded on the lane
        self._ended = False  # the reader has nothing more
        self._fed = 0  # bytes handed to the speaker since the start
        self._start_ms = 0
        self._tick = QTimer(self)
        self._tick.setInterval(TICK_MS)
        self._tick.timeout.connect(self._top_up)

    def position(self) -> int:
        """Where the sound is, in ms (the paused or asked-for position when not playing)."""
        if not self.playing:
            return self._start_ms
        played = self.speaker.played_bytes // 2 * 1000 // PLAYBACK_RATE
        return self._start_ms + played

    def play(self, path: Path, start_ms: int = 0) -> bool:
        """Play ``path`` from ``start_ms``; False (after ``failed``) when the speaker cannot open."""
        self._halt()
        self.source, self._start_ms = path, max(0, start_ms)
        if not self.speaker.begin(PLAYBACK_RATE, self.device_id):
            self._set_playing(False)
            return False
        generation, start_s = self._generation, self._start_ms / 1000

        def open_reader() -> tuple[PcmReader, bytes]:
            reader = PcmReader(path, rate=PLAYBACK_RATE, start_s=start_s)
            return reader, reader.read(CHUNK_S)

        self._reading = True
        self._lane.run(open_reader, lambda got: self._opened(generation, path, got),
                       lambda exc: self._read_failed(generation, exc))
        self._tick.start()
        self._set_playing(True)
        return True

    def resume(self) -> bool:
        """Play on from where a pause left it (from the start after playing to the end)."""
        return self.source is not None and self.play(self.source, self._start_ms)

    def pause(self) -> None:
        position = self.position()
        self._halt()
        self._start_ms = position
        self._set_playing(False)
        self.position_changed.emit(position)

    def stop(self) -> None:
        self._halt()
        self._set_playing(False)

    def close(self) -> None:
        """Stop and end the decoding lane (the player is not used again)."""
        self.stop()
        self._lane.close()

    def _opened(self, generation: int, path: Path, got: tuple[PcmReader, bytes]) -> None:
        reader, chunk = got
        if path == self.source:
            # The length even when paused before the first chunk came (a click on a citation,
            # then Pause at once): the slider would keep Qt's default range of 0-99 otherwise.
            self.duration_ms = int(reader.duration_s * 1000)
            self.duration_changed.emit(self.duration_ms)
        if generation != self._generation:  # stopped meanwhile: free the file on its lane
            self._lane.run(reader.close)
            return
        self._reader = reader
        self._feed(generation, chunk)

    def _feed(self, generation: int, chunk: bytes) -> None:
        if generation != self._generation:
            return
        self._reading = False
        if not chunk:
            self._ended = True
            self.speaker.end()
            return
        self._fed += len(chunk)
        self.speaker.feed(chunk)

    def _top_up(self) -> None:
        if not self.playing:
            return
        self.position_changed.emit(self.position())
        reader = self._reader
        if reader is None or self._reading or self._ended:
            return
        if self._fed - self.speaker.played_bytes < AHEAD_S * PLAYBACK_RATE * 2:
            generation = self._generation
            self._reading = True
            self._lane.run(lambda: reader.read(CHUNK_S), lambda chunk: self._feed(generation, chunk),
                           lambda exc: self._read_failed(generation, exc))

    def _played_out(self) -> None:
        end = self.position()
        self._halt()
        self._start_ms = 0  # Play again starts from the beginning
        self._set_playing(False)
        self.position_changed.emit(end)
        self.finished.emit()

    def _read_failed(self, generation: int, exc: BaseException) -> None:
        if generation == self._generation:
            self._failed(explain(exc).text)

    def _failed(self, text: str) -> None:
        log.info("playing %s failed: %s", self.source, text)
        self.stop()
        self.failed.emit(text)

    def _halt(self) -> None:
        """Silence the speaker and let the reader go (closed on its lane, after any read)."""
        self._generation += 1
        self._tick.stop()
        self.speaker.stop()
        reader, self._reader = self._reader, None
        if reader is not None:
            self._lane.run(reader.close)
        self._reading = self._ended = False
        self._fed = 0

    def _set_playing(self, playing: bool) -> None:
        if playing != self.playing:
            self.playing = playing
            self.playing_changed.emit(playing)

"""The speaker: a voice's PCM played through Qt's QAudioSink as it arrives, a sentence at a time.

Piper hands over mono int16 PCM a sentence at a time; ``feed`` queues it and a 20 ms timer on
the GUI thread moves what the device has room for (a copy of a few kilobytes), so playback
starts with the first sentence while later ones are still being made. ``end`` says no more
will come; ``finished`` follows once the device has played it all. ``stop`` silences it at once.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QIODevice, QObject, QTimer, Signal
from PySide6.QtMultimedia import QAudioSink, QtAudio

from inglenook.app.services import audio_devices

log = logging.getLogger(__name__)

PUMP_MS = 20
NO_SPEAKER = "No speaker or headphones were found. Connect some, or choose another output in Settings → Voice."
NOT_OPENED = "The speaker could not be opened (another program may hold it)."


class Speaker(QObject):
    started = Signal()  # the first samples reached the device
    finished = Signal()  # everything fed was played, after ``end``
    failed = Signal(str)  # why it cannot play, in words for a person

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._sink: QAudioSink | None = None
        self._io: QIODevice | None = None
        self._pending = bytearray()
        self._ended = False
        self._wrote = False
        self.rate = 0
        self.played_bytes = 0  # since ``begin`` (tests and the benchmark)
        self._pump = QTimer(self)
        self._pump.setInterval(PUMP_MS)
        self._pump.timeout.connect(self._move)

    @property
    def speaking(self) -> bool:
        return self._sink is not None

    def begin(self, rate: int, device_id: str = "") -> bool:
        """Open the output at ``rate`` Hz (mono int16); False, after ``failed``, when it cannot."""
        self.stop()
        device = audio_devices.output_device(device_id)
        if device.isNull():
            self.failed.emit(NO_SPEAKER)
            return False
        sink = QAudioSink(device, audio_devices.mono_int16(rate), self)
        io = sink.start()
        if io is None or sink.error() != QtAudio.Error.NoError:
            log.info("speaker %s did not open: %s", device.description(), sink.error())
            sink.deleteLater()
            self.failed.emit(NOT_OPENED)
            return False
        self._sink, self._io, self.rate = sink, io, rate
        self._pending.clear()
        self._ended = self._wrote = False
        self.played_bytes = 0
        self._pump.start()
        return True

    def feed(self, pcm: bytes) -> None:
        if self._sink is not None:
            self._pending += pcm
            self._move()

    def end(self) -> None:
        """No more audio will come: ``finished`` once what was fed has been played."""
        self._ended = True
        if self._sink is not None and not self._pending and not self._wrote:
            self._close()
            self.finished.emit()

    def stop(self) -> None:
        """Silence now; nothing more is said (no ``finished``)."""
        self._close()

    def _close(self) -> None:
        self._pump.stop()
        sink, self._sink, self._io = self._sink, None, None
        self._pending.clear()
        if sink is not None:
            sink.stop()
            sink.deleteLater()

    def _move(self) -> None:
        sink, io = self._sink, self._io
        if sink is None or io is None:
            return
        if self._pending:
            room = sink.bytesFree()
            room -= room % 2
            if room > 0:
                written = io.write(bytes(self._pending[:room]))
                if written > 0:
                    del self._pending[:written]
                    self.played_bytes += written
                    if not self._wrote:
                        self._wrote = True
                        self.started.emit()
        elif self._ended and self._wrote and sink.state() != QtAudio.State.ActiveState:
            # Idle: the device ran out of samples, so everything fed has been played.
            self._close()
            self.finished.emit()

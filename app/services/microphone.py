"""The microphone: Qt's QAudioSource read on the GUI thread's event loop, samples kept for Whisper.

Reading is cheap (a block of a few hundred samples every 10–40 ms: copying it and one RMS), so
it stays on the GUI thread, where Qt delivers ``readyRead``; what is slow with the samples
(Whisper) runs elsewhere. Samples are kept as Whisper wants them, mono float32 at 16 kHz: the
device is asked for 16 kHz mono int16, and a device that cannot give it is read in its own
format and converted here.

When there is no microphone, or the system refuses access, ``failed`` says so in words a
person can act on, and ``start`` returns False.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from PySide6.QtCore import QCoreApplication, QIODevice, QObject, Qt, QTimer, Signal
from PySide6.QtMultimedia import QAudioFormat, QAudioSource, QtAudio

from inglenook.app.services import audio_devices
from inglenook.app.services.audio_devices import WHISPER_RATE

log = logging.getLogger(__name__)

NO_MICROPHONE = "No microphone was found. Connect one, or choose another in Settings → Voice."
REFUSED = ("The microphone could not be opened: the system refused access, or another program holds it. "
           "Allow Inglenook to use the microphone in the system's privacy settings.")
STOPPED = "The microphone stopped working (was it unplugged?)."


def level_of(block: np.ndarray) -> float:
    """A block's loudness for a meter, 0..1: its RMS in dBFS, -60 dB (quiet room) to 0 dB."""
    if block.size == 0:
        return 0.0
    rms = float(np.sqrt(np.mean(np.square(block, dtype=np.float64))))
    if rms <= 1e-6:
        return 0.0
    return max(0.0, min(1.0, (20 * math.log10(rms) + 60) / 60))


def to_whisper(data: bytes, audio_format: QAudioFormat) -> np.ndarray:
    """Raw samples in ``audio_format`` as mono float32 at 16 kHz."""
    kinds = {
        QAudioFormat.SampleFormat.UInt8: (np.uint8, 128.0, 128.0),
        QAudioFormat.SampleFormat.Int16: (np.int16, 0.0, 32768.0),
        QAudioFormat.SampleFormat.Int32: (np.int32, 0.0, 2147483648.0),
        QAudioFormat.SampleFormat.Float: (np.float32, 0.0, 1.0),
    }
    dtype, offset, scale = kinds.get(audio_format.sampleFormat(), (np.int16, 0.0, 32768.0))
    width = np.dtype(dtype).itemsize
    channels = max(1, audio_format.channelCount())
    usable = len(data) - len(data) % (width * channels)
    samples = (np.frombuffer(data[:usable], dtype=dtype).astype(np.float32) - offset) / scale
    if channels > 1:
        samples = samples.reshape(-1, channels).mean(axis=1)
    rate = audio_format.sampleRate()
    if rate != WHISPER_RATE and samples.size:
        # Linear interpolation: plenty for speech recognition, which hears below 8 kHz.
        count = int(samples.size * WHISPER_RATE / rate)
        samples = np.interp(np.arange(count) * (rate / WHISPER_RATE), np.arange(samples.size), samples)
    return samples.astype(np.float32, copy=False)


class Microphone(QObject):
    """One recording at a time from the chosen input device."""

    level = Signal(float)  # loudness of the latest block, 0..1 (the meter)
    heard = Signal(object)  # the latest block, float32 at 16 kHz (silence detection)
    failed = Signal(str)  # why it cannot listen, in words for a person

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._source: QAudioSource | None = None
        self._io: QIODevice | None = None
        self._format = audio_devices.mono_int16(WHISPER_RATE)
        self._blocks: list[np.ndarray] = []
        self._count = 0
        self._watch = QTimer(self)
        self._watch.setInterval(500)
        self._watch.timeout.connect(self._check)

    @property
    def listening(self) -> bool:
        return self._source is not None

    @property
    def seconds(self) -> float:
        """How much has been heard since ``start`` or ``clear``."""
        return self._count / WHISPER_RATE

    def samples(self) -> np.ndarray:
        """Everything heard since ``start`` or ``clear``, mono float32 at 16 kHz."""
        if len(self._blocks) > 1:
            self._blocks = [np.concatenate(self._blocks)]
        return self._blocks[0] if self._blocks else np.zeros(0, dtype=np.float32)

    def clear(self) -> None:
        self._blocks, self._count = [], 0

    def keep_from(self, sample: int) -> None:
        """Forget what was heard before ``sample`` (counted since ``start`` or ``clear``): the
        recording then begins there, as if cleared just before it."""
        kept = self.samples()[sample:].copy()
        self._blocks, self._count = ([kept] if kept.size else []), int(kept.size)

    def start(self, device_id: str = "") -> bool:
        """Listen on ``device_id`` ("" the default); False, after ``failed``, when it cannot."""
        if self._source is not None:
            return True
        if not self._allowed():
            self.failed.emit(REFUSED)
            return False
        device = audio_devices.input_device(device_id)
        if device.isNull():
            self.failed.emit(NO_MICROPHONE)
            return False
        wanted = audio_devices.mono_int16(WHISPER_RATE)
        self._format = wanted if device.isFormatSupported(wanted) else device.preferredFormat()
        source = QAudioSource(device, self._format, self)
        # 2 s: the sound server may hand over captured audio in large pieces (a PulseAudio pipe
        # source does, up to its pipe's 64 KB), and what does not fit the buffer is dropped:
        # with 0.2 s dictation lost half of a 3.7 s sentence, with 1 s a quarter, with 2 s none.
        source.setBufferSize(self._format.bytesForDuration(2_000_000))
        self.clear()
        io = source.start()
        if io is None or source.error() != QtAudio.Error.NoError:
            log.info("microphone %s did not open: %s", device.description(), source.error())
            source.deleteLater()
            self.failed.emit(REFUSED)
            return False
        io.readyRead.connect(self._read)
        self._source, self._io = source, io
        self._watch.start()
        log.info("listening on %s (%d Hz, %d channels)", device.description(), self._format.sampleRate(),
                 self._format.channelCount())
        return True

    def drain(self) -> None:
        """Take what the device has captured and not yet handed over (up to its 2 s buffer),
        so that words said just before Stop are in ``samples``."""
        self._read()

    def stop(self) -> None:
        source, self._source, self._io = self._source, None, None
        self._watch.stop()
        if source is None:
            return
        source.stop()
        source.deleteLater()

    def _allowed(self) -> bool:
        """The system's permission (macOS, Windows, sandboxes); undecided counts as allowed:
        opening the device is what makes such a system ask the person."""
        app = QCoreApplication.instance()
        try:
            from PySide6.QtCore import QMicrophonePermission  # noqa: PLC0415 — Qt 6.5 and later
        except ImportError:
            return True
        if app is None:
            return True
        return app.checkPermission(QMicrophonePermission()) != Qt.PermissionStatus.Denied

    def _read(self) -> None:
        io = self._io
        if io is None:
            return
        data = bytes(io.readAll().data())
        if not data:
            return
        block = to_whisper(data, self._format)
        self._blocks.append(block)
        self._count += block.size
        self.level.emit(level_of(block))
        self.heard.emit(block)

    def _check(self) -> None:
        """A device that stopped (unplugged, taken away) ends the recording with words.

        Polled twice a second rather than heard through ``stateChanged``: PySide cannot convert
        that signal's ``QAudio::State`` argument for a Python slot (a TypeError in every call)."""
        source = self._source
        if source is None or source.state() != QtAudio.State.StoppedState:
            return
        if source.error() != QtAudio.Error.NoError:
            log.info("microphone stopped: %s", source.error())
            self.stop()
            self.failed.emit(STOPPED if source.error() != QtAudio.Error.OpenError else REFUSED)

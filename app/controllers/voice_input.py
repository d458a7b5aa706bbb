"""Dictation: the composer's microphone, its words typed into the message box as they are heard.

While the microphone is on, the whole recording so far is transcribed again about every
second (``REFRESH_MS``) on the voice lane, which hands it to the engine's speech lane and waits
there, never on the GUI thread; at most one transcription is in flight, so a slow machine
refreshes less often rather than queueing work. Whisper hears a growing recording better than
pieces cut at guessed boundaries, and tiny.en reads ten seconds in a fraction of one. When the
person clicks again, the whole recording is transcribed once more and that text stays in the
box, editable, until they send it. Its audio is offered to ``Recordings`` (kept only where the
person chose to keep spoken messages).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal

from inglenook.engine import Settings, encode_pcm

from inglenook.app.pages.chat.page import ChatPage
from inglenook.app.services.app_engine import AppEngine
from inglenook.app.services.audio_devices import WHISPER_RATE
from inglenook.app.services.errors import Explanation
from inglenook.app.services.microphone import Microphone
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

REFRESH_MS = 1000
MIN_NEW_S = 0.3  # transcribe again only when this much more was heard


def wav_of(samples: np.ndarray) -> bytes:
    """Float samples at 16 kHz as a WAV file's bytes (what ``Speech.transcribe`` decodes)."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    return encode_pcm(pcm, WHISPER_RATE, "wav")


def hear(engine: AppEngine, operations: Operations, samples: np.ndarray, on_text: Callable[[str], None],
         on_failed: Callable[[Explanation], None]) -> None:
    """Transcribe ``samples`` on the voice lane (waiting there for the engine's speech lane);
    ``on_text`` gets the words on the GUI thread."""
    audio = wav_of(samples)

    def work() -> str:
        return engine.speech.transcribe(audio).result().text

    operations.run("voice", work, on_text, on_failed)


class Dictation(QObject):
    """The composer's microphone button: listen, show the words, stop."""

    listening_changed = Signal(bool)
    spoken = Signal(object)  # the samples of a finished dictation (Recordings keeps them if asked)

    def __init__(self, engine: AppEngine, operations: Operations, page: ChatPage,
                 settings: Callable[[], Settings], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine, self.operations, self.page, self.settings = engine, operations, page, settings
        self.microphone = Microphone(self)
        self.microphone.level.connect(page.set_mic_level)
        self.microphone.failed.connect(self._failed)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._refresh)
        self._busy = False
        self._heard_s = 0.0  # how much the last transcription covered
        self._round = 0  # a dictation's number: a late result of an earlier one is dropped
        self.text = ""  # the words of the current (or last) dictation
        page.dictation_toggled.connect(self.toggle)

    @property
    def listening(self) -> bool:
        return self.microphone.listening

    def toggle(self) -> None:
        if self.listening:
            self.stop()
        else:
            self.start()

    def start(self) -> bool:
        if self.listening or self.page.in_voice_mode:
            return self.listening
        if not self.microphone.start(self.settings().voice_input_device):
            return False
        self._round += 1
        self._busy, self._heard_s, self.text = False, 0.0, ""
        self.page.set_listening(True)
        self._timer.start()
        self.listening_changed.emit(True)
        return True

    def stop(self, hear_it: bool = True) -> None:
        """Stop listening; the whole recording is heard once more for the final words (not
        when ``hear_it`` is False: voice mode taking the microphone, the window closing)."""
        if not self.listening:
            return
        if not hear_it:
            self._round += 1  # what is in flight is dropped too
        self.microphone.drain()
        samples = self.microphone.samples().copy()
        self.microphone.stop()
        self._timer.stop()
        self.page.set_listening(False)
        self.listening_changed.emit(False)
        if samples.size and hear_it:
            self._transcribe(samples, final=True)

    def _refresh(self) -> None:
        heard = self.microphone.seconds
        if self._busy or heard - self._heard_s < MIN_NEW_S:
            return
        self._transcribe(self.microphone.samples().copy(), final=False)

    def _transcribe(self, samples: np.ndarray, final: bool) -> None:
        self._busy = True
        self._heard_s = samples.size / WHISPER_RATE
        number = self._round

        def heard(text: str) -> None:
            if number != self._round:
                return
            self._busy = False
            if not final and not self.listening:
                return  # stopped meanwhile: the final words are on their way
            text = text.strip()
            if text or final:
                self.text = text
                self.page.show_dictated(text)
            if final and text:
                self.spoken.emit(samples)

        def failed(explanation: Explanation) -> None:
            self._busy = False
            if number == self._round:
                self.page.show_voice_problem(explanation.text)

        hear(self.engine, self.operations, samples, heard, failed)

    def _failed(self, text: str) -> None:
        self._timer.stop()
        self.page.set_listening(False)
        self.page.show_voice_problem(text)
        self.listening_changed.emit(False)

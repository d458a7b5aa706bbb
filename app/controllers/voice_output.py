"""Read aloud: an answer spoken by the chosen voice, sentence by sentence, while it streams too.

Sentences (``text/spoken.Sentences``) go into a queue that one job on the voice lane empties:
each becomes speech in the engine's Piper helper (``Speech.speak``) and its PCM comes back to
the GUI thread a piece at a time, where the ``Speaker`` plays it. So the first sentence is
heard while the model still writes the second, and the voice never waits for the whole
answer. ``stop`` sets the reading's cancel flag (the job stops after the piece it holds; the
helper's unread audio is drained by ``VoiceProcess``) and silences the speaker at once.

With "read answers aloud as they stream" on (``Settings.voice_read_streaming``), every answer
of the chat on screen is followed as it streams; voice mode follows its own answers the same way.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from inglenook.engine import Message, Settings

from inglenook.app.controllers.answers import ChatController
from inglenook.app.services.app_engine import AppEngine
from inglenook.app.services.errors import Explanation
from inglenook.app.services.operations import Operations
from inglenook.app.services.speaker import Speaker
from inglenook.app.text.spoken import Sentences, sentences_of

log = logging.getLogger(__name__)


class _Reading:
    """One answer being read: its sentences still to speak and its cancel flag."""

    def __init__(self) -> None:
        self.sentences: queue.Queue[str | None] = queue.Queue()
        self.cancel = threading.Event()
        self.splitter = Sentences()
        self.started = False  # the voice lane's job is running
        self.ended = False  # no more sentences will come


class ReadAloud(QObject):
    speaking_started = Signal()  # the first audio of a reading reached the device
    ended = Signal()  # a reading was read to its end, or stopped
    problem = Signal(str)  # why it cannot speak, in words

    def __init__(self, engine: AppEngine, operations: Operations, chat: ChatController,
                 settings: Callable[[], Settings], showing: Callable[[], int | None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine, self.operations, self.settings, self.showing = engine, operations, settings, showing
        self.speaker = Speaker(self)
        self.speaker.started.connect(self.speaking_started)
        self.speaker.finished.connect(self._finished)
        self.speaker.failed.connect(self._failed_in_words)
        self._reading: _Reading | None = None
        self._following: int | None = None  # the conversation whose streaming answer is read
        self._deliver = operations.relay("voice", self._arrived)
        chat.answer_started.connect(self._answer_started)
        chat.answer_text.connect(self._answer_text)
        chat.answer_finished.connect(self._answer_ended)
        chat.answer_failed.connect(self._answer_ended)

    @property
    def reading(self) -> bool:
        return self._reading is not None

    # -- asking -----------------------------------------------------------------------------

    def read(self, text: str) -> None:
        """Read a whole answer (its Read aloud button)."""
        self._halt()
        self._following = None
        reading = self._reading = _Reading()
        self._queue(reading, sentences_of(text))
        self._close(reading)

    def follow(self, conversation_id: int) -> None:
        """Read the answer now starting in ``conversation_id`` as it streams."""
        self.stop()
        self._reading = _Reading()
        self._following = conversation_id

    def stop(self) -> None:
        """Silence now (Stop reading, barge-in, leaving voice mode)."""
        was = self._reading is not None
        self._halt()
        self._following = None
        if was:
            self.ended.emit()

    def warm_up(self) -> None:
        """Start the voice's helper now, so the first answer is not kept waiting for it."""
        voice, speech = self.settings().voice or None, self.engine.speech

        def warm() -> None:
            for _pcm in speech.speak("Ready.", voice=voice)[1]:
                pass  # made and dropped: what counts is the helper process, now started

        self.operations.run("voice", warm, on_failed=lambda explanation: self.problem.emit(explanation.text))

    # -- answers streaming in the chat ----------------------------------------------------------

    def _answer_started(self, conversation_id: int, _messages: list[Message]) -> None:
        if self.settings().voice_read_streaming and conversation_id == self.showing() and self._following is None:
            self.follow(conversation_id)

    def _answer_text(self, conversation_id: int, text: str) -> None:
        reading = self._reading
        if reading is not None and conversation_id == self._following:
            self._queue(reading, reading.splitter.feed(text))

    def _answer_ended(self, conversation_id: int, result: object) -> None:
        reading = self._reading
        if reading is None or conversation_id != self._following:
            return
        self._following = None
        text = result.content if isinstance(result, Message) else None
        if text is not None:
            self._queue(reading, reading.splitter.finish(text))
        self._close(reading)

    # -- the voice lane's job and what it hands back ---------------------------------------------

    def _queue(self, reading: _Reading, sentences: list[str]) -> None:
        for sentence in sentences:
            reading.sentences.put(sentence)
        if sentences and not reading.started:
            reading.started = True
            self._speak_on_lane(reading)

    def _close(self, reading: _Reading) -> None:
        reading.ended = True
        reading.sentences.put(None)
        if not reading.started:  # nothing to say (an empty answer, all code)
            self._arrived((reading, 0, None))

    def _speak_on_lane(self, reading: _Reading) -> None:
        speech, voice, deliver = self.engine.speech, self.settings().voice or None, self._deliver

        def speak_all() -> None:
            while not reading.cancel.is_set():
                sentence = reading.sentences.get()
                if sentence is None:
                    break
                rate, pieces = speech.speak(sentence, voice=voice)
                try:
                    for pcm in pieces:
                        if reading.cancel.is_set():
                            break
                        deliver((reading, rate, pcm))
                finally:
                    pieces.close()  # type: ignore[attr-defined]  # a generator: closing drains the helper's reply
            deliver((reading, 0, None))

        def failed(explanation: Explanation) -> None:
            if reading is self._reading:
                self._halt()
                self.problem.emit(explanation.text)
                self.ended.emit()

        self.operations.run("voice", speak_all, on_failed=failed)

    def _arrived(self, piece: tuple[_Reading, int, bytes | None]) -> None:
        reading, rate, pcm = piece
        if reading is not self._reading or reading.cancel.is_set():
            return
        if pcm is None:
            if self.speaker.speaking:
                self.speaker.end()
            else:
                self._finished()
            return
        if not self.speaker.speaking and not self.speaker.begin(rate, self.settings().voice_output_device):
            self._halt()
            self.ended.emit()
            return
        self.speaker.feed(pcm)

    def _finished(self) -> None:
        if self._reading is not None:
            self._reading = None
            self.ended.emit()

    def _failed_in_words(self, text: str) -> None:
        self.problem.emit(text)

    def _halt(self) -> None:
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.cancel.set()
            reading.sentences.put(None)
        self.speaker.stop()

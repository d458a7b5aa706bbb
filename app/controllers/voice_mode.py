"""Hands-free voice mode: speak, a pause sends it, the answer is read aloud, it listens again.

States, shown on the chat page's voice bar:

- ``listening``: the microphone is on and the ``UtteranceGate`` waits for speech;
- ``hearing``: speech began; when the person has been quiet for ``END_S`` the utterance (from a
  little before its first loud frame) is sent. Its words are heard early: a pause of
  ``PAUSE_S`` starts transcribing it on the voice lane, so the words are ready when the pause
  becomes the end (speech that goes on drops that early hearing and the next pause starts
  another); the person's wait is then the pause, not the pause and Whisper's time;
- ``thinking``: the words were sent as the chat's next message (``send``); the answer streams;
- ``speaking``: ``ReadAloud`` follows the answer, sentence by sentence; when it has read it
  all, listening starts again.

Barge-in: while it thinks or speaks the microphone stays on, behind a louder gate
(``BARGE_LEVEL``, so the voice's own echo from the speakers does not stop it); speech there
stops the voice and the answer (``stop_answer``), and what the person is saying becomes the
next utterance. Esc (or Leave) ends voice mode; an answer still streaming goes on in text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject, Signal

from inglenook.engine import Message, Settings

from inglenook.app.controllers.answers import ChatController
from inglenook.app.controllers.voice_input import hear
from inglenook.app.controllers.voice_output import ReadAloud
from inglenook.app.pages.chat.page import ChatPage
from inglenook.app.services.app_engine import AppEngine
from inglenook.app.services.audio_devices import WHISPER_RATE
from inglenook.app.services.errors import Explanation
from inglenook.app.services.microphone import Microphone
from inglenook.app.services.operations import Operations
from inglenook.app.services.utterance import UtteranceGate

log = logging.getLogger(__name__)

BARGE_LEVEL = 0.55  # -27 dBFS: a person talking over the voice, not its echo
BARGE_START_S = 0.3


class VoiceMode(QObject):
    state_changed = Signal(str)  # off, listening, hearing, thinking, speaking
    send = Signal(str)  # what the person said: the chat's next message
    stop_answer = Signal()  # barge-in: the answer being read stops too
    heard = Signal(object)  # an utterance's samples, just before it is sent (kept if the person asked)

    def __init__(self, engine: AppEngine, operations: Operations, page: ChatPage, chat: ChatController,
                 reader: ReadAloud, settings: Callable[[], Settings], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine, self.operations, self.page, self.reader, self.settings = engine, operations, page, reader, settings
        self.state = "off"
        self.microphone = Microphone(self)
        self.microphone.level.connect(page.set_mic_level)
        self.microphone.heard.connect(self._heard)
        self.microphone.failed.connect(self._microphone_failed)
        self.gate = UtteranceGate()
        self.barge = UtteranceGate(level=BARGE_LEVEL, start_s=BARGE_START_S)
        self._answer: int | None = None  # the conversation whose answer is awaited or read
        self._early: EarlyHearing | None = None  # the utterance heard from its latest pause
        reader.speaking_started.connect(self._speaking)
        reader.ended.connect(self._read_to_end)
        chat.answer_started.connect(self._answer_started)
        chat.answer_failed.connect(self._answer_failed)
        page.voice_mode_requested.connect(self.enter)
        page.voice_mode_left.connect(self.leave)

    @property
    def active(self) -> bool:
        return self.state != "off"

    def enter(self) -> bool:
        if self.active:
            return True
        if not self.microphone.start(self.settings().voice_input_device):
            return False
        self.reader.warm_up()
        # Whisper loads on its first transcription (a second or more): load it while the
        # person starts speaking, not after they stop.
        hear(self.engine, self.operations, np.zeros(WHISPER_RATE // 2, dtype=np.float32), lambda _text: None,
             lambda explanation: self.page.show_voice_problem(explanation.text))
        self._listen()
        return True

    def leave(self) -> None:
        if not self.active:
            return
        self.microphone.stop()
        self._answer = None
        self.reader.stop()
        self._set("off")

    # -- the states ------------------------------------------------------------------------------

    def _set(self, state: str) -> None:
        self.state = state
        self.page.show_voice_state(state)
        self.state_changed.emit(state)

    def _listen(self) -> None:
        self.microphone.clear()
        self.gate.reset()
        self.barge.reset()  # both gates count from where the recording begins
        self._early = None
        self._set("listening")

    def _heard(self, block: np.ndarray) -> None:
        if self.state in ("listening", "hearing"):
            event = self.gate.feed(block)
            if event == "started":
                self._set("hearing")
            elif event == "paused":
                self._hear_early()
            elif event == "resumed":
                self._early = None  # they go on: what was heard so far is not the utterance
            elif event == "ended":
                self._utterance_ended()
        elif self.state in ("thinking", "speaking"):
            if self.barge.feed(block) == "started":
                self._barge_in()

    def _hear_early(self) -> None:
        early = self._early = EarlyHearing()
        samples = self.microphone.samples()[self.gate.start_sample:].copy()

        def failed(_explanation: Explanation) -> None:
            early.finish(None)  # the end hears it again and says what failed then

        hear(self.engine, self.operations, samples, early.finish, failed)

    def _utterance_ended(self) -> None:
        samples = self.microphone.samples()[self.gate.start_sample:].copy()
        self.microphone.clear()
        self.barge.reset()
        early, self._early = self._early, None
        self._set("thinking")

        def said(text: str) -> None:
            if self.state != "thinking" or self._answer is not None:
                return
            if not text.strip():
                self._listen()  # a cough, a door: nothing to send
                return
            self.heard.emit(samples)  # first: the recording waits for the message it becomes
            self.send.emit(text.strip())

        def failed(explanation: Explanation) -> None:
            self.page.show_voice_problem(explanation.text)
            if self.state == "thinking":
                self._listen()

        if early is not None:
            early.then(said, lambda: hear(self.engine, self.operations, samples, said, failed))
        else:
            hear(self.engine, self.operations, samples, said, failed)

    def not_sent(self, why: str) -> None:
        """What was said could not go (an answer still streams in this chat): say so, listen again."""
        self.page.show_voice_problem(why)
        if self.state == "thinking" and self._answer is None:
            self._listen()

    def _answer_started(self, conversation_id: int, _messages: list[Message]) -> None:
        if self.state != "thinking" or self._answer is not None:
            return
        self.reader.follow(conversation_id)  # first: it ends a reading in progress, which must not count as ours
        self._answer = conversation_id

    def _speaking(self) -> None:
        if self.state == "thinking" and self._answer is not None:
            self._set("speaking")

    def _read_to_end(self) -> None:
        if self.state in ("thinking", "speaking") and self._answer is not None:
            self._answer = None
            self._listen()

    def _answer_failed(self, conversation_id: int, _exc: object) -> None:
        if conversation_id == self._answer and self.state == "thinking":
            self._answer = None
            self._listen()

    def _barge_in(self) -> None:
        """The person talks over the voice: silence it, stop the answer, hear them out."""
        log.info("barge-in: the voice and the answer stop")
        answering = self._answer is not None
        self._answer = None
        self.reader.stop()
        if answering:
            self.stop_answer.emit()
        # What they said from the barge gate's onset is the start of the next utterance. The
        # recording is cut to begin there, not cleared: the utterance gate counts its samples
        # from its reset, and an utterance is cut from the recording at the gate's start, so
        # the two must begin at the same sample. (Cleared after copying, the gate counted the
        # copy and the recording did not: the utterance was cut that many samples late, and a
        # barge-in after a few seconds of answer was heard as 0.3 s and dropped as silence.)
        self.microphone.keep_from(self.barge.start_sample)
        said = self.microphone.samples().copy()
        self.gate.reset()
        self._set("listening")
        self._heard(said)

    def _microphone_failed(self, text: str) -> None:
        self.page.show_voice_problem(text)
        self.leave()


class EarlyHearing:
    """An utterance's words heard from its latest pause, on the GUI thread: ``finish`` gets them
    (None when hearing failed), ``then`` says what to do with them once the pause is the end —
    at once when they are in, else when they come; on failure the whole utterance is heard again."""

    def __init__(self) -> None:
        self.done = False
        self.text: str | None = None
        self._use: Callable[[str], None] | None = None
        self._again: Callable[[], None] | None = None

    def finish(self, text: str | None) -> None:
        self.done, self.text = True, text
        if self._use is not None and self._again is not None:
            self._deliver()

    def then(self, use: Callable[[str], None], again: Callable[[], None]) -> None:
        self._use, self._again = use, again
        if self.done:
            self._deliver()

    def _deliver(self) -> None:
        assert self._use is not None and self._again is not None
        if self.text is None:
            self._again()
        else:
            self._use(self.text)

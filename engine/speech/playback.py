"""Audio files into PCM for a speaker, read a piece at a time from any point in the file.

The window plays recordings and voice samples through its own PCM speaker (a ``QAudioSink``),
so it needs no media plugin and the package carries one FFmpeg, PyAV's. ``PcmReader`` seeks the
container near the time asked for and decodes forward from there, a chunk per ``read``: an
hour-long recording starts playing after one chunk, never after decoding the hour.

A seek lands on a packet at or before the time asked for; the samples between that packet's
start and the time asked for are decoded and dropped, so the first sample handed over is the
one at ``start_s`` (to within the resampler's few samples of delay).
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType
from typing import Any

from .audio import AudioError, _reason

log = logging.getLogger(__name__)

PLAYBACK_RATE = 24_000  # Hz, mono int16: what the window's speaker is opened at
CHUNK_S = 0.5


class PcmReader:
    """Mono int16 PCM at ``rate`` Hz from ``path``, starting at ``start_s`` seconds.

    ``read`` returns the next chunk of bytes and ``b""`` once the file is played out. A reader
    is used by one thread at a time (the window's decoding lane); ``close`` frees the file.
    """

    def __init__(self, path: str | Path, *, rate: int = PLAYBACK_RATE, start_s: float = 0.0) -> None:
        import av  # noqa: PLC0415 — FFmpeg's libraries load only when audio is decoded

        self.rate = rate
        self.start_s = max(0.0, start_s)
        try:
            self._container: Any = av.open(str(path), mode="r", metadata_errors="ignore")
        except (av.FFmpegError, ValueError, OSError) as exc:
            raise AudioError(f"the file is not audio that can be played ({_reason(exc)})", param="file") from None
        if not self._container.streams.audio:
            self._container.close()
            raise AudioError("the file holds no audio stream", param="file")
        self._stream = self._container.streams.audio[0]
        self.duration_s = _duration(self._container, self._stream)
        # Where the timeline's zero lies: an MP3's first samples (the encoder's priming) are
        # trimmed, so its audio starts at a later timestamp, and times count from there.
        start = self._stream.start_time
        self._origin = float(start * self._stream.time_base) if start is not None and self._stream.time_base else 0.0
        self._resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        self._skip: int | None = None  # samples to drop before start_s, known at the first frame
        self._frames = self._container.decode(self._stream)
        self._done = False
        if self.start_s > 0:
            self._seek(self._origin + self.start_s)

    def _seek(self, seconds: float) -> None:
        import av  # noqa: PLC0415

        time_base = self._stream.time_base
        try:
            if time_base is None:
                self._container.seek(int(seconds * av.time_base))  # container units (microseconds)
            else:
                self._container.seek(int(seconds / time_base), stream=self._stream, backward=True)
        except av.FFmpegError as exc:
            # A container that cannot seek: decode from the start and drop what comes before.
            log.info("seek to %.1f s failed (%s); decoding from the start", seconds, _reason(exc))
            self._container.seek(0)
        self._frames = self._container.decode(self._stream)

    def read(self, seconds: float = CHUNK_S) -> bytes:
        """The next ``seconds`` or so of PCM; ``b""`` at the end of the audio."""
        wanted = max(2, int(seconds * self.rate) * 2)
        out = bytearray()
        while len(out) < wanted and not self._done:
            out += self._next_piece()
        return bytes(out)

    def _next_piece(self) -> bytes:
        import av  # noqa: PLC0415

        try:
            frame = next(self._frames)
        except StopIteration:
            frame = None
        except av.FFmpegError as exc:  # damage: play what decoded before it
            log.info("audio playback stopped early: %s", _reason(exc))
            frame = None
        if frame is None:
            self._done = True
            return b"".join(f.to_ndarray().tobytes() for f in self._resampler.resample(None))
        if self._skip is None:
            pts, time_base = frame.pts, frame.time_base
            first = float(pts * time_base) - self._origin if pts is not None and time_base is not None else 0.0
            self._skip = max(0, round((self.start_s - first) * self.rate))
        pcm = b"".join(f.to_ndarray().tobytes() for f in self._resampler.resample(frame))
        if self._skip:
            dropped = min(self._skip, len(pcm) // 2)
            self._skip -= dropped
            pcm = pcm[dropped * 2:]
        return pcm

    def __iter__(self) -> PcmReader:
        return self

    def __next__(self) -> bytes:
        chunk = self.read()
        if not chunk:
            raise StopIteration
        return chunk

    def close(self) -> None:
        self._done = True
        self._container.close()

    def __enter__(self) -> PcmReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _duration(container: Any, stream: Any) -> float:
    """The audio's length in seconds as the file states it (0.0 where it does not)."""
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000  # AV_TIME_BASE units
    return 0.0

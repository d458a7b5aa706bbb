"""Speech samples into the formats ``/v1/audio/speech`` offers: WAV and raw PCM by hand, FLAC,
MP3 (LAME), Opus (in Ogg) and AAC (ADTS) through PyAV's FFmpeg, whose wheels carry all four."""

from __future__ import annotations

import io
import struct
from typing import Any

import numpy as np

# format -> (FFmpeg container, codec, sample rate the codec accepts or None for the voice's own)
_CODECS: dict[str, tuple[str, str, int | None]] = {
    "flac": ("flac", "flac", None),
    "mp3": ("mp3", "libmp3lame", None),
    "opus": ("ogg", "libopus", 24_000),  # Opus runs at 48/24/16/12/8 kHz only
    "aac": ("adts", "aac", None),
}
SPEECH_FORMATS = ("wav", "pcm", *_CODECS)
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg",
               "opus": "audio/ogg", "aac": "audio/aac"}


def wav_header(sample_rate: int, data_bytes: int | None = None) -> bytes:
    """A 44-byte header for mono 16-bit PCM. ``None``: the length is not known yet (a stream), so
    the sizes say "as long as there is", which players read to the end of the stream."""
    size = 0xFFFFFFFF if data_bytes is None else data_bytes
    riff = 0xFFFFFFFF if data_bytes is None else 36 + data_bytes
    return (b"RIFF" + struct.pack("<I", riff) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16) + b"data" + struct.pack("<I", size))


def encode_pcm(pcm: bytes, sample_rate: int, fmt: str) -> bytes:
    """Whole mono int16 PCM into ``fmt`` (one of ``SPEECH_FORMATS``)."""
    if fmt == "pcm":
        return pcm
    if fmt == "wav":
        return wav_header(sample_rate, len(pcm)) + pcm
    if fmt not in _CODECS:
        raise ValueError(f"unknown speech format {fmt!r}")
    import av  # noqa: PLC0415 — FFmpeg's libraries load only when a compressed format is asked for

    container_name, codec, rate = _CODECS[fmt]
    out_rate = rate or sample_rate
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container_name) as container:
        stream: Any = container.add_stream(codec, rate=out_rate, layout="mono")
        resampler = av.AudioResampler(format=stream.codec_context.format.name, layout="mono", rate=out_rate)
        samples = np.frombuffer(pcm, dtype="<i2").reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = sample_rate
        for resampled in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(resampled):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()

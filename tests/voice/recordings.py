"""Recordings made at test time by the starter voice (never committed): sentences spoken one
after another with silence between them, written as a WAV file, so a transcript has segments
at known places in time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def speak_recording(speech: object, path: Path, sentences: Sequence[str], gap_s: float = 0.0) -> Path:
    """``sentences`` spoken by the default voice through ``speech`` (an engine ``Speech``),
    ``gap_s`` seconds of silence after each, as a WAV file at ``path``."""
    from inglenook.engine import encode_pcm

    parts: list[bytes] = []
    rate = 0
    for sentence in sentences:
        rate, pcm = speech.speak(sentence)  # type: ignore[attr-defined]
        parts.append(b"".join(pcm))
        parts.append(np.zeros(int(gap_s * rate), dtype="<i2").tobytes())
    path.write_bytes(encode_pcm(b"".join(parts), rate, "wav"))
    return path


def speech_missing() -> str | None:
    """Why recordings cannot be made and read here (None: they can)."""
    from tests.voice.conftest import _missing

    return _missing()

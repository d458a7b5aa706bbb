"""PcmReader (engine/speech/playback.py): a recording read for the window's speaker a chunk at
a time from any time in it. Speech is made at test time by the starter voice; the samples read
from a time are compared with the same file read from its start, sliced at that time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

RATE = 24_000
SENTENCE = "Please close the window before you leave the house, and take the blue umbrella with you."


@pytest.fixture(scope="module")
def talk(speech_room, tmp_path_factory) -> dict[str, Path]:
    """One sentence of speech as WAV and as MP3 (whose first samples are the encoder's priming)."""
    from inglenook.engine import encode_pcm

    rate, pcm = speech_room.speak(SENTENCE)
    raw = b"".join(pcm)
    folder = tmp_path_factory.mktemp("playback")
    files = {}
    for fmt in ("wav", "mp3"):
        files[fmt] = folder / f"talk.{fmt}"
        files[fmt].write_bytes(encode_pcm(raw, rate, fmt))
    return files


def _samples(path: Path, start_s: float = 0.0) -> np.ndarray:
    from inglenook.engine import PcmReader

    with PcmReader(path, rate=RATE, start_s=start_s) as reader:
        return np.frombuffer(b"".join(reader), dtype="<i2").astype(np.float64)


def _lag(reference: np.ndarray, at: int, part: np.ndarray, search: int) -> int:
    """How far from ``at`` in ``reference`` the samples of ``part`` are found (0: right there)."""
    window = part[400:400 + RATE // 2]  # past the resampler's fresh start
    start = at + 400
    errors = {lag: np.abs(reference[start + lag:start + lag + window.size] - window).mean()
              for lag in range(-search, search + 1)}
    return min(errors, key=errors.__getitem__)


@pytest.mark.parametrize("fmt", ["wav", "mp3"])
@pytest.mark.parametrize("start_s", [0.85, 2.4])
def test_reading_from_a_time_gives_the_samples_from_that_time(talk, fmt: str, start_s: float) -> None:
    whole = _samples(talk[fmt])
    part = _samples(talk[fmt], start_s)
    at = round(start_s * RATE)
    assert np.abs(whole[at:at + RATE]).max() > 1000  # speech there, not silence that matches anything
    frame = 1152 * RATE // 22_050  # an MP3 frame, the coarsest step a seek could miss by
    assert abs(part.size - (whole.size - at)) <= frame
    assert abs(_lag(whole, at, part, frame)) <= 2  # the same samples, to within 2


def test_a_reader_reads_a_chunk_at_a_time_and_knows_the_length(talk) -> None:
    from inglenook.engine import PcmReader

    with PcmReader(talk["wav"], rate=RATE) as reader:
        whole_s = reader.duration_s
        first = reader.read(0.25)
        assert 0.25 * RATE * 2 <= len(first) <= (0.25 * RATE + 4096) * 2  # one chunk, not the file
        rest = b"".join(reader)
        assert reader.read() == b""  # played out
    assert whole_s > 3.0
    assert abs((len(first) + len(rest)) / 2 / RATE - whole_s) < 0.01


def test_a_time_past_the_end_reads_nothing_and_a_non_audio_file_is_refused(talk, tmp_path: Path) -> None:
    from inglenook.engine import AudioError, PcmReader

    assert _samples(talk["wav"], 3600.0).size == 0
    text = tmp_path / "notes.mp3"
    text.write_text("these are notes, not sound")
    with pytest.raises(AudioError):
        PcmReader(text)

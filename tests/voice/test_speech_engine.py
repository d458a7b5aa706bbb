"""The speech room itself: text → speech → text through the engine, every container it
promises, and hostile files (empty, truncated, misnamed, an hour of silence)."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest

from inglenook.engine import AudioError, Speech, TranscriptionOptions, render_transcript

from .conftest import MAX_WER, SENTENCES, word_error_rate


def test_ten_sentences_round_trip_through_the_engine(speech_room: Speech, spoken) -> None:
    heard = [speech_room.transcribe(path).result().text for path in spoken]
    wer = word_error_rate(list(SENTENCES), heard)
    print(f"engine WER {wer:.3f}")
    assert wer <= MAX_WER, list(zip(SENTENCES, heard))


@pytest.mark.parametrize("container", ["mp3", "m4a", "ogg", "flac", "webm", "mp4", "wav"])
def test_every_promised_container_decodes(speech_room: Speech, spoken, tmp_path, container: str) -> None:
    import av

    codec = {"mp3": "libmp3lame", "m4a": "aac", "ogg": "libopus", "flac": "flac", "webm": "libopus",
             "mp4": "aac", "wav": "pcm_s16le"}[container]
    rate = 48_000 if codec == "libopus" else 22_050
    samples = _samples(spoken[0])
    target = tmp_path / f"clip.{container}"
    with av.open(str(target), mode="w") as out:
        stream = out.add_stream(codec, rate=rate, layout="mono")
        resampler = av.AudioResampler(format=stream.codec_context.format.name, layout="mono", rate=rate)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = 22_050
        for piece in [*resampler.resample(frame), *resampler.resample(None)]:
            for packet in stream.encode(piece):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    text = speech_room.transcribe(target).result().text
    assert word_error_rate([SENTENCES[0]], [text]) <= MAX_WER, text


def test_a_wrong_extension_is_read_by_its_bytes(speech_room: Speech, spoken, tmp_path) -> None:
    misnamed = tmp_path / "notes.txt"
    misnamed.write_bytes(spoken[1].read_bytes())
    assert word_error_rate([SENTENCES[1]], [speech_room.transcribe(misnamed).result().text]) <= MAX_WER


def test_text_named_like_audio_is_refused(speech_room: Speech, tmp_path) -> None:
    fake = tmp_path / "song.mp3"
    fake.write_text("this is not audio at all\n" * 20)
    with pytest.raises(AudioError):
        speech_room.transcribe(fake).result()


def test_an_empty_file_is_refused(speech_room: Speech, tmp_path) -> None:
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(AudioError, match="empty"):
        speech_room.transcribe(empty).result()
    with pytest.raises(AudioError, match="empty"):
        speech_room.transcribe(b"").result()


def test_a_truncated_wav_gives_what_it_holds(speech_room: Speech, spoken) -> None:
    data = spoken[2].read_bytes()
    with pytest.raises(AudioError):  # the header alone: nothing to hear
        speech_room.transcribe(data[:44]).result()
    half = speech_room.transcribe(data[: len(data) // 2]).result().text
    first_words = SENTENCES[2].split()[:3]
    assert " ".join(first_words).lower() in half.lower(), half


def test_an_hour_of_silence_ends_with_no_words(speech_room: Speech, tmp_path) -> None:
    """Voice activity detection skips silence: an hour of it is read, found empty, and ends
    (pytest's timeout bounds the time; no threshold here)."""
    path = tmp_path / "silence.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8_000)
        block = bytes(8_000 * 2 * 60)  # a minute
        for _ in range(60):
            out.writeframes(block)
    transcript = speech_room.transcribe(path).result()
    assert transcript.text == ""
    assert transcript.duration == pytest.approx(3600, abs=1)


def test_too_long_audio_is_refused_while_decoding(tmp_path) -> None:
    room = Speech(max_seconds=5)
    try:
        path = tmp_path / "long.wav"
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16_000)
            out.writeframes(bytes(16_000 * 2 * 10))
        with pytest.raises(AudioError, match="longer"):
            room.transcribe(path).result()
    finally:
        room.close()


def test_captions_carry_the_times(speech_room: Speech, spoken) -> None:
    transcript = speech_room.transcribe(spoken[0], TranscriptionOptions(words=True)).result()
    srt = render_transcript(transcript, "srt")
    vtt = render_transcript(transcript, "vtt")
    verbose = render_transcript(transcript, "verbose_json", words=True)
    assert isinstance(srt, str) and srt.startswith("1\n00:00:00,")
    assert isinstance(vtt, str) and vtt.startswith("WEBVTT\n\n00:00:")
    assert isinstance(verbose, dict) and verbose["words"][0]["word"].lower() == "the"
    assert verbose["segments"][-1]["end"] <= transcript.duration + 0.5


def test_speech_speed_and_limits(speech_room: Speech) -> None:
    from inglenook.engine import InvalidRequest

    rate, normal = speech_room.speak("Good morning to you.", speed=1.0)
    fast = b"".join(speech_room.speak("Good morning to you.", speed=2.0)[1])
    slow_len = len(b"".join(normal))
    assert rate == 22_050 and len(fast) < slow_len
    with pytest.raises(InvalidRequest):
        speech_room.speak("x" * 4097)
    with pytest.raises(InvalidRequest):
        speech_room.speak("hello", speed=5)
    with pytest.raises(InvalidRequest):
        speech_room.speak("hello", voice="nobody")


def test_an_abandoned_speech_request_leaves_the_helper_ready(speech_room: Speech) -> None:
    _, pcm = speech_room.speak("First sentence here. Second sentence here. Third sentence here.")
    next(pcm)
    pcm.close()  # the rest is drained before the next request
    _, again = speech_room.speak("Hello again.")
    assert len(b"".join(again)) > 0


def _samples(path) -> np.ndarray:
    with wave.open(io.BytesIO(path.read_bytes())) as source:
        return np.frombuffer(source.readframes(source.getnframes()), dtype="<i2")


def test_piper_never_enters_this_process(speech_room: Speech) -> None:
    import sys

    b"".join(speech_room.speak("Licences matter.")[1])
    assert "piper" not in sys.modules and "espeakbridge" not in " ".join(sys.modules)


def test_more_whisper_models_are_found_in_the_speech_folder(tmp_path, spoken) -> None:
    """A CTranslate2 Whisper folder under <models>/speech is listed by its name and used."""
    import shutil

    from inglenook.engine.speech.starter import find_starter_whisper

    starter = find_starter_whisper()
    assert starter is not None
    folder = tmp_path / "speech"
    shutil.copytree(starter, folder / "my-whisper")
    (folder / "not-a-model").mkdir()
    room = Speech(folder=folder)
    try:
        ids = [m.id for m in room.models() if m.kind == "speech-to-text"]
        assert ids == ["whisper-tiny.en", "my-whisper"]
        text = room.transcribe(spoken[8], model="my-whisper").result().text
        assert word_error_rate([SENTENCES[8]], [text]) <= MAX_WER
    finally:
        room.close()

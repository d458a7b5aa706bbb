"""Recordings as documents (issue 42, item 4): a recording spoken at test time by the starter
voice is transcribed through the engine's speech room into a document whose text is headed by
times, whose passages are labelled by them, whose prompt block offers citations with a time,
and whose file is kept by the document store for playing back."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.voice.conftest import MAX_WER, SENTENCES, word_error_rate
from tests.voice.recordings import speak_recording


@pytest.fixture(scope="module")
def recording(speech_room, tmp_path_factory) -> Path:
    # Ten sentences with ten seconds of silence after each: past a minute, so more than one
    # half-minute section, and Whisper's segments start at places the test knows roughly.
    folder = tmp_path_factory.mktemp("recording")
    return speak_recording(speech_room, folder / "meeting.wav", SENTENCES, gap_s=10.0)


def transcribe_with(speech_room):
    return lambda path: speech_room.transcribe(path).result()


def test_a_recording_becomes_a_document_with_times(speech_room, recording: Path, tmp_path: Path) -> None:
    from inglenook.engine import AUDIO_KIND, Recordings, parse_clock, read_recording
    from inglenook.engine.documents import documents_block, split_passages

    kept = Recordings(tmp_path / "recordings")
    document = read_recording(recording, transcribe_with(speech_room), kept)
    assert document.kind == AUDIO_KIND and document.name == "meeting.wav"
    assert document.text.startswith("## 00:")
    passages = split_passages(document)
    labels = [p.label for p in passages]
    times = [parse_clock(label) for label in labels]
    assert len(passages) >= 2 and None not in times  # every passage is labelled by a time
    assert times == sorted(times) and times[-1] >= 60  # in order, and the last past the first minute
    assert not any(p.text.startswith("##") for p in passages)  # the time is the label, not the text
    heard = " ".join(p.text for p in passages)  # every sentence is in some passage, in order
    assert word_error_rate([" ".join(SENTENCES)], [heard]) <= MAX_WER

    block = documents_block([document])
    assert f"[meeting.wav, {labels[0]}]" in block  # the citation form the model is offered
    assert '<document name="meeting.wav" kind="audio">' in block

    copy = kept.find(document.sha256)
    assert copy is not None and copy.read_bytes() == recording.read_bytes() and copy.suffix == ".wav"
    assert kept.prune(set()) == 1 and kept.find(document.sha256) is None


def test_a_document_block_without_recordings_is_unchanged() -> None:
    from inglenook.engine import Document
    from inglenook.engine.documents import documents_block
    from inglenook.engine.documents.prompt import PREAMBLE

    notes = Document(name="notes.md", kind="markdown", sha256="0" * 64, size=5, text="# Notes\n\nhello")
    assert documents_block([notes]).split("\n\n")[0] == PREAMBLE  # the tokens every such chat shares


def test_a_stopped_transcription_is_not_kept(speech_room, recording: Path, tmp_path: Path) -> None:
    from inglenook.engine import DocumentError, Recordings, read_recording

    stop = threading.Event()
    stop.set()  # Stop pressed before the first segment was heard
    kept = Recordings(tmp_path / "recordings")

    def transcribe(path: Path):
        return speech_room.transcribe(path, cancelled=stop.is_set).result()

    with pytest.raises(DocumentError, match="stopped"):
        read_recording(recording, transcribe, kept, stop.is_set)
    assert not kept.folder.exists() or not any(kept.folder.iterdir())


def test_silence_is_not_a_document(speech_room, tmp_path: Path) -> None:
    import numpy as np

    from inglenook.engine import DocumentError, Recordings, encode_pcm, read_recording

    quiet = tmp_path / "quiet.wav"
    quiet.write_bytes(encode_pcm(np.zeros(16_000 * 5, dtype="<i2").tobytes(), 16_000, "wav"))
    with pytest.raises(DocumentError, match="no speech"):
        read_recording(quiet, transcribe_with(speech_room), Recordings(tmp_path / "kept"))


def test_clocks_read_and_written() -> None:
    from inglenook.engine.documents import clock, parse_clock

    assert clock(751.9) == "12:31" and clock(3723) == "1:02:03" and clock(-1) == "00:00"
    assert parse_clock("12:31") == 751 and parse_clock(" 1:02:03 ") == 3723 and parse_clock("7:05") == 425
    assert parse_clock("page 3") is None and parse_clock("12:61") is None and parse_clock("") is None


def test_a_kept_recording_goes_with_the_last_chat_that_holds_it(speech_room, recording: Path, home) -> None:
    from inglenook.engine import Engine, read_recording

    engine = Engine(scan=False)
    try:
        chats = engine.chats
        kept = chats.documents.recordings
        assert kept.folder == engine.paths.data / "recordings"  # where the window looks for it
        document = read_recording(recording, transcribe_with(speech_room), kept)
        first, second = chats.new_conversation(), chats.new_conversation()
        chats.attach_documents(first.id, [document])
        chats.attach_documents(second.id, [document])
        chats.detach_document(first.id, document.sha256)
        assert kept.find(document.sha256) is not None  # the second chat still holds it
        chats.attach_documents(first.id, [document])
        chats.delete_conversation(second.id)
        assert kept.find(document.sha256) is not None
        chats.delete_conversation(first.id)
        assert kept.find(document.sha256) is None  # deleted with the last chat that held it
    finally:
        engine.close()

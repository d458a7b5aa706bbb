"""Recordings in the window (issue 42, item 4): a recording attached to a chat is transcribed
on the speech lane with progress, kept as a document whose passages hold times, offered to
the model with citations by time, and a click on such a citation plays it from there through
the window's PCM speaker into the tests' own sound server (tests/audio_device.py: a PulseAudio
daemon whose null sink is recorded). The recording is spoken at test time by the starter voice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests import audio_device
from tests.voice.recordings import speak_recording, speech_missing

from .conftest import ANSWER_TIMEOUT_MS, new_chat, type_and_send, wait_answer

SENTENCES = ("The boiler is serviced every October by the same engineer.",
             "The spare key is kept under the blue flower pot by the door.",
             "The meeting next week moves from Tuesday to Thursday afternoon.")

pytestmark = pytest.mark.skipif(speech_missing() is not None, reason=str(speech_missing()))


def _samples_at(path: Path, seconds: float, length_s: float = 1.5) -> np.ndarray:
    """``length_s`` of the file from ``seconds``, at the test speakers' rate."""
    from inglenook.engine import PcmReader

    with PcmReader(path, rate=audio_device.SPEAKER_RATE, start_s=seconds) as reader:
        return np.frombuffer(reader.read(length_s), dtype="<i2")


def _match(heard: np.ndarray, expected: np.ndarray) -> float:
    """The best normalized cross-correlation of ``expected`` anywhere in ``heard`` (1.0: the
    same samples; the sound server's resampling and rounding keep it a little below)."""
    x, y = heard.astype(np.float64), expected.astype(np.float64)
    assert x.size >= y.size and np.abs(y).max() > 1000  # a sound to look for, and room to find it
    size = 1 << int(np.ceil(np.log2(x.size + y.size)))
    dot = np.fft.irfft(np.fft.rfft(x, size) * np.conj(np.fft.rfft(y, size)), size)[: x.size - y.size + 1]
    energy = np.convolve(x * x, np.ones(y.size), mode="valid")  # of each window of ``heard``
    return float((dot / (np.sqrt(np.maximum(energy, 1e-9)) * np.linalg.norm(y))).max())


@pytest.fixture
def talk(window, tmp_path: Path) -> Path:
    # Twelve seconds of silence after each sentence: the last one starts past the half minute.
    return speak_recording(window.engine.speech, tmp_path / "talk.wav", SENTENCES, gap_s=12.0)


def test_a_recording_becomes_a_cited_document_that_plays_from_the_cited_time(
        qtbot, window, talk: Path, sound_server) -> None:
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QDesktopServices

    from inglenook.app.text.markdown import link_citations
    from inglenook.engine import parse_clock
    from inglenook.engine.documents import documents_block, split_passages

    conversation_id = new_chat(qtbot, window, max_tokens=4)
    bar = window.composer.attachments
    shown: list[tuple[str, float | None]] = []
    show = bar.show_transcribing
    bar.show_transcribing = lambda text, fraction=None: (shown.append((text, fraction)), show(text, fraction))
    window.attachments.attach([talk])
    qtbot.waitUntil(lambda: len(bar.chips()) == 1, timeout=ANSWER_TIMEOUT_MS)
    assert "talk.wav · recording · ≈" in list(bar.chips().values())[0].text()
    assert ("Transcribing talk.wav…", None) in shown  # the progress line, busy until the length is known
    fractions = [f for text, f in shown if text and f is not None]
    assert fractions and fractions == sorted(fractions) and fractions[-1] > 0.5  # it moved forward
    assert shown[-1] == ("", None) and not bar.recording_note.isVisible()  # and went when done

    [document] = window.engine.chats.attached_documents(conversation_id)
    assert document.kind == "audio"
    labels = [p.label for p in split_passages(document)]
    assert len(labels) >= 2 and all(parse_clock(label) is not None for label in labels)
    assert f"[talk.wav, {labels[0]}]" in documents_block([document])  # the citation form the model is offered

    type_and_send(qtbot, window, "When is the boiler serviced?")
    wait_answer(qtbot, window, conversation_id)
    last = window.engine.messages(conversation_id)[-1]
    assert last.role == "assistant" and last.prompt_tokens > 100  # the transcript was read with the question

    # A citation with a time, as an answer's Markdown makes it, clicked: the recording plays from there.
    cited = labels[-1]
    url = link_citations(f"[talk.wav, {cited}]").split("](", 1)[1].rstrip(")")
    target = int(parse_clock(cited) * 1000)
    assert target >= 30_000  # the last section starts past the half minute (so no playback from 0 reaches it soon)
    if sound_server is None:
        pytest.skip(audio_device.missing() or "the test sound server did not start (see the warning)")
    recording = sound_server.record_speakers()
    try:
        QDesktopServices.openUrl(QUrl(url))
        qtbot.waitUntil(lambda: bar.player is not None, timeout=10_000)
        player = bar.player
        qtbot.waitUntil(lambda: player.last_seek == target, timeout=30_000)
        assert player.playing and player.position() >= target  # it starts at the cited time, not at 0
        # Past the cited time by a few seconds of sound written to the device, and that sound heard.
        qtbot.waitUntil(lambda: player.position() >= target + 3000, timeout=30_000)
        qtbot.waitUntil(lambda: recording.loud_samples() > 2_000, timeout=30_000)
    finally:
        recording.close()
    # What the speakers played holds the recording's samples from the cited time (the last
    # sentence), and not its opening sentence, which playing from 0 would have sounded.
    heard = np.frombuffer(recording.path.read_bytes(), dtype="<i2")
    assert _match(heard, _samples_at(talk, target / 1000)) > 0.8
    assert _match(heard, _samples_at(talk, 0.0)) < 0.5
    assert player.isVisible() and player.source is not None and player.source.read_bytes() == talk.read_bytes()
    assert player.source.parent == window.engine.paths.data / "recordings"  # the store's copy, not the person's
    assert player.slider.maximum() >= target  # the slider spans the whole recording

    # Pause holds the position; a second citation, earlier, plays from there.
    player.pause()
    paused = player.position()
    assert not player.playing and not player.player.speaker.speaking and paused >= target
    assert player.play_button.text() == "Play"
    with qtbot.waitSignal(player.seeked, timeout=10_000):
        QDesktopServices.openUrl(QUrl(link_citations("[talk.wav, 00:01]").split("](", 1)[1].rstrip(")")))
    assert player.last_seek == 1000 and player.play_button.text() == "Pause"
    qtbot.waitUntil(lambda: 1500 <= player.position() < target, timeout=30_000)
    player.close()  # closing the window ends the sound
    assert not player.playing and not player.player.speaker.speaking


def test_stop_ends_a_transcription_and_attaches_nothing(qtbot, window, talk: Path) -> None:
    conversation_id = new_chat(qtbot, window)
    bar = window.composer.attachments
    window.attachments.attach([talk])
    bar.recording_stop.click()  # before the first segment is heard
    qtbot.waitUntil(lambda: "reading talk.wav was stopped" in bar.status.text(), timeout=ANSWER_TIMEOUT_MS)
    assert not bar.chips() and not bar.recording_note.isVisible()
    assert window.engine.chats.attached_documents(conversation_id) == []


def test_the_player_seeks_with_its_slider_plays_to_the_end_and_refuses_what_is_not_audio(
        qtbot, sound_server, tmp_path: Path) -> None:
    from PySide6.QtWidgets import QAbstractSlider

    from inglenook.app.widgets.recording_player import RecordingPlayer
    from inglenook.engine import Speech

    if sound_server is None:
        pytest.skip(audio_device.missing() or "the test sound server did not start (see the warning)")
    speech = Speech()
    try:
        short = speak_recording(speech, tmp_path / "short.wav", SENTENCES[:1], gap_s=3.0)
    finally:
        speech.close()
    player = RecordingPlayer()
    qtbot.addWidget(player)
    player.show()
    player.play_from(short, 0.0)
    qtbot.waitUntil(lambda: player.slider.maximum() > 3000, timeout=30_000)  # the length, from the header
    length = player.slider.maximum()
    # A click beside the handle (a page step): playing starts again from the slider's new place.
    player.slider.setPageStep(2000)
    with qtbot.waitSignal(player.seeked, timeout=10_000) as seek:
        player.slider.triggerAction(QAbstractSlider.SliderAction.SliderPageStepAdd)
    assert seek.args[0] >= 2000 and player.last_seek == seek.args[0] and player.playing
    # Played to its end by itself: Play is offered again, and starts from the beginning.
    qtbot.waitUntil(lambda: not player.playing, timeout=60_000)
    assert player.play_button.text() == "Play" and player.slider.value() >= length - 1000
    player.play_button.click()
    assert player.playing and player.position() < 1000
    player.close()
    assert not player.playing

    # Paused at once, before the first sound was decoded: the slider still learns the length
    # (it kept Qt's default range of 0-99, its handle at the end, when the pause came first).
    again = RecordingPlayer()
    qtbot.addWidget(again)
    again.show()
    again.play_from(short, 2.0)
    again.pause()
    qtbot.waitUntil(lambda: again.slider.maximum() == length, timeout=30_000)
    assert again.slider.value() == 2000 and not again.playing
    again.close()

    # A file that holds no sound: the player says so instead of playing.
    notes = tmp_path / "notes.mp3"
    notes.write_text("not a recording")
    player.play_from(notes, 0.0)
    qtbot.waitUntil(lambda: player.title.text().startswith("Cannot play"), timeout=30_000)
    assert not player.playing and not player.player.speaker.speaking

"""Voice in the window, on a real sound server: the microphone button records real samples,
Read aloud plays into a real sink, and hands-free voice mode holds a spoken turn.

The person's voice is the only stand-in: the starter voice speaks a sentence through the
engine at test time (nothing recorded is committed) and ``tests/audio_device.py`` plays it
into a PulseAudio pipe source in real time. Answers are forced by a grammar, so what the voice
reads is known whatever the model would have said. Needs PulseAudio (``pulseaudio``,
``pulseaudio-utils``), faster-whisper with tiny.en and piper-tts with the starter voice;
where one is missing the tests skip and say which.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests import audio_device
from tests.voice.conftest import _missing as speech_missing, word_error_rate

from .conftest import new_chat, wait_answer

pytestmark = [pytest.mark.gui, pytest.mark.integration]

SENTENCE = "Please close the window before you leave the house."
HEARD_MS = 120_000  # Whisper and Piper load on first use; two busy cores are slow, never wrong
ANSWER = "The kettle is on. Tea will be ready soon."


def _skip_reason() -> str | None:
    return audio_device.missing() or speech_missing()


@pytest.fixture
def pulse(sound_server) -> audio_device.PulseServer:
    """The session's sound server (tests/gui/conftest.py), where PulseAudio and the speech models are."""
    reason = _skip_reason()
    if reason or sound_server is None:
        pytest.skip(reason or "the sound server did not start")
    return sound_server


@pytest.fixture(scope="module")
def spoken() -> bytes:
    """``SENTENCE`` in the starter voice, as 16 kHz int16 PCM with a second of silence after."""
    from inglenook.engine import Speech

    speech = Speech()
    try:
        rate, pieces = speech.speak(SENTENCE)
        pcm = np.frombuffer(b"".join(pieces), dtype="<i2").astype(np.float32)
    finally:
        speech.close()
    count = int(pcm.size * audio_device.MIC_RATE / rate)
    at_16k = np.interp(np.arange(count) * (rate / audio_device.MIC_RATE), np.arange(pcm.size), pcm)
    silence = np.zeros(int(1.2 * audio_device.MIC_RATE))
    return np.concatenate([at_16k, silence]).astype("<i2").tobytes()


def forced(text: str) -> str:
    """A grammar whose only answer is ``text``: what the voice reads is known on every CPU."""
    return f'root ::= "{text}"'


def test_the_microphone_types_what_is_said_into_the_box(qtbot, window, pulse, spoken) -> None:
    composer = window.composer
    composer.set_text("Note:")
    qtbot.mouseClick(composer.mic_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.dictation.listening and composer.meter.isVisible())
    assert composer.mic_button.isChecked()
    levels: list[float] = []
    window.dictation.microphone.level.connect(levels.append)
    speaking = pulse.speak_in_background(spoken)
    # Words appear while the microphone is still on (re-heard about every second).
    qtbot.waitUntil(lambda: composer.text().startswith("Note: ") and len(composer.text()) > 12, timeout=HEARD_MS)
    assert window.dictation.listening
    # Wait with the event loop running, as a person's window would: a bare join() here held
    # the GUI thread for the rest of the sentence, and past the capture buffer's 2 s the
    # sound server dropped what it could not hand over.
    qtbot.waitUntil(lambda: not speaking.is_alive(), timeout=HEARD_MS)
    assert max(levels) > 0.5  # the meter saw the voice: real samples came through the device
    # Stop once what was said has come through the sound server (a busy machine lags): the
    # microphone loses none of it (its buffer holds what the server hands over at once).
    said = len(spoken) // 2
    qtbot.waitUntil(lambda: window.dictation.microphone.samples().size >= 0.95 * said, timeout=HEARD_MS)
    with qtbot.waitSignal(window.dictation.spoken, timeout=HEARD_MS):  # the whole recording, heard once more
        qtbot.mouseClick(composer.mic_button, Qt.MouseButton.LeftButton)
        assert not window.dictation.listening and not composer.meter.isVisible()
    final = composer.text()
    assert final.startswith("Note: ")
    assert word_error_rate([SENTENCE], [final.removeprefix("Note: ")]) <= 0.25, final
    # Editable before sending: it is the box's own text.
    qtbot.keyClicks(composer.input, " Thanks")
    assert composer.text() == final + " Thanks"


def test_read_aloud_plays_an_answer_into_the_speaker(qtbot, window, pulse) -> None:
    cid = new_chat(qtbot, window, max_tokens=64, grammar=forced(ANSWER))
    window.send("Is the tea ready?")
    wait_answer(qtbot, window, cid)
    answer = window.view.widgets[-1]
    assert answer.text == ANSWER
    recording = pulse.record_speakers()
    try:
        qtbot.mouseClick(answer.read_button, Qt.MouseButton.LeftButton)
        assert answer.read_button.text() == "Stop reading"
        qtbot.waitUntil(lambda: recording.loud_samples() > 2_000, timeout=HEARD_MS)
        # Read to its end: the button says Read aloud again by itself.
        qtbot.waitUntil(lambda: not window.read_aloud.reading, timeout=HEARD_MS)
        assert answer.read_button.text() == "Read aloud" and not answer.read_button.isChecked()
        # Stop at any time: a second reading stopped at once leaves the speaker silent.
        qtbot.mouseClick(answer.read_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.read_aloud.speaker.speaking, timeout=HEARD_MS)
        qtbot.mouseClick(answer.read_button, Qt.MouseButton.LeftButton)
        assert not window.read_aloud.reading and not window.read_aloud.speaker.speaking
    finally:
        recording.close()


def test_answers_are_read_as_they_stream_when_asked(qtbot, window, pulse) -> None:
    window.engine.update_settings(voice_read_streaming=True)
    cid = new_chat(qtbot, window, max_tokens=64, grammar=forced(ANSWER))
    started: list[bool] = []
    window.read_aloud.speaking_started.connect(lambda: started.append(window.chat.is_streaming(cid)))
    recording = pulse.record_speakers()
    try:
        window.send("Is the tea ready?")
        wait_answer(qtbot, window, cid)
        qtbot.waitUntil(lambda: bool(started) and not window.read_aloud.reading, timeout=HEARD_MS)
        assert recording.loud_samples() > 2_000
    finally:
        recording.close()


def test_voice_mode_hears_a_question_speaks_the_answer_and_listens_again(qtbot, window, pulse, spoken) -> None:
    # Long enough to be talked over while it still streams: eight times over (136 tokens) was
    # written in full before the barge-in once decode at depth got faster, and then the stop
    # found it finished (saved complete, not partial).
    long_answer = " ".join([ANSWER] * 40)
    window.engine.update_settings(voice_keep_recordings=True)
    cid = new_chat(qtbot, window, max_tokens=1000, grammar=forced(long_answer))
    mode = window.voice_mode
    states: list[str] = []
    mode.state_changed.connect(states.append)
    qtbot.mouseClick(window.composer.voice_button, Qt.MouseButton.LeftButton)
    assert mode.state == "listening" and window.chat_page.voice_bar.isVisible()
    assert "Listening" in window.chat_page.voice_bar.state_label.text()
    recording = pulse.record_speakers()
    try:
        pulse.speak_in_background(spoken)
        qtbot.waitUntil(lambda: mode.state == "speaking", timeout=HEARD_MS)
        assert states[:4] == ["listening", "hearing", "thinking", "speaking"]
        question = window.engine.messages(cid)[0]
        assert question.role == "user"
        assert word_error_rate([SENTENCE], [question.content]) <= 0.25, question.content
        # Kept with the chat, as asked: the audio the question was heard from.
        kept = window.recordings.folder / str(cid) / f"{question.id}.wav"
        qtbot.waitUntil(kept.is_file)
        assert kept.read_bytes()[:4] == b"RIFF"
        qtbot.waitUntil(lambda: recording.loud_samples() > 2_000, timeout=HEARD_MS)
        # Barge-in: talking over the voice stops it (and the answer, if it still streams) and
        # it hears them out.
        streaming_then: list[bool] = []
        mode.stop_answer.connect(lambda: streaming_then.append(window.chat.is_streaming(cid)))
        pulse.speak_in_background(spoken)
        qtbot.waitUntil(lambda: mode.state in ("listening", "hearing"), timeout=HEARD_MS)
        assert not window.read_aloud.speaker.speaking and not window.read_aloud.reading
        assert streaming_then
        wait_answer(qtbot, window, cid)
        stored = window.engine.messages(cid)[1]
        assert stored.status == ("partial" if streaming_then[0] else "complete")
        # The barged-in question is sent in its turn (the next answer is the same grammar), heard
        # from its start: the recording is cut where the barge gate heard the speech begin.
        qtbot.waitUntil(lambda: len(window.engine.messages(cid)) >= 3, timeout=HEARD_MS)
        again = window.engine.messages(cid)[2]
        assert again.role == "user"
        assert word_error_rate([SENTENCE], [again.content]) <= 0.25, again.content
        # Esc leaves voice mode at once, from any state.
        qtbot.keyClick(window, Qt.Key.Key_Escape)
        assert mode.state == "off" and not window.chat_page.voice_bar.isVisible()
        assert not mode.microphone.listening
    finally:
        recording.close()
        mode.leave()
    wait_answer(qtbot, window, cid)
    # Deleted with the chat.
    window.conversations.delete(cid)
    window.conversations.commit_pending_deletes()  # its Undo expires: the recordings go too
    qtbot.waitUntil(lambda: not kept.parent.exists())


def test_voice_mode_holds_a_three_turn_spoken_conversation(qtbot, window, pulse, spoken) -> None:
    """Hands-free: the person speaks, hears the whole answer, and it listens again, three times;
    the chat then holds three heard questions and three answers, as any typed chat would."""
    cid = new_chat(qtbot, window, max_tokens=40, grammar=forced(ANSWER))
    mode = window.voice_mode
    states: list[str] = []
    mode.state_changed.connect(states.append)
    qtbot.mouseClick(window.composer.voice_button, Qt.MouseButton.LeftButton)
    recording = pulse.record_speakers()
    try:
        for turn in range(1, 4):
            qtbot.waitUntil(lambda: mode.state == "listening", timeout=HEARD_MS)
            speaking = pulse.speak_in_background(spoken)
            qtbot.waitUntil(lambda: not speaking.is_alive(), timeout=HEARD_MS)
            # The answer is read to its end, and then it listens again (no barge-in here).
            qtbot.waitUntil(lambda: states.count("speaking") >= turn and mode.state == "listening",
                            timeout=HEARD_MS)
            assert len(window.engine.messages(cid)) == 2 * turn
        qtbot.keyClick(window, Qt.Key.Key_Escape)
        assert mode.state == "off"
        assert recording.loud_samples() > 2_000  # the answers reached the speaker
    finally:
        recording.close()
        mode.leave()
    messages = window.engine.messages(cid)
    assert [m.role for m in messages] == ["user", "assistant"] * 3
    assert all(m.status == "complete" for m in messages[1::2])
    assert all(m.content == ANSWER for m in messages[1::2])
    heard = [m.content for m in messages[0::2]]
    assert word_error_rate([SENTENCE] * 3, heard) <= 0.25, heard


def test_settings_choose_the_devices_and_the_voice(qtbot, window, sound_server) -> None:
    if sound_server is None:
        pytest.skip(audio_device.missing() or "the sound server did not start")
    dialog = window.open_settings("Voice")
    page = dialog.voice_page
    qtbot.waitUntil(lambda: page.microphone.count() > 1 and page.speaker.count() > 1)
    assert page.microphone.itemText(0) == "System default"
    page.microphone.setCurrentIndex(page.microphone.findText("Test-microphone"))
    page.speaker.setCurrentIndex(page.speaker.findText("Test-speakers"))
    page.streaming.setChecked(True)
    assert not page.keep.isChecked()  # recordings are not kept unless the person asks
    changes = dialog.changes()
    assert changes["voice_input_device"] == "microphone" and changes["voice_output_device"] == "speakers"
    assert changes["voice_read_streaming"] is True and "voice_keep_recordings" not in changes
    from PySide6.QtWidgets import QPushButton

    save = next(b for b in dialog.findChildren(QPushButton) if b.text() == "Save")
    with qtbot.waitSignal(window.saver.saved, timeout=10_000):
        qtbot.mouseClick(save, Qt.MouseButton.LeftButton)
    settings = window.engine.settings
    assert (settings.voice_input_device, settings.voice_output_device) == ("microphone", "speakers")
    assert settings.voice_read_streaming

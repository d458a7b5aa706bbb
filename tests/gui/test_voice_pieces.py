"""The window's voice pieces that need no sound server: no microphone said in words, the
sentences an answer is read in as it streams, where an utterance starts and ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gui

NO_DEVICE_SCRIPT = """
from PySide6.QtWidgets import QApplication
from inglenook.app.services.microphone import Microphone
from inglenook.app.services.speaker import Speaker
app = QApplication([])
said = []
microphone, speaker = Microphone(), Speaker()
microphone.failed.connect(said.append)
speaker.failed.connect(said.append)
print(microphone.start(""), speaker.begin(22050, ""))
print("|".join(said))
"""


def test_a_machine_without_sound_devices_is_told_in_words(tmp_path: Path) -> None:
    """A sound server that is not there: Qt finds no device, and both services say so."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PULSE_SERVER": f"unix:{tmp_path}/nothing-here",
           "XDG_RUNTIME_DIR": str(tmp_path), "PULSE_RUNTIME_PATH": str(tmp_path), "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", NO_DEVICE_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    started, said = run.stdout.strip().splitlines()[-2:]
    from inglenook.app.services.microphone import NO_MICROPHONE
    from inglenook.app.services.speaker import NO_SPEAKER

    assert started == "False False"
    assert said.split("|") == [NO_MICROPHONE, NO_SPEAKER]


def test_sentences_come_out_as_soon_as_they_are_complete() -> None:
    from inglenook.app.text.spoken import Sentences

    sentences = Sentences()
    assert sentences.feed("The kettle") == []
    assert sentences.feed("The kettle is on. Tea will") == ["The kettle is on."]
    assert sentences.feed("The kettle is on. Tea will be ready in 3.5 min") == []  # 3.5 is no sentence end
    assert sentences.feed("The kettle is on. Tea will be ready in 3.5 minutes, e.g. soon! Cups") == [
        "Tea will be ready in 3.5 minutes, e.g. soon!"]
    assert sentences.finish("The kettle is on. Tea will be ready in 3.5 minutes, e.g. soon! Cups") == ["Cups"]


def test_what_is_read_leaves_markdown_and_code_out() -> None:
    from inglenook.app.text.spoken import sentences_of

    answer = "# Steps\n\n1. Boil **water**.\n2. Pour it.\n\n```python\nprint('no')\n```\nSee [the guide](http://x)."
    assert sentences_of(answer) == ["Steps", "Boil water.", "Pour it.", "See the guide."]
    assert sentences_of("<think>reasoning is not read</think>Yes.") == ["Yes."]
    long = "word " * 200
    assert all(len(piece) <= 400 for piece in sentences_of(long))


def tone(seconds: float, amplitude: float) -> np.ndarray:
    t = np.arange(int(seconds * 16_000)) / 16_000
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def test_an_utterance_starts_with_speech_and_ends_after_a_pause() -> None:
    from inglenook.app.services.utterance import UtteranceGate

    gate = UtteranceGate()
    events = [gate.feed(block) for block in np.array_split(tone(0.5, 0.0005), 10)]  # a quiet room
    assert set(events) == {None}
    events = [gate.feed(block) for block in np.array_split(tone(1.0, 0.3), 20)]
    assert events.count("started") == 1 and gate.speaking
    assert 0.35 * 16_000 <= gate.start_sample <= 0.5 * 16_000  # where the speech began, a little before
    events = [gate.feed(block) for block in np.array_split(tone(0.5, 0.0005), 10)]  # a short pause: still speaking
    assert "ended" not in events and events.count("paused") == 1  # heard early from here
    events = [gate.feed(block) for block in np.array_split(tone(0.5, 0.3), 10)]
    assert events.count("resumed") == 1 and gate.speaking  # the early hearing is moot
    events = [gate.feed(block) for block in np.array_split(tone(1.0, 0.0005), 20)]
    assert events.count("paused") == 1 and events.index("paused") < events.index("ended")
    assert not gate.speaking


def test_the_microphone_button_is_click_to_toggle_or_hold_to_talk(qtbot, monkeypatch) -> None:
    """A click starts and the next click stops; held past HOLD_S, letting go stops it. The
    press time is the module's clock, stood in for here: a test never waits on the wall clock."""
    from PySide6.QtCore import Qt

    from inglenook.app.pages.chat import composer as composer_module

    composer = composer_module.Composer()
    qtbot.addWidget(composer)
    asked: list[bool] = []

    def toggle() -> None:  # the controller's part: it knows whether it listens, and says so
        asked.append(True)
        composer.set_listening(len(asked) % 2 == 1)

    composer.dictation_toggled.connect(toggle)
    now = [100.0]
    monkeypatch.setattr(composer_module.time, "monotonic", lambda: now[0])
    button = composer.mic_button
    qtbot.mousePress(button, Qt.MouseButton.LeftButton)
    assert button.isChecked() and composer.meter.isVisibleTo(composer)  # on at the press
    qtbot.mouseRelease(button, Qt.MouseButton.LeftButton)
    assert button.isChecked() and len(asked) == 1  # a quick click leaves it on
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert not button.isChecked() and len(asked) == 2  # the next click stops it
    qtbot.mousePress(button, Qt.MouseButton.LeftButton)
    now[0] += composer_module.HOLD_S + 0.1
    assert button.isChecked()
    qtbot.mouseRelease(button, Qt.MouseButton.LeftButton)
    assert not button.isChecked() and len(asked) == 4  # held: letting go stops it

"""Screenshots of voice in the window (issue 42): the composer listening, its words coming in,
and hands-free voice mode speaking an answer.

Runs like scripts/screenshots.py (offscreen, 1280x800, a throwaway INGLENOOK_HOME), on a
PulseAudio daemon of its own (tests/audio_device.py): the starter voice says the question into
its microphone in real time, so what the shots show was really heard. The answers are forced by
a grammar, so the pictures read well whatever the small model would have said.

    .venv/bin/python scripts/voice_shot.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from screenshots import settle, wait  # noqa: E402 — after the path set-up

QUESTION = "What is the capital of France?"
DICTATED = ("Could you write a short note to my neighbour? Please thank her for watering the plants "
            "while we were away, and ask whether she would like to come for dinner on Friday.")
ANSWER = "Paris is the capital of France. It sits on the river Seine, and about two million people live there."


def spoken_at_16k(text: str, pause_s: float) -> bytes:
    import numpy as np

    from inglenook.engine import Speech

    speech = Speech()
    try:
        rate, pieces = speech.speak(text)
        pcm = np.frombuffer(b"".join(pieces), dtype="<i2").astype(np.float32)
    finally:
        speech.close()
    count = int(pcm.size * 16_000 / rate)
    voice = np.interp(np.arange(count) * (rate / 16_000), np.arange(pcm.size), pcm)
    return np.concatenate([voice, np.zeros(int(pause_s * 16_000))]).astype("<i2").tobytes()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    out = Path(parser.parse_args().out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="inglenook-voice-shots-"))
    os.environ["INGLENOOK_HOME"] = str(home)

    from tests import audio_device

    missing = audio_device.missing()
    if missing:
        print(f"voice screenshots skipped: {missing}", file=sys.stderr)
        return 0
    server = audio_device.PulseServer(home / "pulse")
    os.environ["PULSE_SERVER"] = server.address  # before Qt first looks for a sound device

    from PySide6.QtWidgets import QApplication

    from inglenook.app.widgets import theme
    from inglenook.app.window import MainWindow
    from inglenook.engine import Engine

    question = spoken_at_16k(QUESTION, pause_s=1.5)
    app = QApplication(sys.argv)
    engine = Engine()
    theme.apply_theme(app, "light")
    window = MainWindow(engine, start_api=False)
    window.resize(1280, 800)
    window.show()
    try:
        wait(app, lambda: bool(window.model_list.models))
        sampling = {"temperature": 0.0, "max_tokens": 96, "grammar": f'root ::= "{ANSWER}"'}
        chat = engine.chats.new_conversation(title="Talking about Paris", sampling=sampling)
        window.conversations.refresh()
        window.open_conversation(chat.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == chat.id)

        # Dictation: the microphone on, the meter moving, the words arriving in the box.
        window.dictation.start()
        speaking = server.speak_in_background(spoken_at_16k(DICTATED, pause_s=0.5))
        # Shot mid-sentence: the meter up, the first words in the box, more still being said.
        wait(app, lambda: len(window.composer.text().split()) >= 8 and speaking.is_alive())
        settle(app)
        window.grab().save(str(out / "voice-composer.png"))
        speaking.join()
        window.dictation.stop(hear_it=False)
        window.composer.set_text("")

        # Voice mode: the question heard and sent, the answer being read aloud.
        window.voice_mode.enter()
        server.speak_in_background(question)
        wait(app, lambda: window.voice_mode.state == "speaking")
        wait(app, lambda: window.view.streaming_widget() is None)
        settle(app)
        window.grab().save(str(out / "voice-mode.png"))
        window.voice_mode.leave()
    finally:
        window.shutdown()
        engine.close()
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

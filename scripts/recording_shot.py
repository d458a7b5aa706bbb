"""Screenshots of a recording in a chat (issue 42): the composer's chip for an attached
recording with an answer that cites times, and the player a click on such a citation opens,
playing from that time.

Runs like scripts/screenshots.py (offscreen, 1280x800, a throwaway INGLENOOK_HOME), on a
PulseAudio daemon of its own (tests/audio_device.py), so the player plays into a speaker. The
recording is spoken now by the starter voice (never committed) and attached through the window
(transcribed by the engine's speech room); the exchange is written into the store, as
documents_shot.py writes its own, so the answer cites times whatever the starter model says.

    .venv/bin/python scripts/recording_shot.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from screenshots import settle, shoot_alone, wait

from tests.voice.recordings import speak_recording  # the tests' recording maker, from the checkout

SENTENCES = ("Good morning everyone, this is the weekly planning meeting for the garden project.",
             "The new greenhouse arrives on Thursday and needs four people to put it up.",
             "We agreed to move the tomato beds to the south side, where they get more sun.",
             "Next week Anna will order the seeds, and Tom will fix the water pump.")
QUESTION = "What did we decide about the tomatoes, and who fixes the pump?"
ANSWER = ("The tomato beds move to the **south side**, where they get more sun [meeting.wav, 00:34]. "
          "**Tom** will fix the water pump next week [meeting.wav, 00:52].")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)

    def shoot(app, window) -> None:  # noqa: ANN001
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices

        folder = Path(tempfile.mkdtemp(prefix="inglenook-recording-shot-"))
        recording = speak_recording(window.engine.speech, folder / "meeting.wav", SENTENCES, gap_s=12.0)
        chats = window.engine.chats
        chat = chats.new_conversation(title="Garden planning meeting")
        window.conversations.refresh()
        window.open_conversation(chat.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == chat.id)
        window.attachments.attach([recording])
        wait(app, lambda: len(window.composer.attachments.chips()) == 1)
        chats.store.add_message(chat.id, "user", QUESTION)
        chats.store.add_message(chat.id, "assistant", ANSWER, model_id=chats.default_model_id())
        window.active.reload()
        wait(app, lambda: "[meeting.wav, 00:34]" in window.view.last_answer_text())
        settle(app, 1.0)
        window.grab().save(str(out / "recording-chat.png"))

        QDesktopServices.openUrl(QUrl("cite:meeting.wav#00%3A34"))  # what a click on the citation does
        bar = window.composer.attachments
        wait(app, lambda: bar.player is not None and bar.player.player.position() >= 34_000)
        bar.player.player.pause()
        settle(app, 1.0)
        bar.player.grab().save(str(out / "recording-player.png"))
        bar.player.close()

    from tests import audio_device

    missing = audio_device.missing()
    if missing:  # without a speaker the player would show its "no speaker" message
        print(f"recording screenshots skipped: {missing}", file=sys.stderr)
        return 0
    server = audio_device.PulseServer(Path(tempfile.mkdtemp(prefix="inglenook-recording-pulse-")))
    os.environ["PULSE_SERVER"] = server.address  # before Qt first looks for a sound device
    try:
        shoot_alone("inglenook-recording-shots-", shoot)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a spoken utterance begins and ends, from the microphone's samples: a loudness gate.

Hands-free voice mode sends what the person said when they fall silent, and a voice that is
speaking stops when the person starts to talk over it (barge-in). Both need only "is someone
speaking now", which a gate on loudness with a little hysteresis answers in microseconds
(Whisper's own VAD runs later, on the utterance, and drops what was not speech). Time is
counted in samples, never by the clock, so a busy GUI thread delays the answer but not the
measurement.
"""

from __future__ import annotations

import numpy as np

from inglenook.app.services.audio_devices import WHISPER_RATE
from inglenook.app.services.microphone import level_of

FRAME = WHISPER_RATE * 30 // 1000  # 30 ms frames
SPEECH_LEVEL = 0.4  # -36 dBFS: a voice at arm's length; a quiet room sits near 0.1–0.2
START_S = 0.15  # this much loud audio (within a frame or two of gaps) is speech
END_S = 0.8  # this much quiet after speech ends the utterance
# This much quiet is a pause that may be the end: voice mode starts hearing the utterance then,
# so that its words are ready (or nearly) when the pause reaches END_S; speech that resumes
# makes that early hearing moot.
PAUSE_S = 0.3


class UtteranceGate:
    """Fed the microphone's blocks in order; says when speech starts and when it ends."""

    def __init__(self, level: float = SPEECH_LEVEL, start_s: float = START_S, end_s: float = END_S,
                 pause_s: float = PAUSE_S) -> None:
        self.level = level
        self.start_frames = max(1, round(start_s * WHISPER_RATE / FRAME))
        self.end_frames = max(1, round(end_s * WHISPER_RATE / FRAME))
        self.pause_frames = min(self.end_frames - 1, max(1, round(pause_s * WHISPER_RATE / FRAME)))
        self.reset()

    def reset(self) -> None:
        self.speaking = False
        self._loud = 0
        self._quiet = 0
        self._pending = np.zeros(0, dtype=np.float32)
        self.frames = 0  # frames seen since reset
        self.started_at = 0  # the frame where the speech began (its first loud frame)

    def feed(self, block: np.ndarray) -> str | None:
        """"started" when speech begins in this block, "ended" when it has ended, "paused" when
        the speech has been quiet for ``PAUSE_S`` (not yet the end), "resumed" when it goes on
        after such a pause, else None (the latest of these when a block holds several)."""
        samples = np.concatenate([self._pending, block]) if self._pending.size else block
        whole = samples.size - samples.size % FRAME
        self._pending = samples[whole:]
        event = None
        for start in range(0, whole, FRAME):
            loud = level_of(samples[start:start + FRAME]) >= self.level
            self.frames += 1
            if not self.speaking:
                self._loud = self._loud + 1 if loud else max(0, self._loud - 1)
                if self._loud >= self.start_frames:
                    self.speaking, self._quiet = True, 0
                    self.started_at = self.frames - self._loud
                    event = "started"
            else:
                if loud and self._quiet >= self.pause_frames:
                    event = "resumed"
                self._quiet = 0 if loud else self._quiet + 1
                if self._quiet == self.pause_frames:
                    event = "paused"
                if self._quiet >= self.end_frames:
                    self.speaking, self._loud = False, 0
                    return "ended"
        return event

    @property
    def start_sample(self) -> int:
        """Where the latest speech began, in samples since reset (a little before, to keep its onset)."""
        return max(0, (self.started_at - 3) * FRAME)

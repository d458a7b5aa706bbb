"""A real sound server for the window's voice tests: a PulseAudio daemon of the test's own, with
a microphone whose samples the test supplies and a speaker whose output it records.

- the microphone is ``module-pipe-source`` reading a FIFO: ``speak_into`` writes int16 PCM to
  it in real time (20 ms pieces, as a person speaks; a pipe source passes on whatever arrives
  at once, and Qt's capture buffer would drop a burst);
- the speaker is a ``module-null-sink``; ``SinkRecording`` records its monitor with ``parec``,
  so a test checks that Read aloud's samples arrived.

The daemon runs in a temporary folder (its socket, runtime files and cookie there, no
system-wide state), as root too (``--system`` is not used: PulseAudio warns and runs), with no
idle exit and no modules but these. Clients (Qt in the test process, ``parec``) find it through
``PULSE_SERVER``, set before Qt's multimedia module first looks for devices. Where PulseAudio
is not installed, ``missing()`` says so and the tests skip with that reason (``.ci/run``
installs it on CI).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from array import array
from pathlib import Path

MIC_RATE = 16_000
SPEAKER_RATE = 22_050
PIECE_S = 0.02
CONFIG = """
load-module module-native-protocol-unix auth-anonymous=1 socket={folder}/native
load-module module-null-sink sink_name=speakers rate={speaker_rate} channels=1 sink_properties=device.description=Test-speakers
load-module module-pipe-source source_name=microphone file={folder}/microphone.fifo format=s16le rate={mic_rate} channels=1 source_properties=device.description=Test-microphone
set-default-sink speakers
set-default-source microphone
"""


def missing() -> str | None:
    """Why these tests cannot run here, or None."""
    for program in ("pulseaudio", "pactl", "parec"):
        if shutil.which(program) is None:
            return f"{program} is not installed (apt install pulseaudio pulseaudio-utils; .ci/run installs them)"
    return None


class PulseServer:
    """A private PulseAudio daemon; ``close`` ends it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "default.pa"
        config.write_text(CONFIG.format(folder=folder, mic_rate=MIC_RATE, speaker_rate=SPEAKER_RATE))
        self.address = f"unix:{folder}/native"
        self.env = {**os.environ, "HOME": str(folder), "XDG_RUNTIME_DIR": str(folder),
                    "PULSE_RUNTIME_PATH": str(folder), "PULSE_SERVER": self.address}
        self.log = (folder / "pulseaudio.log").open("wb")
        self.process = subprocess.Popen(
            ["pulseaudio", "--daemonize=no", "-n", "--use-pid-file=no", "--exit-idle-time=-1", "--disallow-exit",
             "--disable-shm", "-F", str(config), "--log-target=stderr"],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            self._wait_ready()
            # Held open for the daemon's life: the pipe source never sees its writer leave.
            self.microphone = open(folder / "microphone.fifo", "wb", buffering=0)  # noqa: SIM115 — closed in close()
        except BaseException:
            self._end()
            raise
        self._speaking = threading.Lock()

    def _wait_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pulseaudio ended: {(self.folder / 'pulseaudio.log').read_text()[-2000:]}")
            ready = subprocess.run(["pactl", "info"], env=self.env, capture_output=True, check=False)
            if ready.returncode == 0 and (self.folder / "microphone.fifo").exists():
                return
            time.sleep(0.1)  # paces the poll
        raise RuntimeError("pulseaudio did not start within 20 s")

    def speak_into(self, pcm: bytes) -> None:
        """Play int16 mono PCM at 16 kHz into the microphone in real time (blocks for its length)."""
        piece = int(MIC_RATE * PIECE_S) * 2
        with self._speaking:
            start = time.monotonic()
            for i, offset in enumerate(range(0, len(pcm), piece)):
                self.microphone.write(pcm[offset:offset + piece])
                # Real time, as a person speaks: the source passes on what arrives at once.
                time.sleep(max(0.0, start + (i + 1) * PIECE_S - time.monotonic()))

    def speak_in_background(self, pcm: bytes) -> threading.Thread:
        thread = threading.Thread(target=self.speak_into, args=(pcm,), daemon=True)
        thread.start()
        return thread

    def record_speakers(self) -> SinkRecording:
        return SinkRecording(self)

    def close(self) -> None:
        self.microphone.close()
        self._end()

    def _end(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


class SinkRecording:
    """What is played into the speakers, recorded from their monitor by ``parec``."""

    def __init__(self, server: PulseServer) -> None:
        self.path = server.folder / f"speakers-{time.monotonic_ns()}.raw"
        self._file = self.path.open("wb")
        self.process = subprocess.Popen(
            ["parec", "--raw", "--format=s16le", f"--rate={SPEAKER_RATE}", "--channels=1", "-d", "speakers.monitor"],
            env=server.env, stdout=self._file, stderr=subprocess.DEVNULL,
        )

    def loud_samples(self, threshold: int = 500) -> int:
        """How many recorded samples so far are louder than ``threshold`` (of 32767)."""
        data = self.path.read_bytes()
        samples = array("h", data[: len(data) - len(data) % 2])  # s16le: this machine's order on x86 and ARM
        return sum(1 for sample in samples if abs(sample) > threshold)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self._file.close()

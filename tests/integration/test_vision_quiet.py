"""llama.cpp's multimodal library logs through the engine's levels (issue 45): an image
prompt read without ``--debug`` writes none of its text to stderr. Run as a person runs it:
``inglenook run MODEL PROMPT --image FILE`` in its own process, its stderr captured whole
(libmtmd writes to the process's stderr descriptor, which no Python handler sees)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.core.engine import Engine
from inglenook.engine.runtime.vision import mtmd_available

from ..conftest import MODEL_CACHE
from ..mmproj_writer import vision_copy_of_smollm2, write_png
from .test_cli import inglenook

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300),
              pytest.mark.skipif(not mtmd_available()[0], reason=mtmd_available()[1] or "libmtmd")]

SECRET_SYSTEM = "You are the concierge of the Hotel Quokka-7731."


def test_an_image_prompt_is_not_written_to_stderr(home: Path, tmp_path: Path, smollm2_path: Path) -> None:
    model = vision_copy_of_smollm2(smollm2_path, MODEL_CACHE / "smolvision")
    engine = Engine()
    try:
        (record,) = engine.import_path(model.parent).imported
    finally:
        engine.close()
    picture = write_png(tmp_path / "room.png")

    done = inglenook("run", record.id, "Describe the room for guest Zebulon-4412.", "--image", str(picture),
                     "--system", SECRET_SYSTEM, "--max-tokens", "2", "--temperature", "0", home=home)

    assert done.returncode == 0, done.stderr[-3000:]
    assert "add_text" not in done.stderr and "Zebulon-4412" not in done.stderr
    assert "Quokka-7731" not in done.stderr, done.stderr[-3000:]

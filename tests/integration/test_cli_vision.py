"""``inglenook run --image`` and ``inglenook show``'s vision line, run as a person runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.runtime.vision import mtmd_available

from ..conftest import MODEL_CACHE
from ..mmproj_writer import vision_copy_of_smollm2, write_png
from .test_cli import STARTER, inglenook


def test_an_image_for_a_text_only_model_is_one_clear_line(home: Path, tmp_path: Path) -> None:
    shot = write_png(tmp_path / "shot.png")
    result = inglenook("run", STARTER, "--image", str(shot), "What is this?", "--max-tokens", "4", home=home)
    assert result.returncode != 0
    assert f"{STARTER} is a text-only model" in result.stderr and "Traceback" not in result.stderr


def test_unreadable_images_are_refused_before_anything_runs(home: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.png"
    whole = write_png(tmp_path / "whole.png").read_bytes()
    broken.write_bytes(whole[: len(whole) // 2])  # the header is whole, the pixels are cut
    result = inglenook("run", STARTER, "--image", str(broken), "What is this?", home=home)
    assert result.returncode != 0 and "broken.png could not be decoded" in result.stderr
    missing = inglenook("run", STARTER, "--image", str(tmp_path / "nope.png"), "What?", home=home)
    assert missing.returncode != 0 and "cannot read the image" in missing.stderr
    alone = inglenook("run", STARTER, "--image", str(broken), home=home)
    assert alone.returncode != 0 and "--image needs a PROMPT" in alone.stderr


@pytest.mark.skipif(not mtmd_available()[0], reason=mtmd_available()[1] or "libmtmd")
def test_run_with_an_image_answers_and_show_says_vision(home: Path, tmp_path: Path, smollm2_path: Path) -> None:
    model = vision_copy_of_smollm2(smollm2_path, MODEL_CACHE / "smolvision")
    imported = inglenook("import", str(model.parent), home=home)
    assert imported.returncode == 0, imported.stderr
    listed = inglenook("list", home=home).stdout
    model_id = next(line.split()[0] for line in listed.splitlines() if "smolvision" in line.lower())
    shown = inglenook("show", model_id, home=home)
    assert "vision:" in shown.stdout and "mmproj-SmolVision-135M-Instruct-f32.gguf (gemma3)" in shown.stdout
    assert "no (text only" in inglenook("show", STARTER, home=home).stdout
    shot = write_png(tmp_path / "shot.png")
    result = inglenook("run", model_id, "--image", str(shot), "What is in the picture?", "--max-tokens", "4",
                       "--temperature", "0", "--verbose", home=home)
    assert result.returncode == 0, result.stderr
    assert "prompt tokens:" in result.stderr

"""Pairing a model with its vision projector (engine/runtime/projector.py), on real GGUF
files written here: the projector's header (type, output width read from its tensors) and
the model's embedding size decide; a projector for another size is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.base import read_gguf
from inglenook.engine.base import ProjectorMismatch, check_pair, find_projector, read_projector
from tests.gguf_writer import write_gguf
from tests.mmproj_writer import write_mmproj


def model_file(path: Path, embedding: int) -> Path:
    return write_gguf(path, {"llama.embedding_length": embedding})


def test_the_projector_header_says_its_type_and_output_width(tmp_path: Path):
    info = read_projector(write_mmproj(tmp_path / "mmproj-tiny-f32.gguf", 576))
    assert info is not None
    assert (info.projector_type, info.embedding, info.image_size) == ("gemma3", 576, 64)
    # A model file is not a projector.
    assert read_projector(model_file(tmp_path / "model.gguf", 576)) is None


def test_a_model_takes_the_projector_of_its_embedding_size(tmp_path: Path):
    small = read_gguf(model_file(tmp_path / "Tiny-135M-Q4_1.gguf", 576))
    large = read_gguf(model_file(tmp_path / "Tiny-360M-Q4_1.gguf", 960))
    write_mmproj(tmp_path / "mmproj-Tiny-135M-f32.gguf", 576)
    write_mmproj(tmp_path / "mmproj-Tiny-360M-f32.gguf", 960)
    assert find_projector(small).path.name == "mmproj-Tiny-135M-f32.gguf"
    assert find_projector(large).path.name == "mmproj-Tiny-360M-f32.gguf"


def test_the_name_breaks_a_tie_between_projectors_of_one_size(tmp_path: Path):
    model = read_gguf(model_file(tmp_path / "alpha-vision-Q4_K_M.gguf", 576))
    write_mmproj(tmp_path / "mmproj-beta-f16.gguf", 576)
    write_mmproj(tmp_path / "mmproj-alpha-vision-f16.gguf", 576)
    assert find_projector(model).path.name == "mmproj-alpha-vision-f16.gguf"


def test_no_projector_means_text_only(tmp_path: Path):
    assert find_projector(read_gguf(model_file(tmp_path / "plain.gguf", 576))) is None


def test_a_projector_of_another_size_is_refused_naming_both(tmp_path: Path):
    model = read_gguf(model_file(tmp_path / "plain.gguf", 576))
    write_mmproj(tmp_path / "mmproj-other-f32.gguf", 960)
    with pytest.raises(ProjectorMismatch, match=r"mmproj-other-f32\.gguf makes vectors of 960.*plain\.gguf reads vectors of 576"):
        find_projector(model)
    other = read_projector(tmp_path / "mmproj-other-f32.gguf")
    assert other is not None
    with pytest.raises(ProjectorMismatch):
        check_pair(model, other)

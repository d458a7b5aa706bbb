"""Creating variants with llama.cpp's quantizer."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from inglenook.engine.base.errors import InvalidRequest, JobCancelled
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.lab.quantize import output_path, quantize

pytestmark = pytest.mark.integration


def test_output_name_replaces_the_quant_suffix(tmp_path: Path) -> None:
    source = Path("/x/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert output_path(source, "q8_0", tmp_path) == tmp_path / "SmolLM2-135M-Instruct.Q8_0.gguf"
    assert output_path(Path("/x/model-f16.gguf"), "Q4_K_M", tmp_path).name == "model.Q4_K_M.gguf"


def test_quantize_reports_progress_and_writes_a_valid_file(smollm2_path: Path, tmp_path: Path) -> None:
    seen: list[float] = []
    target = quantize(smollm2_path, tmp_path / "small.Q4_0.gguf", "Q4_0", progress=seen.append)
    info = read_gguf(target)
    assert info.quantization == "Q4_0"
    assert info.parameter_count == read_gguf(smollm2_path).parameter_count
    assert seen and seen[-1] == 1.0 and seen == sorted(seen)
    assert [p.name for p in tmp_path.iterdir()] == ["small.Q4_0.gguf"]  # no temporary file left


def test_cancelled_quantization_leaves_nothing_behind(smollm2_path: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(JobCancelled):
        quantize(smollm2_path, tmp_path / "small.Q8_0.gguf", "Q8_0", cancel=cancel)
    assert list(tmp_path.iterdir()) == []


def test_unknown_quantization_is_refused(smollm2_path: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest):
        quantize(smollm2_path, tmp_path / "x.gguf", "Q9_9")
    assert list(tmp_path.iterdir()) == []

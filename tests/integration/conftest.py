from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.gguf import read_gguf
from inglenook.engine.registry import ModelRecord, fingerprint_file
from inglenook.engine.runtime import LoadedModel, LoadOptions

pytestmark = pytest.mark.integration


def record_for(path: Path, model_id: str) -> ModelRecord:
    info = read_gguf(path)
    return ModelRecord(
        id=model_id, path=path, name=path.stem, architecture=info.architecture,
        quantization=info.quantization, parameter_count=info.parameter_count,
        context_length=info.context_length, size_bytes=info.file_size,
        fingerprint=fingerprint_file(path, info.file_size), source="test",
    )


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path):
    model = LoadedModel(record_for(smollm2_path, "smollm2-135m-instruct:q4_1"), LoadOptions(context_size=1024))
    yield model
    model.close()


@pytest.fixture(scope="session")
def gemma(gemma_path: Path):
    model = LoadedModel(record_for(gemma_path, "gemma-3-270m:q4_k_m"), LoadOptions(context_size=1024))
    yield model
    model.close()

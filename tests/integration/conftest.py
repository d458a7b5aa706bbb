from __future__ import annotations

import os
from pathlib import Path

import pytest

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions

# Every test here is marked `integration` by tests/conftest.py's collection hook.

# scripts/gpu_check.sh runs these tests with offload on (-1: as many layers as fit); the
# default, 0, keeps them on the CPU, where their exact-token expectations were recorded.
GPU_LAYERS = int(os.environ.get("INGLENOOK_TEST_GPU_LAYERS", "0"))


def record_for(path: Path, model_id: str) -> ModelRecord:
    return ModelRecord.describe(read_gguf(path), model_id=model_id, source="test")


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path):
    model = LoadedModel(record_for(smollm2_path, "smollm2-135m-instruct:q4_1"), LoadOptions(context_size=1024, gpu_layers=GPU_LAYERS))
    yield model
    model.close()


@pytest.fixture(scope="session")
def gemma(gemma_path: Path):
    model = LoadedModel(record_for(gemma_path, "gemma-3-270m:q4_k_m"), LoadOptions(context_size=1024, gpu_layers=GPU_LAYERS))
    yield model
    model.close()

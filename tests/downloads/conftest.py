"""Fixtures for download tests: a local hub (tests/hubmock.py) serving the two real test models.

huggingface-hub reads HF_ENDPOINT and HF_HUB_OFFLINE into ``huggingface_hub.constants`` when it
is imported, so besides the environment the constants are patched too; the library's own
download code then runs unchanged against the local server. Implicit tokens (a real login
on this machine) are switched off so no test ever sends one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants

from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.store import Store
from tests.hubmock import HubMock, MockFile, MockRepo

SMOL_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_REPO = "unsloth/gemma-3-270m-GGUF"
GEMMA_FILE = "gemma-3-270m-Q4_K_M.gguf"
GATED_REPO = "meta-llama/Gated-Tiny-GGUF"
JUNK_REPO = "test/not-a-model-GGUF"
HOSTILE_REPO = "evil/hostile-GGUF"
BAD_SHA_REPO = "evil/bad-checksum-GGUF"
TOKEN = "hf_test_token"

HOSTILE_NAMES = ["../x.gguf", "/etc/evil-Q4_K_M.gguf", "sub\\..\\evil-Q4_K_M.gguf", "C:evil-Q4_K_M.gguf", "a/../../b-Q4_0.gguf"]


def point_hub_at(monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """huggingface-hub talks to ``endpoint`` (a local hub) for the rest of the test: the
    environment and the constants it read at import, anonymous and online."""
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", True)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")


@pytest.fixture(scope="session")
def served_files(smollm2_path: Path, gemma_path: Path) -> dict[str, MockFile]:
    """The real models with their sha256 computed once per session."""
    return {
        "smol": MockFile(SMOL_FILE, smollm2_path),
        "gemma": MockFile(GEMMA_FILE, gemma_path),
    }


@pytest.fixture
def hub(served_files: dict[str, MockFile], monkeypatch: pytest.MonkeyPatch) -> Iterator[HubMock]:
    smol, gemma = served_files["smol"], served_files["gemma"]
    readme = MockFile("README.md", b"# SmolLM2 GGUF\n", lfs=False)
    with HubMock(token=TOKEN) as mock:
        mock.add(MockRepo(SMOL_REPO, [smol, readme], downloads=5000, likes=40, licence="apache-2.0",
                          last_modified="2025-03-01T12:00:00.000Z",
                          gguf={"total": 134515008, "architecture": "llama", "context_length": 8192}))
        mock.add(MockRepo(GEMMA_REPO, [gemma], downloads=900, likes=120, licence="gemma",
                          last_modified="2025-08-14T09:30:00.000Z",
                          gguf={"total": 268098176, "architecture": "gemma3", "context_length": 32768}))
        mock.add(MockRepo(GATED_REPO, [MockFile("Gated-Tiny-Q4_K_M.gguf", smol.source, sha256=smol.sha256)],
                          gated=True, downloads=10, likes=1, licence="llama3"))
        junk = b"<!DOCTYPE html><html>not a model</html>" + os.urandom(3 * 1024 * 1024)
        mock.add(MockRepo(JUNK_REPO, [MockFile("junk-Q4_K_M.gguf", junk)], downloads=1))
        mock.add(MockRepo(HOSTILE_REPO, [], downloads=2, listing_only=[
            {"rfilename": name, "size": 1000, "blobId": "0" * 40,
             "lfs": {"sha256": "a" * 64, "size": 1000, "pointerSize": 134}} for name in HOSTILE_NAMES
        ]))
        mock.add(MockRepo(BAD_SHA_REPO, [MockFile("ok-Q4_K_M.gguf", b"GGUF" + bytes(100), sha256="../../../evil")]))
        point_hub_at(monkeypatch, mock.endpoint)
        yield mock


@pytest.fixture
def paths(home: Path) -> Paths:
    return Paths.under(home).ensure()


@pytest.fixture
def registry(paths: Paths) -> Iterator[ModelRegistry]:
    store = Store(paths.database)
    yield ModelRegistry(store, paths)
    store.close()

"""LoRA adapters from a Hugging Face repo (the local hub mock): only the GGUFs whose headers say
"adapter" are downloaded and imported; a repo without adapters is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.base.errors import DownloadError
from inglenook.engine.models.hub import HubClient
from inglenook.engine.models.lora_hub import pull_adapters
from inglenook.engine.models.lora_registry import AdapterRegistry
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.store import Store
from tests.downloads.conftest import SMOL_REPO, TOKEN
from tests.hubmock import HubMock, MockFile, MockRepo, sha256_of
from tests.lora_files import write_adapter

ADAPTER_REPO = "someone/SmolLM2-pirate-LoRA-GGUF"


def test_a_repos_adapters_are_pulled_and_its_model_is_left_alone(hub: HubMock, paths: Paths, tmp_path: Path,
                                                                  served_files: dict[str, MockFile]) -> None:
    adapter = write_adapter(tmp_path / "pirate-lora-f32.gguf", blocks=range(2))
    hub.add(MockRepo(ADAPTER_REPO, [MockFile("pirate-lora-f32.gguf", adapter.read_bytes()), served_files["smol"]]))
    store = Store(paths.database)
    try:
        adapters = AdapterRegistry(store)
        result = pull_adapters(adapters, HubClient(token=TOKEN), ADAPTER_REPO, paths.data / "adapters")
        assert [r.id for r in result.imported] == ["pirate-lora-f32"]
        record = adapters.get("pirate-lora-f32")
        assert record.source == "download" and record.architecture == "llama" and record.rank == 8
        assert record.path.read_bytes() == adapter.read_bytes()
        assert paths.data / "adapters" in record.path.parents
        # The model in the same repo was only looked at (its header, by Range), never fetched.
        model_gets = [r for r in hub.blob_gets() if served_files["smol"].sha256 in r.path]
        assert model_gets and all(r.range and r.range.startswith("bytes=0-") for r in model_gets)
        adapter_sha = sha256_of(adapter)
        assert any(adapter_sha in r.path and r.range is None for r in hub.blob_gets())  # fetched whole

        with pytest.raises(DownloadError, match="holds no GGUF LoRA adapters"):
            pull_adapters(adapters, HubClient(token=TOKEN), SMOL_REPO, paths.data / "adapters")
    finally:
        store.close()


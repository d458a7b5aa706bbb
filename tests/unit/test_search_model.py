"""Which model embeds messages for search: the small chat model only while it is small enough
to hold a second instance of, unless the person chose it (the real registry and SmolLM2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.scheduling import routing
from inglenook.engine.scheduling.routing import ChatModels, search_model_id
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.settings import Settings
from inglenook.engine.store.store import Store


@pytest.fixture()
def models(tmp_path: Path, smollm2_path: Path) -> ChatModels:
    registry = ModelRegistry(Store(tmp_path / "inglenook.db"), Paths.under(tmp_path / "home").ensure(), [])
    registry.register_file(smollm2_path)
    return ChatModels(registry)


def test_the_small_chat_model_embeds_when_it_is_small(models: ChatModels) -> None:
    assert search_model_id(Settings(), models) == "smollm2-135m-instruct:q4_1"


def test_a_large_one_is_not_loaded_twice_unless_chosen(models: ChatModels, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "SEARCH_CHAT_MODEL_MAX_BYTES", 1_000)
    assert search_model_id(Settings(), models) is None  # search by words only
    chosen = Settings(background_model="smollm2-135m-instruct:q4_1")
    assert search_model_id(chosen, models) == "smollm2-135m-instruct:q4_1"


def test_no_model_no_search(tmp_path: Path) -> None:
    registry = ModelRegistry(Store(tmp_path / "inglenook.db"), Paths.under(tmp_path / "home").ensure(), [])
    assert search_model_id(Settings(), ChatModels(registry)) is None

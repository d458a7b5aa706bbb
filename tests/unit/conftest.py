"""Fixtures of the unit tests that drive ChatService: a real SQLite store under the test's
INGLENOOK_HOME and a scheduler running the fake model (a module's own fixture of the same
name overrides these)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine import ChatService, LoadOptions, ModelRecord, Paths, Scheduler, Store
from tests.fakes import FakeModel


def fake_record(model_id: str) -> ModelRecord:
    return ModelRecord(model_id, Path(f"/models/{model_id}.gguf"), model_id, "llama", "Q4_0", 1, 256, 1, "fp-" + model_id, "scan")


@pytest.fixture()
def store(home: Path) -> Iterator[Store]:
    store = Store(Paths.under(home).ensure().database)
    yield store
    store.close()


@pytest.fixture()
def chats(store: Store) -> Iterator[ChatService]:
    FakeModel.step_delay_s = 0.0
    scheduler = Scheduler(fake_record, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel)
    yield ChatService(store, scheduler, lambda: "m:q4_0")
    scheduler.close()

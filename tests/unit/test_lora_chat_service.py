"""A conversation's LoRA adapters through ChatService: checked before they are stored, kept
with the conversation, and handed to its jobs (the real store of tests/unit/conftest.py, the fake model's scheduler)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine import AdapterError, AdapterRegistry, ChatService, LoadOptions, Scheduler, Store
from tests.fakes import FakeModel
from tests.lora_files import write_adapter
from tests.unit.conftest import fake_record


@pytest.fixture()
def chats(store: Store, tmp_path: Path) -> Iterator[ChatService]:
    FakeModel.step_delay_s = 0.0
    adapters = AdapterRegistry(store)
    adapters.register_file(write_adapter(tmp_path / "style-lora.gguf", blocks=range(1)))
    scheduler = Scheduler(fake_record, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel)
    yield ChatService(store, scheduler, lambda: "m:q4_0", adapters=adapters)
    scheduler.close()


def test_the_choice_is_checked_stored_and_used(chats: ChatService) -> None:
    conversation = chats.new_conversation(sampling={"temperature": 0.0})
    chosen = {"temperature": 0.0, "lora": [{"id": "style-lora", "scale": 0.75}]}
    stored = chats.update_chat_settings(conversation.id, None, chosen)
    assert stored.sampling["lora"] == [{"id": "style-lora", "scale": 0.75}]
    assert chats.store.get_conversation(conversation.id).sampling == chosen

    turn = chats.send(conversation.id, "Hello")
    turn.wait()
    lora = turn.handle.job.lora
    assert [(u.adapter_id, u.scale) for u in lora.uses] == [("style-lora", 0.75)]
    model = chats.scheduler.loaded_models()[0]
    assert isinstance(model, FakeModel) and model.lora_key == lora.key


@pytest.mark.parametrize("bad, words", [
    ([{"id": "missing", "scale": 1.0}], "no LoRA adapter 'missing'"),
    ([{"id": "style-lora", "scale": 99}], "between"),
    ("style-lora", "must be a list"),
    ([{"scale": 1.0}], "must be a list"),
])
def test_bad_choices_are_refused_and_nothing_is_stored(chats: ChatService, bad: object, words: str) -> None:
    conversation = chats.new_conversation(sampling={"temperature": 0.5})
    with pytest.raises(AdapterError, match=words):
        chats.update_chat_settings(conversation.id, None, {"temperature": 0.0, "lora": bad})
    assert chats.store.get_conversation(conversation.id).sampling == {"temperature": 0.5}
    with pytest.raises(AdapterError):
        chats.new_conversation(sampling={"lora": bad})

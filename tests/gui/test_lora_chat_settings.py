"""Picking a LoRA adapter in a chat's settings, as a person would: the answer comes from the
model with the adapter, the choice is stored with the conversation, and scale 0 or "None"
answer as the model alone, on the same loaded model."""

from __future__ import annotations

from pathlib import Path

from tests.gui.conftest import new_chat, type_and_send, wait_answer
from tests.lora_files import write_adapter

LONG_MS = 900_000  # four answers in a row on a shared, busy machine; no assertion is about time


def _last_answer(window) -> str:
    return window.view.widgets[-1].text


def _regenerate(qtbot, window, cid: int) -> str:
    """The Regenerate button's work, waited for until the new answer is saved."""
    store = window.engine.store
    before = store.messages(cid)[-1].created_at  # (SQLite may give the new answer the old one's id)
    window.active.regenerate()

    def saved() -> bool:
        last = store.messages(cid)[-1]
        return last.role == "assistant" and last.created_at != before and not window.chat.is_streaming(cid)

    qtbot.waitUntil(saved, timeout=LONG_MS)
    wait_answer(qtbot, window, cid)
    return store.messages(cid)[-1].content


def _answered(window, cid: int) -> bool:
    messages = window.engine.store.messages(cid)
    return bool(messages) and messages[-1].role == "assistant" and not window.chat.is_streaming(cid)


def _stored(window, cid: int) -> list | None:
    return window.engine.store.get_conversation(cid).sampling.get("lora")


def _chat_instances(engine) -> list:
    """The loaded chat models (the window's turns also load an embedding instance, for search)."""
    return [m for m in engine.scheduler.loaded_models() if not m.options.embeddings]


def test_an_adapter_picked_in_chat_settings_applies_and_is_switched_off(qtbot, window,
                                                                                    tmp_path: Path) -> None:
    engine = window.engine
    engine.update_settings(threads=1)  # a busy machine: see tests/integration/test_lora_engine.py
    engine.scheduler.unload_all()  # in case the window loaded the default model already
    engine.adapters.register_file(write_adapter(tmp_path / "colour-lora.gguf", seed=1))
    window.model_list.refresh()  # what an import does; the picker follows
    panel = window.panel
    qtbot.waitUntil(lambda: panel.adapter.count() == 2, timeout=30_000)
    assert panel.adapter.itemText(1).startswith("colour-lora")
    assert not panel.adapter_scale.isEnabled()  # no adapter: nothing to scale

    cid = new_chat(qtbot, window, max_tokens=10)
    type_and_send(qtbot, window, "Name a colour.")
    qtbot.waitUntil(lambda: _answered(window, cid), timeout=LONG_MS)
    wait_answer(qtbot, window, cid)
    base = engine.store.messages(cid)[-1].content
    assert _last_answer(window) == base
    [model] = _chat_instances(engine)

    panel.adapter.setCurrentIndex(1)
    assert panel.adapter_scale.isEnabled() and panel.adapter_scale.value() == 1.0
    panel.flush()
    qtbot.waitUntil(lambda: _stored(window, cid) == [{"id": "colour-lora", "scale": 1.0}], timeout=30_000)
    turns: list[list[tuple[str, float]]] = []  # the adapters each of this chat's finished turns ran with
    engine.scheduler.add_finished_observer(
        lambda job, _finished: turns.append([(u.adapter_id, u.scale) for u in job.lora.uses])
        if job.conversation_id == cid else None)
    _regenerate(qtbot, window, cid)
    # The answer came from the model with the adapter applied. Whether the adapter changes
    # the model is the engine tests' question, asked of log-probabilities
    # (tests/integration/test_lora_engine.py): the greedy text of a 10-token answer may stay
    # the same on some CPUs' kernels.
    assert turns == [[("colour-lora", 1.0)]]

    panel.adapter_scale.setValue(0.0)
    panel.flush()
    qtbot.waitUntil(lambda: _stored(window, cid) == [{"id": "colour-lora", "scale": 0.0}], timeout=30_000)
    assert _regenerate(qtbot, window, cid) == base

    panel.adapter.setCurrentIndex(0)
    panel.flush()
    qtbot.waitUntil(lambda: _stored(window, cid) is None, timeout=30_000)
    assert _regenerate(qtbot, window, cid) == base
    assert _chat_instances(engine) == [model]  # switched on and off without a reload

    # The choice is the conversation's: another chat starts without it, this one shows it again.
    panel.adapter.setCurrentIndex(1)
    panel.adapter_scale.setValue(0.5)
    panel.flush()
    qtbot.waitUntil(lambda: _stored(window, cid) == [{"id": "colour-lora", "scale": 0.5}], timeout=30_000)
    window.new_chat()
    assert panel.adapter.currentData() is None
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == cid)
    assert panel.adapter.currentData() == "colour-lora" and panel.adapter_scale.value() == 0.5


def test_an_adapter_imported_on_the_models_page_reaches_the_chat_settings(qtbot, window, tmp_path: Path) -> None:
    page = window.models_page
    page.import_paths([write_adapter(tmp_path / "style-lora.gguf", blocks=range(1))])
    qtbot.waitUntil(lambda: page.last_import is not None, timeout=60_000)
    assert [a.id for a in page.last_import.adapters] == ["style-lora"] and not page.last_import.imported
    assert "LoRA adapter style-lora" in page.notice.text()
    qtbot.waitUntil(lambda: window.panel.adapter.findData("style-lora") > 0, timeout=60_000)

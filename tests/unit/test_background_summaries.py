"""Summaries of long conversations for the sidebar, as background work: written on the small
model once the machine is idle after a chat turn, only for long conversations and again only
after enough new messages, and giving way when a person sends. As in test_background.py the
scheduler runs the fake model; the store and the registry (with the real SmolLM2) are real."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from inglenook.engine.chat.background import (
    SUMMARY_CLIENT, SUMMARY_EVERY, SUMMARY_MESSAGE_CHARS, SUMMARY_MIN_MESSAGES, SUMMARY_SOURCE_CHARS,
    TITLE_CLIENT, BackgroundWork, clean_summary, transcript,
)
from inglenook.engine.chat.chat import ChatService
from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.routing import ChatModels
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.settings import Settings
from inglenook.engine.store.store import Store
from tests.fakes import FakeModel
from tests.unit.test_scheduler_chat import _resolve


@pytest.fixture()
def parts(tmp_path: Path, smollm2_path: Path):
    FakeModel.step_delay_s = 0.005
    store = Store(tmp_path / "inglenook.db")
    registry = ModelRegistry(store, Paths.under(tmp_path / "home").ensure(), [])
    small = registry.register_file(smollm2_path)
    # The fake model counts a token per character: room for a summary's transcript.
    scheduler = Scheduler(_resolve, lambda: LoadOptions(context_size=8192, parallel=1), idle_unload_s=0,
                          loader=FakeModel)
    finished: list[tuple[str, str, float]] = []
    scheduler.add_finished_observer(
        lambda job, f: finished.append((job.client, job.model_id if f.finish_reason != "cancelled" else "cancelled",
                                        time.monotonic())))
    background = BackgroundWork(scheduler, store, lambda: Settings(background_titles=False), ChatModels(registry),
                                poll_s=0.01)
    chats = ChatService(store, scheduler, lambda: "big:q4_0")
    chats.client, chats.background = "window", background
    yield chats, background, scheduler, finished, small
    background.close()
    scheduler.close()
    store.close()
    FakeModel.step_delay_s = 0.0


def _talk(chats: ChatService, background: BackgroundWork, conversation_id: int, turns: int) -> None:
    for n in range(turns):
        chats.send(conversation_id, f"Question {n} about tides").wait()
        assert background.wait_idle()


def _clients(finished: list[tuple[str, str, float]]) -> list[str]:
    return [client for client, _model, _at in sorted(finished, key=lambda item: item[2])]


def test_a_long_conversation_is_summarised_on_the_small_model_after_its_answer(parts) -> None:
    chats, background, _scheduler, finished, small = parts
    heard: list[tuple[int, str]] = []
    background.add_summary_listener(lambda cid, text: heard.append((cid, text)))
    conversation = chats.new_conversation()
    _talk(chats, background, conversation.id, SUMMARY_MIN_MESSAGES // 2 - 1)
    assert SUMMARY_CLIENT not in _clients(finished)  # six messages: the title tells it
    _talk(chats, background, conversation.id, 1)
    clients = _clients(finished)
    assert clients[-2:] == ["window", SUMMARY_CLIENT]  # the person's answer first, the summary after it
    assert [model for client, model, _ in finished if client == SUMMARY_CLIENT] == [small.id]
    expected = clean_summary(FakeModel.reply)
    assert heard == [(conversation.id, expected)]
    assert background.summaries.all() == {conversation.id: expected}
    assert TITLE_CLIENT not in clients  # titles are off in this fixture


def test_a_summary_is_written_again_only_after_enough_new_messages(parts) -> None:
    chats, background, _scheduler, finished, _small = parts
    conversation = chats.new_conversation()
    _talk(chats, background, conversation.id, SUMMARY_MIN_MESSAGES // 2)
    _talk(chats, background, conversation.id, SUMMARY_EVERY // 2 - 1)
    assert _clients(finished).count(SUMMARY_CLIENT) == 1
    _talk(chats, background, conversation.id, 1)
    assert _clients(finished).count(SUMMARY_CLIENT) == 2
    stored = background.summaries.get(conversation.id)
    assert stored is not None and stored.messages == SUMMARY_MIN_MESSAGES + SUMMARY_EVERY


def test_a_summary_gives_way_to_a_person_and_is_written_later(parts) -> None:
    chats, background, scheduler, finished, _small = parts
    conversation = chats.new_conversation()
    _talk(chats, background, conversation.id, SUMMARY_MIN_MESSAGES // 2 - 1)
    FakeModel.step_delay_s = 0.1  # a slow summary, so the person's message lands while it runs
    chats.send(conversation.id, "The question that makes it long").wait()
    deadline = time.monotonic() + 30
    while scheduler.heartbeat() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the summary job has started
    other = chats.new_conversation(title="Mine")
    turn = chats.send(other.id, "A person asks now")
    turn.wait()
    assert background.wait_idle()
    assert background.interruptions == 1
    assert turn.finished is not None and turn.finished.finish_reason == "stop"
    summaries = [(client, model) for client, model, _ in sorted(finished, key=lambda i: i[2]) if client == SUMMARY_CLIENT]
    assert summaries[0][1] == "cancelled" and summaries[-1][1] != "cancelled"  # cut short, then written
    assert conversation.id in background.summaries.all() and other.id not in background.summaries.all()


def test_a_deleted_conversation_has_no_summary(parts) -> None:
    chats, background, _scheduler, _finished, _small = parts
    kept, gone = chats.new_conversation(), chats.new_conversation()
    _talk(chats, background, gone.id, SUMMARY_MIN_MESSAGES // 2)
    chats.store.delete_conversation(gone.id)
    assert background.summaries.all() == {}
    _talk(chats, background, kept.id, SUMMARY_MIN_MESSAGES // 2)
    assert list(background.summaries.all()) == [kept.id]


def test_the_transcript_keeps_the_newest_messages_within_its_budget() -> None:
    messages = [("user", f"old question {'x' * 900}"), *[("assistant" if n % 2 else "user", f"message {n} " + "y" * 500)
                                                         for n in range(20)]]
    text = transcript(messages)
    assert len(text) <= SUMMARY_SOURCE_CHARS + SUMMARY_MESSAGE_CHARS
    assert text.endswith("y" * 100) and "message 19" in text and "old question" not in text
    assert text.startswith(("User: ", "Assistant: "))
    assert transcript([("user", "z" * 2000)]).endswith("z…")  # one long message is clipped, never dropped
    assert clean_summary('Summary: "Tides and moons."\nMore') == "Tides and moons."


def test_no_summary_is_written_when_summaries_are_switched_off(parts) -> None:
    chats, background, _scheduler, finished, _small = parts
    background._settings = lambda: Settings(background_titles=False, background_summaries=False)
    conversation = chats.new_conversation()
    _talk(chats, background, conversation.id, SUMMARY_MIN_MESSAGES // 2 + 1)
    assert SUMMARY_CLIENT not in _clients(finished) and background.summaries.all() == {}

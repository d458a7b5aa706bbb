"""Background work never delays a person's answer: a BACKGROUND job waits behind interactive and
API jobs, a title starts only once the machine is idle, gives way when a person sends, and
replaces only the automatic title. The scheduler runs the unit tests' fake model; the store and
the registry (with the real SmolLM2 file, the smallest chat model) are real."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from inglenook.engine.base.jobs import API, BACKGROUND, INTERACTIVE, GenerateJob
from inglenook.engine.chat.background import TITLE_CLIENT, BackgroundWork, clean_title
from inglenook.engine.chat.chat import ChatService
from inglenook.engine.chat.titles import title_from
from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.routing import ChatModels
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.settings import Settings
from inglenook.engine.store.store import Store
from tests.fakes import FakeModel
from tests.polling import wait_until
from tests.unit.test_scheduler_chat import _resolve


@pytest.fixture()
def parts(tmp_path: Path, smollm2_path: Path):
    FakeModel.step_delay_s = 0.02
    store = Store(tmp_path / "inglenook.db")
    registry = ModelRegistry(store, Paths.under(tmp_path / "home").ensure(), [])
    small = registry.register_file(smollm2_path)
    # One sequence: jobs queue behind each other, so admission order is visible.
    scheduler = Scheduler(_resolve, lambda: LoadOptions(context_size=256, parallel=1), idle_unload_s=0,
                          loader=FakeModel)
    finished: list[tuple[str, float]] = []
    scheduler.add_finished_observer(lambda job, _f: finished.append((job.client, time.monotonic())))
    background = BackgroundWork(scheduler, store, lambda: Settings(), ChatModels(registry), poll_s=0.01)
    chats = ChatService(store, scheduler, lambda: "big:q4_0")
    chats.client, chats.background = "window", background
    yield chats, background, scheduler, finished, small
    background.close()
    scheduler.close()
    store.close()
    FakeModel.step_delay_s = 0.0


def test_a_background_job_waits_behind_interactive_and_api_jobs(parts) -> None:
    _chats, _background, scheduler, finished, _small = parts
    first = scheduler.submit(GenerateJob("m:q4_0", text="x", client="window", priority=INTERACTIVE))
    wait_until(lambda: first.prompt_usage is not None, failure="the first job was not admitted")  # it holds the only sequence
    later = [scheduler.submit(GenerateJob("m:q4_0", text="x", client=name, priority=rank))
             for name, rank in (("background:title", BACKGROUND), ("api:x", API), ("terminal", INTERACTIVE))]
    for handle in (first, *later):
        handle.result()
    order = [client for client, _ in sorted(finished, key=lambda item: item[1])]
    assert order == ["window", "terminal", "api:x", "background:title"]


def test_a_title_waits_for_the_answer_then_uses_the_small_model(parts, monkeypatch) -> None:
    chats, background, _scheduler, finished, small = parts
    monkeypatch.setattr(FakeModel, "reply", "Tides on Other Planets .")  # a title, not the fake's sentence
    seen: list[tuple[int, str]] = []
    background.add_title_listener(lambda cid, title: seen.append((cid, title)))
    models: list[str] = []
    chats.scheduler.add_finished_observer(lambda job, _f: models.append(job.model_id))
    conversation = chats.new_conversation()
    chats.send(conversation.id, "How do tides work on other planets?").wait()
    assert background.wait_idle()
    clients = [client for client, _ in sorted(finished, key=lambda item: item[1])]
    assert clients == ["window", TITLE_CLIENT]  # the person's answer first, the title after it
    assert models == ["big:q4_0", small.id]
    expected = clean_title(FakeModel.reply, "How do tides work on other planets?")
    assert expected == "Tides on Other Planets"
    assert seen == [(conversation.id, expected)]
    assert chats.store.get_conversation(conversation.id).title == expected


def test_a_title_gives_way_to_a_person_and_is_written_later(parts, monkeypatch) -> None:
    chats, background, scheduler, finished, _small = parts
    monkeypatch.setattr(FakeModel, "reply", "First question answered .")
    FakeModel.step_delay_s = 0.1  # a slow title, so the person's message lands while it runs
    conversation = chats.new_conversation()
    chats.send(conversation.id, "First question").wait()
    deadline = time.monotonic() + 30
    while scheduler.heartbeat() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the title job has started
    other = chats.new_conversation(title="Mine")
    turn = chats.send(other.id, "A person asks now")
    turn.wait()
    assert background.wait_idle()
    assert background.interruptions == 1
    assert turn.finished is not None and turn.finished.finish_reason == "stop"
    done = [client for client, _ in sorted(finished, key=lambda item: item[1])]
    # The interrupted title ended (cancelled) before the person's answer; the retry after it.
    assert done[-2:] == ["window", TITLE_CLIENT]
    assert chats.store.get_conversation(conversation.id).title == "First question answered"
    assert chats.store.get_conversation(other.id).title == "Mine"  # a person's own title: no task


def test_a_title_the_person_gave_meanwhile_is_kept(parts) -> None:
    chats, background, scheduler, _finished, _small = parts
    # Hold the scheduler busy so the title cannot start before the rename.
    blocker = scheduler.submit(GenerateJob("m:q4_0", text="x", client="api:x"))
    conversation = chats.new_conversation()
    chats.send(conversation.id, "Name this later")
    chats.rename(conversation.id, "My own title")
    blocker.result()
    assert background.wait_idle()
    assert chats.store.get_conversation(conversation.id).title == "My own title"


def test_clean_title() -> None:
    assert clean_title('Title: "Tides on Other Planets".\nMore') == "Tides on Other Planets"
    assert clean_title("\n\n**Ocean tides**") == "Ocean tides"
    assert clean_title("   ") == ""
    assert clean_title("x" * 100) == title_from("x" * 100)

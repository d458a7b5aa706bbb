"""A long conversation's summary, written in the background on the small model, shows in its
sidebar tooltip (the real window, engine and SmolLM2)."""

from __future__ import annotations

import pytest

from inglenook.app.pages.sidebar.panel import SUMMARY_ROLE
from inglenook.engine.chat.background import SUMMARY_CLIENT, SUMMARY_MIN_MESSAGES
from inglenook.engine.usage.usage import usage_report

from .conftest import ANSWER_TIMEOUT_MS

pytestmark = [pytest.mark.gui, pytest.mark.integration]


def test_a_long_conversation_shows_its_summary_in_the_sidebar_tooltip(qtbot, window) -> None:
    engine = window.engine
    long_one = engine.chats.new_conversation(title="Tides")
    short_one = engine.chats.new_conversation(title="Hello")
    for n in range(SUMMARY_MIN_MESSAGES // 2):
        engine.store.add_message(long_one.id, "user", f"Why are there two tides a day? Part {n}.")
        engine.store.add_message(long_one.id, "assistant", "Because the Moon pulls the oceans on both sides of the Earth.")
    engine.store.add_message(short_one.id, "user", "Hi")
    window.conversations.refresh()
    qtbot.waitUntil(lambda: sorted(window.sidebar.ids()) == sorted([long_one.id, short_one.id]), timeout=10_000)

    engine.background.request_summary(long_one.id)
    engine.background.request_summary(short_one.id)
    # Background work runs only when the machine is idle: on a busy one that is a while.
    assert engine.background.wait_idle(5 * ANSWER_TIMEOUT_MS / 1000)
    summary = engine.background.summaries.all()[long_one.id]
    assert summary and short_one.id not in engine.background.summaries.all()

    def item_of(conversation_id: int):
        return window.sidebar.list.item(window.sidebar.ids().index(conversation_id))

    qtbot.waitUntil(lambda: item_of(long_one.id).data(SUMMARY_ROLE) == summary, timeout=10_000)
    assert item_of(long_one.id).toolTip() == f"Tides\n\n{summary}"
    assert item_of(short_one.id).toolTip() == "Hello"
    assert engine.usage.flush()
    assert usage_report(engine.store, days=1).by_client()[SUMMARY_CLIENT].requests == 1  # counted as background work


def test_a_search_lists_chats_related_by_meaning_after_the_matches(qtbot, window) -> None:
    engine = window.engine
    cat = engine.chats.new_conversation(title="Chat A")
    engine.store.add_message(cat.id, "user", "My cat has been sneezing for two days and won't eat. Should I see a vet?")
    tax = engine.chats.new_conversation(title="Chat B")
    engine.store.add_message(tax.id, "user", "How do I file my income tax return as a freelancer?")
    kitten = engine.chats.new_conversation(title="Sick kitten photos")  # the words themselves, in a title
    engine.background.request_index()
    assert engine.background.wait_idle(5 * ANSWER_TIMEOUT_MS / 1000)

    qtbot.keyClicks(window.sidebar.search, "sick kitten")
    qtbot.waitUntil(lambda: window.sidebar.section.text().startswith("RESULTS ·"), timeout=20_000)
    ids = window.sidebar.ids()
    assert ids[0] == kitten.id and ids[1] == cat.id  # words first, then meaning
    related = window.sidebar.list.item(1)
    assert related.font().italic() and related.toolTip().startswith("Related by meaning")
    assert not window.sidebar.list.item(0).font().italic()

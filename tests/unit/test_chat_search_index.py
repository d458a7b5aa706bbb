"""Search by meaning over a real SQLite store, with a stand-in embedder whose geometry is known.

The stand-in maps each text to counts of a few topic words, so which conversation is closest
is decided by the test, not by a model; the real model is in tests/integration/test_chat_search.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inglenook.engine.chat.search import MAX_CHARS, WRAPPER, Embedder, MeaningSearch
from inglenook.engine.store.store import Store

TOPICS = ("cat", "code", "bread", "travel")


def topic_vector(text: str) -> list[float]:
    words = text.lower().replace('"', " ").split()
    counts = np.array([sum(w.startswith(t) for w in words) for t in TOPICS], dtype=np.float64) + 0.01
    return list(counts / np.linalg.norm(counts))


class Recorder:
    """An embedder that remembers what it was asked to embed."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, model_id: str, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [topic_vector(t) for t in texts]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "inglenook.sqlite")


def _chat(store: Store, title: str, *texts: str) -> int:
    conversation = store.create_conversation(title)
    for i, text in enumerate(texts):
        store.add_message(conversation.id, "user" if i % 2 == 0 else "assistant", text)
    return conversation.id


def _index_all(search: MeaningSearch, embed: Embedder, model: str = "m") -> int:
    total = 0
    while batch := search.pending(model):
        total += search.index(model, batch, embed)
    return total


def test_conversations_rank_by_their_closest_message(store: Store) -> None:
    cats = _chat(store, "one", "my cat sleeps all day", "cats do that")
    code = _chat(store, "two", "my code crashes", "code review helps", "travel plans later")
    _chat(store, "three", "bread with a crust")
    search, embed = MeaningSearch(store, lambda _m: True), Recorder()
    assert _index_all(search, embed) == 6
    assert search.pending("m") == []
    ranked = search.related("cat cat", "m", embed)
    assert [c for c, _ in ranked][0] == cats
    travel = search.related("travel", "m", embed)
    assert travel[0][0] == code  # its third message, though the rest is about code
    assert all(score >= 0.15 for _, score in ranked)


def test_nothing_below_the_threshold_is_called_related(store: Store) -> None:
    _chat(store, "one", "cat")
    search, embed = MeaningSearch(store, lambda _m: True), Recorder()
    _index_all(search, embed)
    assert search.related("bread", "m", embed) == []  # orthogonal topics
    assert search.related("   ", "m", embed) == []


def test_a_chat_model_gets_the_wrapper_and_the_neutral_correction(store: Store) -> None:
    _chat(store, "one", "a cat " * 400)
    search, embed = MeaningSearch(store, lambda _m: False), Recorder()
    _index_all(search, embed, "chat-model")
    neutral, texts = embed.calls[0], embed.calls[1]
    assert all(t.startswith('This text: "') for t in neutral)  # the neutral phrases, once per model
    assert texts[0] == WRAPPER.format(("a cat " * 400).strip()[:MAX_CHARS])
    search.related("cat", "chat-model", embed)
    assert len(embed.calls) == 3  # the neutral vector was not embedded again


def test_edited_and_deleted_messages(store: Store) -> None:
    kept = _chat(store, "one", "cat")
    gone = _chat(store, "two", "cat cat")
    search, embed = MeaningSearch(store, lambda _m: True), Recorder()
    _index_all(search, embed)
    [message] = store.messages(kept)
    store.update_message(message.id, content="bread, now")
    assert [p.message_id for p in search.pending("m")] == [message.id]  # embedded again
    store.delete_conversation(gone)
    assert search.indexed("m") == 1  # its vectors went with it
    _index_all(search, embed)
    assert [c for c, _ in search.related("bread", "m", embed)] == [kept]
    assert search.pending("other-model")  # vectors of one model never stand for another's


def test_a_message_the_model_refuses_does_not_stop_the_index(store: Store) -> None:
    from inglenook.engine.base.errors import ContextLengthExceeded

    refused = _chat(store, "one", "cat " * 50)
    fine = _chat(store, "two", "cat")

    def picky(model_id: str, texts: list[str]) -> list[list[float]]:
        if any(len(t) > 100 for t in texts):
            raise ContextLengthExceeded("too long to embed at once", prompt_tokens=200, context_size=128)
        return [topic_vector(t) for t in texts]

    search = MeaningSearch(store, lambda _m: True)
    assert search.index("m", search.pending("m"), picky) == 2
    assert search.pending("m") == []  # the refused one is not tried again and again
    assert [c for c, _ in search.related("cat", "m", picky)] == [fine]
    assert refused not in [c for c, _ in search.related("cat", "m", picky)]


def test_vectors_of_another_width_are_dropped_and_embedded_again(store: Store) -> None:
    cats = _chat(store, "one", "cat")
    search, embed = MeaningSearch(store, lambda _m: True), Recorder()
    _index_all(search, embed)

    def wider(model_id: str, texts: list[str]) -> list[list[float]]:
        return [[*topic_vector(t), 0.0] for t in texts]  # the model file changed under its id

    assert search.related("cat", "m", wider) == []
    assert search.indexed("m") == 0 and len(search.pending("m")) == 1
    _index_all(search, wider)
    assert [c for c, _ in search.related("cat", "m", wider)] == [cats]


def test_a_vector_goes_with_its_message_however_it_is_deleted(store: Store) -> None:
    conversation = _chat(store, "one", "cat", "cat cat", "bread")
    search, embed = MeaningSearch(store, lambda _m: True), Recorder()
    _index_all(search, embed)
    last = store.messages(conversation)[-1]
    store.delete_messages_from(conversation, last.id)  # a regenerated answer
    assert search.indexed("m") == 2
    store.delete_oldest_messages(conversation, 1)  # a trimmed context
    assert search.indexed("m") == 1
    again = store.add_message(conversation, "assistant", "bread")  # may get the deleted id back
    assert [p.message_id for p in search.pending("m")] == [again.id]


def test_vectors_of_an_older_method_are_embedded_again(store: Store) -> None:
    """A chat model's vectors from before the last-token method (no METHOD recorded) are not
    comparable with a query's now: dropped once, pending again, then kept."""
    from inglenook.engine.chat.search import METHOD, METHOD_SETTING

    _chat(store, "one", "my cat sleeps all day", "cats do that")
    old = MeaningSearch(store, lambda _m: True)  # as an encoder: no method check, like old vectors
    assert _index_all(old, Recorder(), "chat") == 2
    store.set_setting(METHOD_SETTING, {"other": "x"})

    search = MeaningSearch(store, lambda _m: False)  # a chat model
    assert search.pooling_for("chat") == "last"
    search.related("kitten", "chat", Recorder())
    assert search.indexed("chat") == 0 and len(search.pending("chat")) == 2
    assert store.get_setting(METHOD_SETTING) == {"other": "x", "chat": METHOD}
    assert _index_all(search, Recorder(), "chat") == 2
    assert MeaningSearch(store, lambda _m: False).related("cat", "chat", Recorder())  # kept from now on
    assert search.indexed("chat") == 2


def test_a_message_without_words_is_never_what_relates_a_conversation(store: Store) -> None:
    cats = _chat(store, "one", "my cat sleeps all day", "…")
    search, embed = MeaningSearch(store, lambda _m: True), Recorder()
    assert _index_all(search, embed) == 2
    assert ["…"] not in embed.calls and all("…" not in texts for texts in embed.calls)
    assert search.pending("m") == []  # stored (as zeros), not asked again
    assert [c for c, _ in search.related("cat", "m", embed)] == [cats]

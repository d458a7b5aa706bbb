"""ChatService's conversation operations (what the window asks for), without Qt: a real SQLite
store under the test's INGLENOOK_HOME and the scheduler running the fake model."""

from __future__ import annotations


import pytest

from inglenook.engine import ChatService, InvalidRequest
from tests.fakes import FakeModel


def _exchanges(chats: ChatService, count: int) -> int:
    conversation = chats.new_conversation(title="Long chat")
    for i in range(count):
        chats.store.add_message(conversation.id, "user", f"question {i}")
        chats.store.add_message(conversation.id, "assistant", f"answer {i}")
    return conversation.id


def test_trim_oldest_drops_the_oldest_third(chats: ChatService) -> None:
    cid = _exchanges(chats, 6)
    chats.store.add_message(cid, "user", "and now?")  # 13 messages: the last question waits for an answer
    kept = chats.trim_oldest(cid)
    assert len(kept) == 13 - 4
    assert [m.content for m in kept[:2]] == ["question 2", "answer 2"]
    assert kept[-1].content == "and now?"
    assert [m.id for m in kept] == [m.id for m in chats.store.messages(cid)]  # what is left, as stored


def test_trim_oldest_drops_at_least_one_exchange_and_keeps_the_last_message(chats: ChatService) -> None:
    cid = _exchanges(chats, 1)
    chats.store.add_message(cid, "user", "last")
    assert [m.content for m in chats.trim_oldest(cid)] == ["last"]
    assert [m.content for m in chats.trim_oldest(cid)] == ["last"]  # nothing more to drop
    empty = chats.new_conversation().id
    assert chats.trim_oldest(empty) == []


def test_trim_then_answer_again(chats: ChatService) -> None:
    cid = _exchanges(chats, 3)
    chats.store.add_message(cid, "user", "one more")
    kept = chats.trim_oldest(cid)
    answer = chats.regenerate(cid).wait()
    assert answer is not None and answer.content == FakeModel.reply
    assert [m.content for m in chats.store.messages(cid)] == [*(m.content for m in kept), FakeModel.reply]


def test_chat_settings_are_validated_before_they_are_stored(chats: ChatService) -> None:
    cid = chats.new_conversation(sampling={"temperature": 0.2}).id
    updated = chats.update_chat_settings(cid, "  Answer in French.  ", {"temperature": 1.0, "top_k": 100})
    assert updated.system_prompt == "Answer in French." and updated.sampling == {"temperature": 1.0, "top_k": 100}
    with pytest.raises(InvalidRequest):
        chats.update_chat_settings(cid, None, {"temperature": -3.0})
    stored = chats.store.get_conversation(cid)
    assert stored.system_prompt == "Answer in French." and stored.sampling["temperature"] == 1.0
    assert chats.update_chat_settings(cid, "   ", {}).system_prompt is None


def test_rename_and_switch_model(chats: ChatService) -> None:
    cid = chats.new_conversation(title="New chat").id
    assert chats.rename(cid, "  Orchard notes ").title == "Orchard notes"
    with pytest.raises(InvalidRequest):
        chats.rename(cid, "   ")
    assert chats.store.get_conversation(cid).title == "Orchard notes"
    assert chats.switch_model(cid, "other:q8_0").model_id == "other:q8_0"
    assert chats.switch_model(cid, None).model_id is None  # back to the default model
    assert chats.store.get_conversation(cid).model_id is None


def test_open_and_list_conversations(chats: ChatService) -> None:
    apples = _exchanges(chats, 1)
    chats.rename(apples, "Fruit")
    chats.store.add_message(apples, "user", "crunchy apples")
    trains = chats.new_conversation(title="Travel").id
    assert [c.id for c in chats.conversations()] == [trains, apples]
    assert [c.id for c in chats.conversations("crunchy")] == [apples]
    conversation, messages = chats.open(apples)
    assert conversation.title == "Fruit" and [m.content for m in messages][-1] == "crunchy apples"


def test_a_turn_read_by_polling_saves_what_iterating_saves(chats: ChatService) -> None:
    """The window reads a turn with ``poll`` when its waker calls, on its own thread, and
    saves it with ``save``: the same answer as iterating it on a thread of its own."""
    import threading

    from tests.polling import wait_until

    cid = chats.new_conversation().id
    woken = threading.Event()
    turn = chats.send(cid, "hello")
    assert turn.pollable
    turn.set_waker(woken.set)
    pieces: list[str] = []
    ended = False
    while not ended:
        wait_until(woken.is_set, failure="the waker was not called")
        woken.clear()
        chunks, ended = turn.poll()  # never waits: an event put before the clear is read here
        pieces.extend(chunk.text for chunk in chunks)
    assert turn.finished is not None and turn.poll() == ([], False)  # nothing after the end
    message = turn.save()
    assert message is not None and message.content == "".join(pieces) == FakeModel.reply
    assert message.status == "complete"
    assert turn.save() is message  # once
    assert [m.content for m in chats.store.messages(cid)] == ["hello", FakeModel.reply]

"""Versions and branches: regenerating or editing keeps what was there, as versions of a
message; a branch copies a conversation up to a message. A real SQLite store, the scheduler
running the fake model."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from inglenook.engine import ChatService, InvalidRequest, Paths, Store
from tests.fakes import FakeModel


def _contents(chats: ChatService, cid: int) -> list[str]:
    return [m.content for m in chats.store.messages(cid)]


def _answered(chats: ChatService, cid: int, text: str) -> int:
    message = chats.send(cid, text).wait()
    assert message is not None
    return message.id


def test_regenerating_keeps_the_earlier_answer_as_a_version(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    first = _answered(chats, cid, "hello")
    chats.store.update_message(first, content="the first answer")  # told apart from the second
    second = chats.regenerate(cid).wait()
    assert second is not None and second.id != first
    assert _contents(chats, cid) == ["hello", FakeModel.reply]
    assert [v.id for v in chats.versions(second.id)] == [first, second.id]
    assert [v.id for v in chats.versions(first)] == [first, second.id]  # the same set from either

    path = chats.choose_version(first)
    assert [m.content for m in path] == ["hello", "the first answer"]
    assert _contents(chats, cid) == ["hello", "the first answer"]  # the choice is stored
    # The next question follows the version on screen.
    _answered(chats, cid, "and then?")
    assert _contents(chats, cid) == ["hello", "the first answer", "and then?", FakeModel.reply]


def test_editing_a_question_keeps_the_old_branch(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    question = chats.send(cid, "first question")
    question.wait()
    asked = chats.store.messages(cid)[0]
    _answered(chats, cid, "second question")
    edited = chats.edit_and_resend(asked.id, "a better first question").wait()
    assert edited is not None
    assert _contents(chats, cid) == ["a better first question", FakeModel.reply]
    versions = chats.versions(chats.store.messages(cid)[0].id)
    assert [v.content for v in versions] == ["first question", "a better first question"]
    # The old branch, whole, comes back with its version of the question.
    path = chats.choose_version(asked.id)
    assert [m.content for m in path] == ["first question", FakeModel.reply, "second question", FakeModel.reply]


def test_editing_a_later_question_branches_there(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    _answered(chats, cid, "one")
    _answered(chats, cid, "two")
    two = chats.store.messages(cid)[2]
    chats.edit_and_resend(two.id, "two, again").wait()
    assert _contents(chats, cid) == ["one", FakeModel.reply, "two, again", FakeModel.reply]
    assert [v.content for v in chats.versions(two.id)] == ["two", "two, again"]
    with pytest.raises(InvalidRequest):
        chats.edit_and_resend(chats.store.messages(cid)[1].id, "answers are edited in place")


def test_any_message_can_be_edited_in_place_or_deleted_alone(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    _answered(chats, cid, "one")
    _answered(chats, cid, "two")
    one, answer, two, _ = chats.store.messages(cid)
    chats.edit_message(answer.id, "a corrected answer")
    assert _contents(chats, cid)[1] == "a corrected answer"
    with pytest.raises(InvalidRequest):
        chats.edit_message(answer.id, "   ")

    path = chats.delete_message(answer.id)  # the question after it now follows the first
    assert [m.content for m in path] == ["one", "two", FakeModel.reply]
    assert chats.store.get_message(two.id).parent_id == one.id
    path = chats.delete_message(path[-1].id)  # the last one: the path ends one earlier
    assert [m.content for m in path] == ["one", "two"]
    _answered(chats, cid, "three")
    assert _contents(chats, cid) == ["one", "two", "three", FakeModel.reply]


def test_a_branch_copies_the_conversation_up_to_a_message(chats: ChatService) -> None:
    source = chats.new_conversation(title="Trip", system_prompt="Be brief.", sampling={"temperature": 0.3})
    _answered(chats, source.id, "where to?")
    _answered(chats, source.id, "how long?")
    upto = chats.store.messages(source.id)[1]
    branch = chats.branch(upto.id)
    assert branch.id != source.id and branch.title == "Trip (branch)"
    assert branch.system_prompt == "Be brief." and branch.sampling == {"temperature": 0.3}
    assert _contents(chats, branch.id) == ["where to?", FakeModel.reply]
    assert len(chats.store.messages(source.id)) == 4  # the source is untouched
    _answered(chats, branch.id, "somewhere else?")
    assert _contents(chats, branch.id)[-2:] == ["somewhere else?", FakeModel.reply]
    assert len(chats.store.messages(source.id)) == 4
    # Only a message on the chosen path starts a branch.
    chats.regenerate(source.id).wait()
    hidden = chats.versions(chats.store.messages(source.id)[-1].id)[0]
    with pytest.raises(InvalidRequest):
        chats.branch(hidden.id)


def test_trimming_keeps_the_path_and_the_next_answer_follows_it(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    for text in ("q1", "q2", "q3"):
        _answered(chats, cid, text)
    chats.regenerate(cid).wait()  # a second version of the last answer
    kept = chats.trim_oldest(cid)
    assert [m.content for m in kept] == ["q2", FakeModel.reply, "q3", FakeModel.reply]
    assert kept[0].parent_id is None
    _answered(chats, cid, "q4")
    assert _contents(chats, cid)[-2:] == ["q4", FakeModel.reply]


def test_conversations_from_before_versions_become_one_path(home: Path) -> None:
    """A database written before messages had parents: the migration links each message to
    the one before it, so the conversation reads as it did."""
    path = Paths.under(home).ensure().database
    store = Store(path)
    cid = store.create_conversation("Old").id
    other = store.create_conversation("Other").id
    for n in range(3):
        store.add_message(cid, "user", f"q{n}")
        store.add_message(other, "user", f"elsewhere {n}")  # interleaved ids
        store.add_message(cid, "assistant", f"a{n}")
    store.close()
    with sqlite3.connect(path) as db:  # back to the old schema
        db.execute("DROP INDEX IF EXISTS idx_messages_conversation_id_parent_id")
        db.execute("ALTER TABLE messages DROP COLUMN parent_id")
        db.execute("ALTER TABLE conversations DROP COLUMN leaf_id")
        db.execute("DELETE FROM _migrations WHERE name = 'm015_message_tree'")
    db.close()
    store = Store(path)
    try:
        assert [m.content for m in store.messages(cid)] == ["q0", "a0", "q1", "a1", "q2", "a2"]
        assert [m.content for m in store.messages(other)] == ["elsewhere 0", "elsewhere 1", "elsewhere 2"]
        store.add_message(cid, "user", "q3")
        assert store.messages(cid)[-2].content == "a2" and store.messages(cid)[-1].content == "q3"
    finally:
        store.close()


def test_continue_extends_the_last_answer_in_place(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    with pytest.raises(InvalidRequest):
        chats.continue_answer(cid)  # nothing to continue yet
    answer_id = _answered(chats, cid, "tell me a story")
    chats.store.update_message(answer_id, content="Once upon a time", completion_tokens=4, finish_reason="length")
    turn = chats.continue_answer(cid)
    continued = turn.wait()
    assert continued is not None and continued.id == answer_id  # the same message, longer
    assert continued.content == "Once upon a time" + FakeModel.reply
    assert continued.completion_tokens == 4 + turn.finished.usage.completion_tokens
    assert [m.id for m in chats.store.messages(cid)] == [chats.store.messages(cid)[0].id, answer_id]


def test_version_sets_name_every_message_with_other_versions(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    answer = _answered(chats, cid, "hello")
    assert chats.version_sets(cid) == {}
    second = chats.regenerate(cid).wait()
    third = chats.regenerate(cid).wait()
    assert second is not None and third is not None
    ids = [answer, second.id, third.id]
    assert chats.version_sets(cid) == {i: ids for i in ids}



def test_a_branch_is_new_and_a_renamed_chat_keeps_its_place(chats: ChatService) -> None:
    """A branch sorts above its source (its messages keep their times, the chat is new); a
    title, the person's or one written in the background, moves no chat above newer ones."""
    import time as clock

    old = chats.new_conversation().id
    _answered(chats, old, "one")
    clock.sleep(0.02)
    newer = chats.new_conversation().id
    _answered(chats, newer, "two")
    clock.sleep(0.02)
    chats.rename(old, "A better title")
    chats.store.update_conversation(old, touch=False, title="Written in the background")
    assert [c.id for c in chats.conversations()][:2] == [newer, old]
    branch = chats.branch(chats.store.messages(old)[-1].id)
    listed = chats.conversations()
    assert listed[0].id == branch.id and listed[0].updated_at > clock.time() - 5


def test_an_edited_answer_drops_the_figures_of_the_text_it_replaced(chats: ChatService) -> None:
    cid = chats.new_conversation().id
    _answered(chats, cid, "one")
    answer = chats.store.messages(cid)[1]
    assert answer.completion_tokens
    edited = chats.edit_message(answer.id, "a corrected answer")
    assert edited.content == "a corrected answer" and edited.completion_tokens is None and edited.tokens_per_s is None


def test_a_chat_with_tools_gets_a_title_written_too(chats: ChatService) -> None:
    asked: list[tuple[int, str]] = []

    class Background:
        def request_title(self, conversation_id: int, text: str) -> None:
            asked.append((conversation_id, text))

        def person_started(self) -> None:
            pass

    chats.background = Background()  # type: ignore[assignment]
    chats.client = "window"
    cid = chats.new_conversation().id
    chats.send_with_tools(cid, "What time is it in Tokyo?", lambda request: None)
    assert asked == [(cid, "What time is it in Tokyo?")]

"""Images kept with a chat (issue 31): sent once, shown to the model on every later turn and
after a restart, copied by branches and edits, removed from disk with the last message that
uses them. A real SQLite store and real files; the scheduler runs the fake model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine import (
    ChatService, ImageInput, InvalidRequest, LoadOptions, ModelRecord, Paths, Scheduler, Store, decode_image,
)
from tests.fakes import FakeModel
from tests.mmproj_writer import vision_copy_of_smollm2, write_png

from .conftest import fake_record

# The fake model reads a message's parts as their text (an image part's repr): more than the
# shared fixture's 256 tokens.
CONTEXT = 4096


@pytest.fixture()
def chats(store: Store) -> Iterator[ChatService]:
    FakeModel.step_delay_s = 0.0
    scheduler = Scheduler(fake_record, lambda: LoadOptions(context_size=CONTEXT), idle_unload_s=0, loader=FakeModel)
    yield ChatService(store, scheduler, lambda: "m:q4_0")
    scheduler.close()


def _image(tmp_path: Path, seed: int, size: tuple[int, int] = (40, 30)) -> ImageInput:
    return decode_image(write_png(tmp_path / f"in-{seed}.png", size, seed).read_bytes())


def _images_in(history: list[dict]) -> list[list[str]]:
    """Per user message of a prompt: the digests of its image parts, in order."""
    found = []
    for message in history:
        if message["role"] == "user":
            content = message["content"]
            found.append([p["image"].digest for p in content if p["type"] == "image"] if isinstance(content, list)
                         else [])
    return found


def _files(home: Path) -> set[str]:
    return {p.stem for p in (Paths.under(home).images).rglob("*.png")}


def test_images_are_kept_with_the_message_and_seen_on_every_later_turn(
        chats: ChatService, home: Path, tmp_path: Path) -> None:
    cat, dog = _image(tmp_path, 1), _image(tmp_path, 2, (64, 48))
    cid = chats.new_conversation().id
    chats.send(cid, "what are these?", images=[cat, dog]).wait()
    chats.send(cid, "and the second one?").wait()
    conversation = chats.store.get_conversation(cid)
    history = chats.history(conversation)
    assert _images_in(history) == [[cat.digest, dog.digest], []]
    first = history[0]["content"]
    assert first[-1] == {"type": "text", "text": "what are these?"}
    # The model reads the same pixels again: same digest, so the prefix cache's key matches.
    assert first[0]["image"].rgb == cat.rgb and first[1]["image"].width == 64
    assert _files(home) == {cat.digest, dog.digest}
    question = chats.store.messages(cid)[0]
    stored = chats.message_images(cid)[question.id]
    assert [(s.position, s.digest, s.mime, s.width, s.height) for s in stored] == [
        (0, cat.digest, "image/png", 40, 30), (1, dog.digest, "image/png", 64, 48)]
    assert all(s.size == s.path.stat().st_size > 0 for s in stored)


def test_a_reopened_store_brings_the_images_back(home: Path, tmp_path: Path) -> None:
    image = _image(tmp_path, 3)
    FakeModel.step_delay_s = 0.0

    def service(store: Store) -> tuple[ChatService, Scheduler]:
        scheduler = Scheduler(fake_record, lambda: LoadOptions(context_size=CONTEXT), idle_unload_s=0, loader=FakeModel)
        return ChatService(store, scheduler, lambda: "m:q4_0", images_folder=Paths.under(home).images), scheduler

    store = Store(Paths.under(home).ensure().database)
    chats, scheduler = service(store)
    cid = chats.new_conversation().id
    chats.send(cid, "look", images=[image]).wait()
    scheduler.close()
    store.close()

    store = Store(Paths.under(home).database)  # a restart: a new store, a new service
    chats, scheduler = service(store)
    try:
        assert "m016_images" in store.applied_migrations()
        assert _images_in(chats.history(store.get_conversation(cid))) == [[image.digest]]
    finally:
        scheduler.close()
        store.close()


def test_deleting_removes_files_no_other_message_uses(chats: ChatService, home: Path, tmp_path: Path) -> None:
    shared, own = _image(tmp_path, 4), _image(tmp_path, 5)
    first = chats.new_conversation().id
    chats.send(first, "both", images=[shared, own]).wait()
    second = chats.new_conversation().id
    chats.send(second, "the same picture", images=[shared]).wait()
    assert _files(home) == {shared.digest, own.digest}
    chats.delete_conversation(first)
    assert _files(home) == {shared.digest}  # the second chat still shows it
    assert chats.message_images(first) == {}
    question = chats.store.messages(second)[0]
    chats.delete_message(question.id)
    assert _files(home) == set()


def test_a_branch_and_an_edited_question_keep_the_images(chats: ChatService, home: Path, tmp_path: Path) -> None:
    image = _image(tmp_path, 6)
    cid = chats.new_conversation().id
    chats.send(cid, "what is it?", images=[image]).wait()
    answer = chats.store.messages(cid)[-1]
    branch = chats.branch(answer.id)
    assert _images_in(chats.history(branch)) == [[image.digest]]
    question = chats.store.messages(cid)[0]
    chats.edit_and_resend(question.id, "what is it, exactly?").wait()
    edited = chats.store.messages(cid)[0]
    assert edited.id != question.id and edited.content == "what is it, exactly?"
    assert _images_in(chats.history(chats.store.get_conversation(cid))) == [[image.digest]]
    chats.delete_conversation(cid)
    assert _files(home) == {image.digest}  # the branch holds it
    chats.delete_conversation(branch.id)
    assert _files(home) == set()


def test_a_text_only_model_refuses_images_before_anything_is_kept(
        chats: ChatService, home: Path, tmp_path: Path, smollm2_path: Path) -> None:
    chats.resolve = lambda model_id: ModelRecord(model_id, smollm2_path, model_id, "llama", "Q8_0", 1, 256, 1,
                                                 "fp-text", "scan")
    cid = chats.new_conversation().id
    with pytest.raises(InvalidRequest, match="m:q4_0 is a text-only model"):
        chats.send(cid, "what is it?", images=[_image(tmp_path, 7)])
    assert chats.store.messages(cid) == [] and _files(home) == set()
    assert not chats.reads_images(None)


def test_a_chat_switched_to_a_text_only_model_reads_a_note_instead(
        chats: ChatService, tmp_path: Path, smollm2_path: Path) -> None:
    vision = vision_copy_of_smollm2(smollm2_path, tmp_path / "vision")
    paths = {"vision": vision, "text": smollm2_path}
    chats.resolve = lambda model_id: ModelRecord(model_id, paths[model_id], model_id, "llama", "Q8_0", 1, 256, 1,
                                                 "fp-" + model_id, "scan")
    assert chats.reads_images("vision") and not chats.reads_images("text")
    cid = chats.new_conversation(model_id="vision").id
    conversation = chats.store.get_conversation(cid)
    message = chats.store.add_message(cid, "user", "what is it?")
    chats.images.files.attach(message.id, [_image(tmp_path, 8)])
    assert _images_in(chats.history(conversation)) == [[_image(tmp_path, 8).digest]]
    conversation = chats.switch_model(cid, "text")
    history = chats.history(conversation)
    assert history[0]["content"].startswith("[an image (40x30) was sent here; this model cannot see images]")
    assert history[0]["content"].endswith("what is it?")


def test_a_missing_file_leaves_the_text(chats: ChatService, home: Path, tmp_path: Path) -> None:
    image = _image(tmp_path, 9)
    cid = chats.new_conversation().id
    chats.send(cid, "look", images=[image]).wait()
    for path in Paths.under(home).images.rglob("*.png"):
        path.unlink()
    chats.images._decoded.clear()  # as after a restart
    history = chats.history(chats.store.get_conversation(cid))
    assert history[0]["content"] == "look"

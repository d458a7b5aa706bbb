"""Assistants (named presets of system prompt, sampling and model): built-ins, the person's
own in a real SQLite store, export and import as JSON, and a chat started from one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine import Assistant, AssistantLibrary, ChatService, InvalidRequest, LoadOptions, Paths, Scheduler, Store
from inglenook.engine.tools import McpServerConfig
from tests.fakes import FakeModel


@pytest.fixture()
def store(home: Path) -> Iterator[Store]:
    store = Store(Paths.under(home).ensure().database)
    yield store
    store.close()


def test_builtins_come_first_and_an_edit_of_one_takes_its_place(store: Store) -> None:
    library = AssistantLibrary(store)
    names = [a.name for a in library.all()]
    assert names[:4] == ["General", "Concise", "Coder", "Writer"]
    assert library.get("coder").sampling["temperature"] == 0.2  # names ignore case

    library.save(Assistant("Coder", "Write Rust only.", {"temperature": 0.1}))
    library.save(Assistant("Alpha", "First of mine."))
    assert [a.name for a in library.all()] == ["General", "Concise", "Coder", "Writer", "Alpha"]
    assert library.get("Coder").system_prompt == "Write Rust only." and not library.get("Coder").builtin
    assert AssistantLibrary(store).get("Alpha").system_prompt == "First of mine."  # stored, not held

    assert library.delete("Coder")  # back to how it shipped
    assert library.get("Coder").builtin and library.get("Coder").sampling["temperature"] == 0.2
    assert not library.delete("Nobody")


def test_bad_assistants_are_refused_with_the_reason(store: Store) -> None:
    library = AssistantLibrary(store)
    with pytest.raises(InvalidRequest, match="name"):
        library.save(Assistant("  "))
    with pytest.raises(InvalidRequest, match="temperature"):
        library.save(Assistant("Hot", "", {"temperature": 99}))
    with pytest.raises(InvalidRequest, match="not JSON"):
        library.import_json("{not json")
    with pytest.raises(InvalidRequest):
        library.import_json(json.dumps({"assistants": [{"name": "Fine"}, {"name": ""}]}))
    assert [a.name for a in library.all()][4:] == []  # all or none: "Fine" was not saved


def test_export_then_import_into_another_profile(store: Store, tmp_path: Path) -> None:
    library = AssistantLibrary(store)
    library.save(Assistant("Translator", "Translate into French.", {"temperature": 0.4}, "m:q4_0", "FR"))
    exported = library.export_json(["Translator"])
    assert json.loads(exported)["assistants"][0]["model_id"] == "m:q4_0"

    other = Store(tmp_path / "other.sqlite")
    try:
        imported = AssistantLibrary(other).import_json(exported)
        assert [a.name for a in imported] == ["Translator"]
        assert AssistantLibrary(other).get("translator") == Assistant(
            "Translator", "Translate into French.", {"temperature": 0.4}, "m:q4_0", "FR")
    finally:
        other.close()


def test_a_chat_started_from_an_assistant_takes_its_settings(store: Store) -> None:
    scheduler = Scheduler(lambda model_id: None, lambda: LoadOptions(context_size=256), idle_unload_s=0,  # type: ignore[arg-type, return-value]
                          loader=FakeModel)
    try:
        chats = ChatService(store, scheduler, lambda: "m:q4_0")
        chats.assistants.save(Assistant("Tutor", "Explain step by step.", {"temperature": 0.5, "top_k": 30}, "tiny:q8_0"))
        conversation = chats.new_conversation(assistant="tutor")
        assert conversation.system_prompt == "Explain step by step."
        assert conversation.sampling == {"temperature": 0.5, "top_k": 30}
        assert conversation.model_id == "tiny:q8_0"
        # What the call names itself wins over the assistant's.
        mine = chats.new_conversation(assistant="Tutor", system_prompt="Be terse.", sampling={"top_k": 5})
        assert mine.system_prompt == "Be terse." and mine.sampling == {"temperature": 0.5, "top_k": 5}
        with pytest.raises(InvalidRequest, match="no assistant"):
            chats.new_conversation(assistant="Nobody")
    finally:
        scheduler.close()


def test_tools_and_collections_are_kept_exported_and_old_files_still_import(store: Store, tmp_path: Path) -> None:
    library = AssistantLibrary(store)
    library.save(Assistant("Researcher", "Cite your sources.", tool_servers=("fetch", "time", "fetch"),
                           collections=("papers",)))
    saved = library.get("researcher")
    assert saved.tool_servers == ("fetch", "time") and saved.collections == ("papers",)  # each name once
    data = json.loads(library.export_json(["Researcher"]))
    assert data["format"] == "inglenook-assistants/1"
    assert data["assistants"][0]["tool_servers"] == ["fetch", "time"]
    assert data["assistants"][0]["collections"] == ["papers"]

    other = Store(tmp_path / "other.sqlite")
    try:
        # A file from before assistants named tools and documents: no such keys at all.
        old = {"format": "inglenook-assistants/1",
               "assistants": [{"name": "Old", "system_prompt": "Hi.", "sampling": {}, "model_id": None,
                               "description": ""}]}
        [imported] = AssistantLibrary(other).import_json(json.dumps(old))
        assert imported.tool_servers == () and imported.collections == ()
        assert AssistantLibrary(other).import_json(json.dumps(data))[0] == saved
        with pytest.raises(InvalidRequest, match="tool servers of 'Bad' must be a list of names"):
            AssistantLibrary(other).import_json(json.dumps({"assistants": [{"name": "Bad", "tool_servers": "time"}]}))
        with pytest.raises(InvalidRequest, match="document collections of 'Bad'"):
            AssistantLibrary(other).import_json(json.dumps({"assistants": [{"name": "Bad", "collections": [3]}]}))
    finally:
        other.close()


def test_a_chat_started_from_an_assistant_gets_its_tools_and_documents(store: Store, tmp_path: Path) -> None:
    scheduler = Scheduler(lambda model_id: None, lambda: LoadOptions(context_size=256), idle_unload_s=0,  # type: ignore[arg-type, return-value]
                          loader=FakeModel)
    try:
        chats = ChatService(store, scheduler, lambda: "m:q4_0")
        chats.tools.servers.add(McpServerConfig("clock", command="mcp-server-time"))
        chats.tools.servers.add(McpServerConfig("notes", command="notes-server"))
        manual = tmp_path / "boiler.txt"
        manual.write_text("The boiler is serviced every October by the landlord.")
        [added] = chats.add_to_collection("house", [manual])
        assert added.outcome == "added", added
        chats.assistants.save(Assistant("Handyman", "Help with the house.", tool_servers=("clock", "elsewhere"),
                                        collections=("house", "gone")))

        conversation = chats.new_conversation(assistant="handyman")
        assert chats.chat_tools(conversation.id) == ["clock"]  # a server not set up here is skipped
        assert [d.name for d in chats.attached_documents(conversation.id)] == ["boiler.txt"]

        # Picked on a chat that has tools and documents of its own: it adds, and takes nothing away.
        other = chats.new_conversation()
        chats.set_chat_tools(other.id, ["notes"])
        applied = chats.apply_assistant(other.id, chats.assistants.get("Handyman"))
        assert applied.tool_servers == ("clock",) and applied.documents == 1
        assert applied.missing_servers == ("elsewhere",) and applied.missing_collections == ("gone",)
        assert chats.chat_tools(other.id) == ["clock", "notes"]
        assert len(chats.attached_documents(other.id)) == 1
        chats.apply_assistant(other.id, chats.assistants.get("Handyman"))  # twice: still one document
        assert len(chats.attached_documents(other.id)) == 1

        plain = chats.new_conversation(assistant="General")
        assert chats.chat_tools(plain.id) == [] and chats.attached_documents(plain.id) == []
    finally:
        scheduler.close()

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from inglenook.engine.base.errors import ConversationNotFound, StoreError
from inglenook.engine.store.migrations import MIGRATIONS
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.settings import Settings
from inglenook.engine.store.store import Store


def test_inglenook_home_moves_every_directory(home: Path) -> None:
    paths = Paths.default().ensure()
    for directory in (paths.data, paths.models, paths.cache, paths.config, paths.logs):
        assert home in directory.parents
        assert directory.is_dir()
    assert paths.database.parent == paths.data


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_home_is_a_clear_store_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    with pytest.raises(StoreError, match="cannot create directory|not writable"):
        Paths.under(locked / "inside").ensure()


def test_home_under_a_file_is_a_clear_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot create directory"):
        Paths.under(blocker).ensure()


def test_store_uses_wal_and_records_migrations(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    assert store.db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [m.__name__ for m in MIGRATIONS]
    assert names[0] == "m001_initial"
    assert store.applied_migrations() == names
    store.close()
    again = Store(tmp_path / "db.sqlite")  # re-opening applies nothing twice
    assert again.applied_migrations() == names
    assert again.integrity_ok()


def test_conversations_and_messages_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    first = store.create_conversation("Pancakes", "m:q4_0", "Be brief.", {"temperature": 0.2})
    second = store.create_conversation("Taxes")
    store.add_message(first.id, "user", "How much flour?")
    answer = store.add_message(first.id, "assistant", "200 g.", completion_tokens=4, tokens_per_s=50.0, finish_reason="stop")
    assert answer.status == "complete" and answer.completion_tokens == 4
    assert [m.content for m in store.messages(first.id)] == ["How much flour?", "200 g."]
    # Newest activity first: the conversation that just got messages leads.
    assert [c.id for c in store.list_conversations()] == [first.id, second.id]
    assert [c.id for c in store.list_conversations(search="flour")] == [first.id]
    assert [c.id for c in store.list_conversations(search="tax")] == [second.id]
    assert store.list_conversations(search="100%") == []
    loaded = store.get_conversation(first.id)
    assert loaded.sampling == {"temperature": 0.2} and loaded.system_prompt == "Be brief."
    store.delete_messages_from(first.id, answer.id)
    assert [m.role for m in store.messages(first.id)] == ["user"]
    store.delete_conversation(first.id)
    with pytest.raises(ConversationNotFound):
        store.get_conversation(first.id)
    assert store.messages(first.id) == []


def test_corrupt_database_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    store = Store(path)
    assert store.integrity_ok()
    assert store.list_conversations() == []
    assert list(tmp_path.glob("db.sqlite.corrupt-*"))


def test_committed_rows_survive_an_unclosed_connection(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = Store(path)
    conversation = store.create_conversation("kept")
    store.add_message(conversation.id, "user", "hello")
    # A second, independent connection sees the committed rows without any close().
    rows = sqlite3.connect(path).execute("SELECT content FROM messages").fetchall()
    assert rows == [("hello",)]


def test_settings_persist_with_types(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite")
    settings = Settings.load(store)
    assert settings.api_host == "127.0.0.1" and settings.api_port == 8484
    settings.save(store, context_size=2048, cors_origins=["http://localhost:3000"])
    reloaded = Settings.load(store)
    assert reloaded.context_size == 2048
    assert reloaded.cors_origins == ["http://localhost:3000"]

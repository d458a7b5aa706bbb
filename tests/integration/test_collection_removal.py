"""Removing a collection lets go of what its documents made (issue 30): their passages, keyword
entries and vectors in SQLite, and the prefix-cache files of their documents' block on disk;
a document still in another collection keeps its own. Real files, real SmolLM2 (its prompt
states and its embeddings), real SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from inglenook.engine.core.engine import Engine
from inglenook.engine.store.statefile import SUFFIX, read_header


def notes(folder: Path, name: str, subject: str) -> Path:
    path = folder / name
    path.write_text("\n\n".join(f"## {subject} {k}\n\nThe {subject} meeting {k} agreed on item {k * 7} "
                                f"and asked the clerk to write to the county about the {subject}." for k in range(1, 7)),
                    encoding="utf-8")
    return path


def rows(home: Path, sql: str, *args: object) -> int:
    with sqlite3.connect(home / "data" / "inglenook.db") as conn:
        return int(conn.execute(sql, args).fetchone()[0])


def passage_rows(home: Path, sha256: str) -> tuple[int, int, int]:
    """(passages, keyword entries, vectors) of a document."""
    return (rows(home, "SELECT count(*) FROM document_passages WHERE sha256 = ?", sha256),
            rows(home, "SELECT count(*) FROM document_passages_fts f JOIN document_passages p ON p.id = f.rowid "
                       "WHERE p.sha256 = ?", sha256),
            rows(home, "SELECT count(*) FROM passage_vectors v JOIN document_passages p ON p.id = v.passage_id "
                       "WHERE p.sha256 = ?", sha256))


def prefix_files(home: Path) -> dict[str, tuple[str, ...]]:
    """Each prefix entry on disk and the documents it names."""
    return {p.name: read_header(p).documents for p in (home / "cache" / "states").glob(f"pfx-*{SUFFIX}")}


def test_removing_a_collection_removes_its_passages_vectors_and_cached_states(home: Path, tmp_path: Path) -> None:
    roads, bridges = notes(tmp_path, "roads.md", "roads"), notes(tmp_path, "bridges.md", "bridges")
    with Engine() as engine:
        chats = engine.chats
        assert [a.outcome for a in chats.add_to_collection("council", [roads])] == ["added"]
        assert [a.outcome for a in chats.add_to_collection("works", [bridges])] == ["added"]
        (road_notes,) = chats.collection_documents("council")
        (bridge_notes,) = chats.collection_documents("works")
        search = chats.document_search()
        for document in (road_notes, bridge_notes):  # passages, keyword entries and the search model's vectors
            assert search.find(f"What did the {document.name} meeting agree?", [document])
        for document in (road_notes, bridge_notes):
            passages, keywords, vectors = passage_rows(home, document.sha256)
            assert passages > 0 and keywords == passages and vectors == passages
        for document in (road_notes, bridge_notes):  # a chat with each: its block's prefix entry on disk
            conversation = chats.new_conversation()
            chats.attach_documents(conversation.id, [document])
            chats.send(conversation.id, "Which item was agreed first?", max_tokens=2, temperature=0.0).wait()
        engine.cache.flush()
        saved = prefix_files(home)
        assert sorted(saved.values()) == sorted([(road_notes.sha256,), (bridge_notes.sha256,)])

        assert chats.remove_from_collection("council") == 1
        assert "council" not in chats.collections()
        assert passage_rows(home, road_notes.sha256) == (0, 0, 0)
        assert list(prefix_files(home).values()) == [(bridge_notes.sha256,)]
        passages, keywords, vectors = passage_rows(home, bridge_notes.sha256)  # the other collection's: kept
        assert passages > 0 and keywords == passages and vectors == passages

    with Engine() as engine:  # and after a restart nothing of it comes back
        assert list(prefix_files(home).values()) == [(bridge_notes.sha256,)]
        assert engine.chats.collections().keys() == {"works"}

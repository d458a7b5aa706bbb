"""Passages of documents in SQLite: their text with an FTS5 keyword index, and their vectors
per embedding model (tables from ``m013_documents``). Ranking by keywords happens here; by
meaning, the vectors are handed to whoever embeds the question (``chat/document_search``).

A document's passages are written once (keyed by its hash) and go with it: triggers delete
them, their keyword entries and their vectors when the document row is deleted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..store import Store
from .document import Document
from .passages import split_passages

_WORD = re.compile(r"\w+", re.UNICODE)
# Words too common to say what a question is about (a keyword search for them matches everything).
_STOP_WORDS = frozenset(
    "a an and are as at be by did do does for from had has have how i in is it its of on or that the this to "
    "was were what when where which who whom why will with you your about".split()
)


@dataclass(frozen=True)
class FoundPassage:
    passage_id: int
    sha256: str
    document: str  # the document's name
    label: str
    text: str
    score: float = 0.0

    def citation(self) -> str:
        return f"{self.document}, {self.label}" if self.label else self.document


class PassageIndex:
    def __init__(self, store: Store) -> None:
        self.store = store

    def ensure(self, document: Document) -> int:
        """Write the document's passages unless they are there; returns how many it has."""
        with self.store.writing() as conn:
            count = int(conn.execute("SELECT count(*) FROM document_passages WHERE sha256 = ?",
                                     (document.sha256,)).fetchone()[0])
            if count:
                return count
            passages = split_passages(document)
            for passage in passages:
                cursor = conn.execute(
                    "INSERT INTO document_passages (sha256, ordinal, label, text) VALUES (?, ?, ?, ?)",
                    (document.sha256, passage.ordinal, passage.label, passage.text))
                conn.execute("INSERT INTO document_passages_fts (rowid, text) VALUES (?, ?)",
                             (cursor.lastrowid, passage.text))
            return len(passages)

    def forget(self, sha256s: Iterable[str]) -> int:
        """Delete the documents' passages (their keyword entries and vectors follow by
        trigger); ``ensure`` writes them again if a chat still needs them. Returns how many went."""
        hashes = list(sha256s)
        if not hashes:
            return 0
        marks = ",".join("?" * len(hashes))
        with self.store.writing() as conn:
            return conn.execute(f"DELETE FROM document_passages WHERE sha256 IN ({marks})", hashes).rowcount

    def unembedded(self, sha256s: Sequence[str], model_id: str) -> list[tuple[int, str]]:
        """(passage id, text) of the documents' passages without a vector of ``model_id``."""
        marks = ",".join("?" * len(sha256s))
        with self.store.reading() as conn:
            rows = conn.execute(
                f"SELECT p.id, p.text FROM document_passages p LEFT JOIN passage_vectors v "
                f"ON v.passage_id = p.id AND v.model_id = ? WHERE p.sha256 IN ({marks}) AND v.passage_id IS NULL "
                "ORDER BY p.id", (model_id, *sha256s)).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def store_vectors(self, model_id: str, vectors: Iterable[tuple[int, np.ndarray]]) -> None:
        with self.store.writing() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO passage_vectors (passage_id, model_id, vector) VALUES (?, ?, ?)",
                [(pid, model_id, np.asarray(v, dtype=np.float32).tobytes()) for pid, v in vectors])

    def vectors(self, sha256s: Sequence[str], model_id: str) -> tuple[list[int], np.ndarray]:
        marks = ",".join("?" * len(sha256s))
        with self.store.reading() as conn:
            rows = conn.execute(
                f"SELECT v.passage_id, v.vector FROM passage_vectors v JOIN document_passages p ON p.id = v.passage_id "
                f"WHERE v.model_id = ? AND p.sha256 IN ({marks}) ORDER BY v.passage_id", (model_id, *sha256s)).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [int(r[0]) for r in rows], np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])

    def keyword_ranking(self, question: str, sha256s: Sequence[str], limit: int = 50) -> list[int]:
        """Passage ids matching any of the question's words, best (BM25) first."""
        words = [w for w in (m.group(0).lower() for m in _WORD.finditer(question)) if w not in _STOP_WORDS]
        if not words or not sha256s:
            return []
        query = " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))
        marks = ",".join("?" * len(sha256s))
        with self.store.reading() as conn:
            rows = conn.execute(
                f"SELECT f.rowid FROM document_passages_fts f JOIN document_passages p ON p.id = f.rowid "
                f"WHERE document_passages_fts MATCH ? AND p.sha256 IN ({marks}) ORDER BY bm25(document_passages_fts) "
                "LIMIT ?", (query, *sha256s, limit)).fetchall()
        return [int(r[0]) for r in rows]

    def passages(self, ids: Sequence[int], scores: Sequence[float] = ()) -> list[FoundPassage]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        with self.store.reading() as conn:
            rows = conn.execute(
                f"SELECT p.id, p.sha256, d.name, p.label, p.text FROM document_passages p "
                f"JOIN documents d ON d.sha256 = p.sha256 WHERE p.id IN ({marks})", tuple(ids)).fetchall()
        by_id = {int(r[0]): r for r in rows}
        scores = list(scores) or [0.0] * len(ids)
        return [FoundPassage(i, by_id[i][1], by_id[i][2], by_id[i][3], by_id[i][4], s)
                for i, s in zip(ids, scores, strict=True) if i in by_id]

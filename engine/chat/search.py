"""Search conversations by meaning: every message embedded in the background by the small
model (table ``message_embeddings``, m010), a query embedded when the person searches, and
conversations ranked by their closest message.

Which model embeds: the smallest installed embedding model (a BERT-family encoder) when there
is one, used as it is (mean pooling); else the small chat model (``routing.small_model_id``).
A chat model's vector of a text is its state after the last token of the text wrapped in one
fixed sentence (``WRAPPER``, which ends where the model would name the topic), less the mean
of a few content-free phrases (``NEUTRAL_PHRASES``, embedded once per model), normalised.
A conversation's score is its closest message's plus half its messages' mean: one that is
about the query throughout beats one with a single close message.

Measured on SmolLM2-135M: 12 conversations as the model itself answered them (two questions
each, follow-ups like "thanks" and "tell me more" included) and 33 queries sharing no phrase
with the conversation they mean. The right one first (recall@1): mean pooling, wrapped and
corrected (the earlier method) 20/33 ("how to rest better at night" found the running chat
first); mean pooling of the bare text 6/33; the last token's state of the bare text 4/33,
wrapped 22/33, wrapped and corrected 28/33, with the score above 30/33. Every right
conversation scored at least 0.46 (``MIN_SCORE_LAST``, 0.45), 81% of the others less. A
message with no word in it ("…") says nothing about its conversation: its vector is zeros.
Vectors made by an earlier method are dropped once and embedded again (``METHOD``).

Text search (titles and messages containing the words) stays first; these are the related
conversations shown after it, the ones that share no word with the query.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..base import ContextLengthExceeded, InvalidRequest
from ..store import Store

log = logging.getLogger(__name__)

TABLE = "message_embeddings"
WRAPPER = 'This text: "{}" is about'
NEUTRAL_PHRASES = ("hello", "thanks", "what is this", "tell me more", "ok", "a question", "something")
#: How much of a message is embedded (the start says what it is about; and pooling needs the
#: whole input in one batch).
MAX_CHARS = 800
#: Messages embedded per background job: small, so a person's turn waits at most one input.
INDEX_BATCH = 8
#: A conversation below this is not related: an encoder's best message (cosine), a chat
#: model's score (corrected last-token vectors: best message plus half the mean).
MIN_SCORE = 0.15
MIN_SCORE_LAST = 0.45
#: How a chat model's vectors are made; stored vectors of another method are embedded again.
METHOD = "last-token-wrapped/2"
METHOD_SETTING = "search_vector_method"
MAX_RELATED = 5

#: ``(model_id, texts) -> unit vectors``: how this room has texts embedded (a scheduler job).
Embedder = Callable[[str, list[str]], list[list[float]]]


@dataclass(frozen=True)
class PendingMessage:
    message_id: int
    conversation_id: int
    text: str


class MeaningSearch:
    """The message vectors of one store, and ranking by them. Thread-safe (the store's lock)."""

    def __init__(self, store: Store, embedding_model: Callable[[str], bool]) -> None:
        """``embedding_model(model_id)``: whether that model is an encoder (no corrections)."""
        self.store = store
        self._is_encoder = embedding_model
        self._neutral: dict[str, np.ndarray] = {}
        self._checked: set[str] = set()  # models whose stored vectors are known to be of METHOD
        self._lock = threading.Lock()

    def pooling_for(self, model_id: str) -> str:
        """How ``model_id``'s token states are pooled into a vector (the embedder's job asks for it)."""
        return "mean" if self._is_encoder(model_id) else "last"

    # -- indexing (the background room) ---------------------------------------------------

    def pending(self, model_id: str, limit: int = INDEX_BATCH) -> list[PendingMessage]:
        """Messages with text that have no vector of ``model_id`` yet (or an outdated one), oldest first."""
        with self.store.reading() as conn:
            rows = conn.execute(
                f"SELECT m.id, m.conversation_id, m.content FROM messages AS m LEFT JOIN {TABLE} AS e "
                "ON e.message_id = m.id AND e.model_id = ? "
                "WHERE m.role IN ('user', 'assistant') AND trim(m.content) != '' "
                "AND (e.message_id IS NULL OR e.source_chars != length(m.content)) ORDER BY m.id LIMIT ?",
                [model_id, limit],
            ).fetchall()
        return [PendingMessage(int(r[0]), int(r[1]), str(r[2])) for r in rows]

    def index(self, model_id: str, messages: list[PendingMessage], embed: Embedder) -> int:
        """Embed ``messages`` with ``model_id`` and store their vectors; how many were stored."""
        if not messages:
            return 0
        worded = [m for m in messages if any(c.isalnum() for c in m.text)]
        try:
            embedded = self._embed(model_id, [m.text for m in worded], embed) if worded else []
        except (InvalidRequest, ContextLengthExceeded):
            embedded = [self._embed_or_blank(model_id, m, embed) for m in worded]
        by_id = {m.message_id: v for m, v in zip(worded, embedded, strict=True)}
        blank = np.zeros(len(embedded[0]) if embedded else self._dimensions(model_id, embed))
        vectors = [by_id.get(m.message_id, blank) for m in messages]
        now = time.time()
        rows = [(m.message_id, model_id, m.conversation_id, v.astype(np.float32).tobytes(), len(m.text), now)
                for m, v in zip(messages, vectors, strict=True)]
        with self.store.writing() as conn:
            conn.executemany(
                f"INSERT OR REPLACE INTO {TABLE} (message_id, model_id, conversation_id, vector, source_chars, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)", rows)
            # A message deleted while it was being embedded (the table's trigger ran before).
            conn.execute(f"DELETE FROM {TABLE} WHERE message_id NOT IN (SELECT id FROM messages)")
        return len(rows)

    def _embed_or_blank(self, model_id: str, message: PendingMessage, embed: Embedder) -> np.ndarray:
        """One message's vector; zeros (never related to anything, never tried again) when the
        model refuses it, so one odd message cannot stop the index for good."""
        try:
            [vector] = self._embed(model_id, [message.text], embed)
            return vector
        except (InvalidRequest, ContextLengthExceeded) as exc:
            log.info("message %d cannot be embedded for search: %s", message.message_id, exc)
            return np.zeros(self._dimensions(model_id, embed))

    def _dimensions(self, model_id: str, embed: Embedder) -> int:
        if self._is_encoder(model_id):
            return len(embed(model_id, ["a"])[0])
        return len(self._neutral_vector(model_id, embed))

    def indexed(self, model_id: str) -> int:
        with self.store.reading() as conn:
            return int(conn.execute(f"SELECT count(*) FROM {TABLE} WHERE model_id = ?", [model_id]).fetchone()[0])

    # -- searching ------------------------------------------------------------------------

    def related(self, query: str, model_id: str, embed: Embedder, limit: int = MAX_RELATED) -> list[tuple[int, float]]:
        """``(conversation_id, score)`` of the conversations closest in meaning to ``query``, best first."""
        if not self._is_encoder(model_id):
            self._drop_other_methods(model_id)  # before reading them: older vectors are not comparable
        ids, matrix = self._vectors(model_id)
        if not query.strip() or not len(ids):
            return []
        [q] = self._embed(model_id, [query], embed)
        if len(q) != matrix.shape[1]:
            # Embedded by an earlier file under this id: not comparable. Dropped, they are pending
            # again, and the background embeds them anew.
            self._forget_other_widths(model_id, len(q))
            return []
        scores = matrix @ q.astype(np.float32)
        floor = MIN_SCORE if self._is_encoder(model_id) else MIN_SCORE_LAST
        ranked: list[tuple[int, float]] = []
        for conversation_id in np.unique(ids):
            mine = scores[ids == conversation_id]
            best = float(mine.max())
            score = best + 0.5 * float(mine.mean())
            if (best if self._is_encoder(model_id) else score) >= floor:
                ranked.append((int(conversation_id), round(score, 4)))
        ranked.sort(key=lambda found: -found[1])
        return ranked[:limit]

    def _forget_other_widths(self, model_id: str, dimensions: int) -> None:
        with self.store.writing() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE model_id = ? AND length(vector) != ?", [model_id, dimensions * 4])

    def _vectors(self, model_id: str) -> tuple[np.ndarray, np.ndarray]:
        """Conversation ids and one unit vector per row, for every indexed message that still exists."""
        with self.store.reading() as conn:
            rows = conn.execute(
                f"SELECT e.conversation_id, e.vector FROM {TABLE} AS e JOIN messages AS m "
                "ON m.id = e.message_id WHERE e.model_id = ?", [model_id]).fetchall()
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
        # One width: a model file replaced under the same id may embed in another size.
        width = Counter(len(r[1]) for r in rows).most_common(1)[0][0]
        rows = [r for r in rows if len(r[1]) == width]
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        return ids, np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])

    def vectors_for(self, model_id: str, texts: list[str], embed: Embedder) -> list[np.ndarray]:
        """Unit vectors of ``texts`` as this room compares them (documents' passages use them too)."""
        return self._embed(model_id, texts, embed)

    def _embed(self, model_id: str, texts: list[str], embed: Embedder) -> list[np.ndarray]:
        clipped = [t.strip()[:MAX_CHARS] for t in texts]
        if self._is_encoder(model_id):
            return [np.asarray(v, dtype=np.float64) for v in embed(model_id, clipped)]
        self._drop_other_methods(model_id)
        neutral = self._neutral_vector(model_id, embed)
        vectors = embed(model_id, [WRAPPER.format(t) for t in clipped])
        return [_unit(np.asarray(v, dtype=np.float64) - neutral) for v in vectors]

    def _drop_other_methods(self, model_id: str) -> None:
        """Forget ``model_id``'s stored vectors (messages' and documents' passages') when they
        were made by another method than ``METHOD``: not comparable with the new ones, they are
        pending again and embedded anew. Checked once per model and process."""
        with self._lock:
            if model_id in self._checked:
                return
            self._checked.add(model_id)
        methods = dict(self.store.get_setting(METHOD_SETTING, {}) or {})
        if methods.get(model_id) == METHOD:
            return
        with self.store.writing() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE model_id = ?", [model_id])
            # Documents' passages (documents/passage_index.py) are compared through vectors_for too.
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'passage_vectors'").fetchone():
                conn.execute("DELETE FROM passage_vectors WHERE model_id = ?", [model_id])
        self.store.set_setting(METHOD_SETTING, {**methods, model_id: METHOD})
        log.info("search vectors of %s are made by %s now; the older ones will be embedded again", model_id, METHOD)

    def _neutral_vector(self, model_id: str, embed: Embedder) -> np.ndarray:
        with self._lock:
            known = self._neutral.get(model_id)
        if known is None:
            vectors = embed(model_id, [WRAPPER.format(p) for p in NEUTRAL_PHRASES])
            known = np.mean(np.asarray(vectors, dtype=np.float64), axis=0)
            with self._lock:
                self._neutral[model_id] = known
        return known


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector

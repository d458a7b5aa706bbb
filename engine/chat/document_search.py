"""Retrieval from documents that do not fit whole: the question's best passages, found by
keywords (SQLite FTS5, BM25) and by meaning (vectors of the search model, the one that
embeds messages for search), merged by reciprocal rank, and placed before the conversation
with their citations.

Reciprocal rank fusion (each list contributes 1/(60 + rank)) needs no calibration between
BM25 scores and cosines, so a passage that either ranking puts near the top comes through.
With no model to embed (or embedding failing), keywords alone rank.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np

from ..base import InglenookError
from ..documents import Document, DocumentLibrary, FoundPassage, PassageIndex
from ..store import Store
from .search import Embedder, MeaningSearch

log = logging.getLogger(__name__)

RRF_K = 60
TOP_PASSAGES = 4
EMBED_BATCH = 8

RETRIEVED_PREAMBLE = ("The user has attached documents too long to read whole; below are the passages "
                      "that best match the question. Answer from them and cite each passage you use by "
                      "its label in square brackets, e.g. [report.pdf, page 3].")


class DocumentSearch:
    def __init__(self, store: Store, meaning: MeaningSearch, search_model: Callable[[], str | None],
                 embed: Embedder) -> None:
        self.index = PassageIndex(store)
        self._library = DocumentLibrary(store)
        self._meaning = meaning
        self._search_model = search_model
        self._embed = embed

    def find(self, question: str, documents: Sequence[Document], k: int = TOP_PASSAGES) -> list[FoundPassage]:
        """The ``k`` passages of ``documents`` that best answer ``question``, best first."""
        if not documents:
            return []
        for document in documents:
            self._library.keep(document)  # passages name their document (kept once, by hash)
            self.index.ensure(document)
        hashes = [d.sha256 for d in documents]
        rankings = [self.index.keyword_ranking(question, hashes)]
        meaning = self._meaning_ranking(question, hashes)
        if meaning:
            rankings.append(meaning)
        fused: dict[int, float] = {}
        for ranking in rankings:
            for rank, passage_id in enumerate(ranking):
                fused[passage_id] = fused.get(passage_id, 0.0) + 1.0 / (RRF_K + rank + 1)
        best = sorted(fused, key=lambda pid: (-fused[pid], pid))[:k]
        return self.index.passages(best, [round(fused[pid], 5) for pid in best])

    def _meaning_ranking(self, question: str, hashes: list[str]) -> list[int]:
        model_id = self._search_model()
        if model_id is None:
            return []
        try:
            missing = self.index.unembedded(hashes, model_id)
            for start in range(0, len(missing), EMBED_BATCH):
                batch = missing[start:start + EMBED_BATCH]
                vectors = self._meaning.vectors_for(model_id, [text for _, text in batch], self._embed)
                self.index.store_vectors(model_id, [(pid, v) for (pid, _), v in zip(batch, vectors, strict=True)])
            ids, matrix = self.index.vectors(hashes, model_id)
            if not ids:
                return []
            [query] = self._meaning.vectors_for(model_id, [question], self._embed)
            if len(query) != matrix.shape[1]:
                return []
            scores = matrix @ np.asarray(query, dtype=np.float32)
            return [ids[i] for i in np.argsort(-scores, kind="stable")]
        except InglenookError as exc:  # no model can embed now: keywords still rank
            log.info("documents are searched by keywords only: %s", exc)
            return []


def passages_block(found: Sequence[FoundPassage]) -> str:
    parts = [RETRIEVED_PREAMBLE]
    for passage in found:
        parts.append(f"[{passage.citation()}]\n{passage.text}")
    return "\n\n".join(parts)

"""Documents in chats: which documents a conversation carries, and how they reach its prompt.

Documents that fit the model's context (with room for the conversation and the answer) go
first, whole; the others are searched, and the passages that best match the last question go
in their place. Collections are named sets of converted files a chat can attach together.
``ChatService`` takes these methods from ``DocumentsInChat``; the attributes below are the
service's, set in its ``__init__``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import InglenookError
from ..documents import (
    Added, CollectionFile, Document, DocumentLibrary, FoundPassage, PassageIndex, convert_file, with_documents,
)
from ..store import NOMINAL_AUTO_CONTEXT, Conversation, PrefixCache, Store
from .document_search import DocumentSearch, passages_block
from .images import message_text
from .search import MeaningSearch

if TYPE_CHECKING:
    from ..scheduling import Scheduler
    from .background import BackgroundWork

log = logging.getLogger(__name__)

# Documents placed whole: characters per token assumed (cautious), and the context kept free
# for the conversation and the answer; documents needing more are searched instead.
CHARS_PER_TOKEN = 3.0
ROOM_FOR_CHAT_TOKENS = 1024


class DocumentsInChat:
    """The chat service's documents: attached, placed whole or searched, and collections."""

    store: Store
    scheduler: Scheduler
    cache: PrefixCache | None
    background: BackgroundWork | None
    documents: DocumentLibrary
    # The passages each conversation's last turn used, when its documents were searched.
    passages_used: dict[int, list[FoundPassage]]
    context_of: Callable[[str], int]
    planned_context: Callable[[str], int] | None
    _document_search: DocumentSearch | None
    _default_model: Callable[[], Any]
    history: Callable[[Conversation], list[dict[str, Any]]]

    def attach_documents(self, conversation_id: int, documents: list[Document]) -> list[Document]:
        """Attach converted documents to a conversation (each once); returns all it has now."""
        self.store.get_conversation(conversation_id)  # ConversationNotFound before anything is kept
        self.documents.attach(conversation_id, documents)
        return self.documents.for_conversation(conversation_id)

    def attached_documents(self, conversation_id: int) -> list[Document]:
        return self.documents.for_conversation(conversation_id)

    def detach_document(self, conversation_id: int, sha256: str) -> None:
        self.documents.detach(conversation_id, sha256)

    def _with_documents(self, conversation: Conversation, model_id: str) -> tuple[list[dict[str, Any]], int]:
        """The turn's messages with the conversation's documents, and how many lead them.

        Documents that fit (with room for the conversation and the answer) go first, whole, in
        a block that depends on them alone: every chat with the same documents starts with the
        same tokens, which the prefix cache keeps once. Documents that do not fit are searched:
        the passages that best match the last question go first instead (``passages_used``)."""
        history = self.history(conversation)
        documents = self.documents.for_conversation(conversation.id)
        self.passages_used.pop(conversation.id, None)
        if not documents or self._fits_whole(documents, model_id):
            return with_documents(history, documents)
        question = next((message_text(m) for m in reversed(history) if m["role"] == "user"), "")
        found = self.document_search().find(question, documents)
        self.passages_used[conversation.id] = found
        return [{"role": "system", "content": passages_block(found)}, *history], 0

    def document_placement(self, documents: list[Document], model_id: str | None) -> str:
        """"whole" when ``documents`` go into a chat with ``model_id`` whole, else "searched"."""
        if not documents or self._fits_whole(documents, model_id or self._default_model()):
            return "whole"
        return "searched"

    def _fits_whole(self, documents: list[Document], model_id: str) -> bool:
        context = self.context_of(model_id)
        # About 3 characters a token is cautious for prose (4 is usual for English) and
        # right for code and tables; the rest of the context is the conversation's and the answer's.
        return sum(len(d.text) for d in documents) / CHARS_PER_TOKEN <= context - ROOM_FOR_CHAT_TOKENS

    def _loaded_context(self, model_id: str) -> int:
        """The context ``model_id`` answers in: as loaded, else the one it will load with
        (``planned_context``, which the engine sets): a document asked about before the
        model is loaded is placed as it will be read, not against a nominal 4,096 tokens."""
        for model in self.scheduler.loaded_models():
            if model.record.id == model_id and not model.options.embeddings:
                return int(model.n_ctx)
        if self.planned_context is not None:
            try:
                return self.planned_context(model_id)
            except (InglenookError, OSError) as exc:  # not installed, or a header that cannot be read
                log.info("no planned context for %s: %s", model_id, exc)
        return NOMINAL_AUTO_CONTEXT

    def document_search(self) -> DocumentSearch:
        """Passage search over documents, by keywords and by the search model's vectors."""
        if self._document_search is None:
            background = self.background
            if background is not None:
                self._document_search = DocumentSearch(self.store, background.search, background.search_model,
                                                       background.embed_now)
            else:  # no background room (some tests, tools): keywords only
                self._document_search = DocumentSearch(self.store, MeaningSearch(self.store, lambda _id: True),
                                                       lambda: None, lambda _id, _texts: [])
        return self._document_search

    def add_to_collection(self, collection: str, paths: list[Path]) -> list[Added]:
        """Add files to a named collection (created if new), converting only changed ones."""
        return self.documents.add_files(collection, paths, convert_file)

    def collections(self) -> dict[str, list[CollectionFile]]:
        return self.documents.collections()

    def collection_documents(self, collection: str) -> list[Document]:
        return self.documents.collection_documents(collection)

    def remove_from_collection(self, collection: str, paths: list[Path] | None = None) -> int:
        """Remove files from a collection, or the whole collection when ``paths`` is empty.
        Documents in no collection now lose their passages, vectors and saved prompt states
        (a chat that still has one attached reads it again)."""
        removed, uncollected = self.documents.remove_collected(collection, paths or [])
        PassageIndex(self.store).forget(uncollected)
        if self.cache is not None:
            self.cache.forget_documents(uncollected)
        return removed

"""Retrieval from documents that do not fit whole (issue 30): passages by structure, FTS5
keywords and the search model's vectors (the starter model's embeddings, real GGUF), merged
by rank. Quality is measured as recall@k on a document with planted facts, each in exactly
one passage — not the model's answers."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np

from inglenook.engine.core.engine import Engine
from inglenook.engine.documents import Document, convert_file

TOPICS = ["the weather on the coast", "the price of wool", "the railway timetable", "the village fete",
          "repairs to the church roof", "the school's new teacher", "the fishing season", "the town band"]
# (the planted fact, a question whose answer is only in it)
FACTS = [
    ("The lighthouse keeper's dog is named Pepper.", "What is the name of the lighthouse keeper's dog?"),
    ("The treasury vault combination is 4417.", "What is the combination of the treasury vault?"),
    ("Marguerite planted exactly ninety tulips beside the granary.", "How many tulips did Marguerite plant?"),
    ("The ferry to Skellig leaves at half past six on Thursdays.", "When does the ferry to Skellig leave?"),
    ("Our blacksmith forged a bronze weathervane shaped like a heron.", "What shape is the bronze weathervane?"),
    ("The oldest tree in the parish is a yew planted in 1473.", "When was the parish's oldest tree planted?"),
]


def planted_document(folder: Path, pages: int = 12) -> tuple[Document, dict[str, int]]:
    """A long Markdown report; returns it and the page each fact sits on."""
    rng = random.Random(5)
    where = dict(zip([f for f, _ in FACTS], rng.sample(range(1, pages + 1), len(FACTS)), strict=True))
    parts = []
    for page in range(1, pages + 1):
        lines = [f"## Page {page}", ""]
        for _ in range(3):
            topic = rng.choice(TOPICS)
            lines.append(" ".join(f"This paragraph reports on {topic}, as discussed at meeting {rng.randrange(99)}."
                                  for _ in range(6)))
            lines.append("")
        for fact, on_page in where.items():
            if on_page == page:
                lines.insert(3, fact)
        parts.append("\n".join(lines))
    (folder / "parish.md").write_text("\n\n".join(parts), encoding="utf-8")
    return convert_file(folder / "parish.md"), where


def test_recall_at_4_on_planted_facts(home: Path, tmp_path: Path) -> None:
    document, where = planted_document(tmp_path)
    with Engine() as engine:
        search = engine.chats.document_search()
        hits = 0
        for fact, question in FACTS:
            found = search.find(question, [document], k=4)
            assert len(found) == 4
            hits += any(fact in p.text for p in found)
            top = next(p for p in found if fact in p.text) if any(fact in p.text for p in found) else None
            if top is not None:
                assert top.label == f"page {where[fact]}"  # the citation names the fact's page
        assert hits == len(FACTS)  # recall@4 = 1.0
        # Vectors were stored for every passage, by the search model, and are reused.
        model_id = engine.chats.background.search_model()
        assert model_id is not None
        assert search.index.unembedded([document.sha256], model_id) == []


def test_a_document_too_long_for_the_context_is_searched_and_cited(home: Path, tmp_path: Path) -> None:
    document, where = planted_document(tmp_path)
    with Engine() as engine:
        engine.chats.context_of = lambda _model_id: 2048  # the report is ~2,500 tokens: it cannot fit
        conversation = engine.chats.new_conversation()
        engine.chats.attach_documents(conversation.id, [document])
        turn = engine.chats.send(conversation.id, "When does the ferry to Skellig leave?", max_tokens=8,
                                 temperature=0.0)
        turn.wait()
        used = engine.chats.passages_used[conversation.id]
        fact = FACTS[3][0]
        assert any(fact in p.text and p.citation() == f"parish.md, page {where[fact]}" for p in used)
        assert turn.finished is not None and turn.finished.usage.prompt_tokens < 2048

        # Deleting the documents deletes their passages, keyword entries and vectors.
        engine.chats.detach_document(conversation.id, document.sha256)
        engine.chats.documents.remove_unused()
    db = sqlite3.connect(home / "data" / "inglenook.db")
    try:
        for table in ("documents", "document_passages", "document_passages_fts", "passage_vectors"):
            assert db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
    finally:
        db.close()


def test_an_installed_encoder_embeds_the_passages(home: Path, tmp_path: Path) -> None:
    """The encoder path: with an embedding model installed (a tiny BERT GGUF written here,
    loaded by llama.cpp's BERT graph), the smallest encoder is the search model, and the
    passages' vectors and the question's are its own (its width, under its id), not the chat
    model's; keywords and meaning still merge into four cited passages."""
    from tests.encoder_writer import write_encoder

    document, _where = planted_document(tmp_path, pages=6)
    encoder_path = write_encoder(tmp_path / "tiny-encoder-F32.gguf")
    bigger_path = write_encoder(tmp_path / "wide-encoder-F32.gguf", width=64, ffn=128, name="Wide Test Encoder")
    with Engine() as engine:
        encoder = engine.registry.register_file(encoder_path)
        engine.registry.register_file(bigger_path)
        assert engine.chats.background is not None
        assert engine.chats.background.search_model() == encoder.id  # the smallest encoder
        search = engine.chats.document_search()
        found = search.find("What is the name of the lighthouse keeper's dog?", [document], k=4)
        assert len(found) == 4 and all(p.citation().startswith("parish.md, page ") for p in found)
        assert search.index.unembedded([document.sha256], encoder.id) == []
        ids, vectors = search.index.vectors([document.sha256], encoder.id)
        assert len(ids) == search.index.ensure(document) and vectors.shape[1] == 32  # the encoder's width
        assert np.isfinite(vectors).all() and np.abs(vectors).sum(axis=1).min() > 0
        chat_model = engine.chats.default_model_id()
        assert search.index.vectors([document.sha256], chat_model)[0] == []  # the chat model embedded nothing


def test_a_document_asked_about_before_the_model_loads_is_placed_against_its_context(home: Path,
                                                                                      tmp_path: Path) -> None:
    """Placement uses the context the model will load with, not a nominal 4,096 tokens: a
    document that fits SmolLM2's 8,192 goes in whole while the model is not loaded yet."""
    from inglenook.engine.store import NOMINAL_AUTO_CONTEXT

    document, _where = planted_document(tmp_path, pages=14)
    tokens = len(document.text) / 3  # the placement's estimate: 3 characters a token
    assert NOMINAL_AUTO_CONTEXT - 1024 < tokens < 8192 - 1024  # searched against 4,096, whole against 8,192
    with Engine() as engine:
        model = engine.default_model_id()
        engine.update_settings(model_context={model: 8192})  # the context it will load with, whatever the machine
        assert not engine.scheduler.loaded_models()
        assert engine.planned_context(model) == 8192
        assert engine.chats.document_placement([document], model) == "whole"
        engine.update_settings(model_context={model: 4096})
        assert engine.chats.document_placement([document], model) == "searched"

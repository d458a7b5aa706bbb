"""A document is read once (issue 30): its block's prefill is a content-addressed prefix in
the prompt cache, restored by a second chat with the same document and after a restart, and
the answer is the same greedy tokens as a cold run. Real SmolLM2, real llama.cpp states."""

from __future__ import annotations

from pathlib import Path

from inglenook.engine.base.generation_events import Usage
from inglenook.engine.core.engine import Engine
from inglenook.engine.documents import Document, convert_file, documents_block
from inglenook.engine.runtime.slots import FA_TILE_ROWS
from inglenook.engine.store.cache_keys import BLOCK
from inglenook.engine.store.statefile import SUFFIX

from ..document_files import report_pdf
from ..prefix_rule import alignment, least_read_again

SETTINGS = {"max_tokens": 8, "temperature": 0.0, "seed": 1}


def block_tokens(engine: Engine, document: Document) -> int:
    """Tokens of the documents' block alone (with the template's frame around it)."""
    (model,) = engine.scheduler.loaded_models()
    return len(model.chat_tokens([{"role": "system", "content": documents_block([document])}]))


def ask(engine: Engine, document: Document, question: str, use_cache: bool = True) -> tuple[str, Usage]:
    conversation = engine.chats.new_conversation(system_prompt="Answer in a few words.")
    engine.chats.attach_documents(conversation.id, [document])
    turn = engine.chats.send(conversation.id, question, use_cache=use_cache, **SETTINGS)
    message = turn.wait()
    assert message is not None and turn.finished is not None
    return message.content, turn.finished.usage


def covers_the_document(cached: int, block: int, prompt: int) -> bool:
    """A restored prefix holds the block up to its last aligned position, less what every
    prompt reads again (tests/prefix_rule.py): within a block's and a tile's length of it."""
    return min(block, prompt - least_read_again()) - BLOCK - alignment() <= cached <= block


def test_a_document_is_read_once_across_chats_and_restarts(home: Path, tmp_path: Path) -> None:
    document = convert_file(report_pdf(tmp_path / "report.pdf", n_pages=4))
    states = home / "cache" / "states"
    with Engine() as engine:
        first_answer, first = ask(engine, document, "What is the title of section 2?")
        assert first.cached_tokens == 0
        block = block_tokens(engine, document)
        assert block > 300  # the document is most of the prompt
        engine.cache.flush()
        assert len(list(states.glob(f"pfx-*{SUFFIX}"))) == 1  # the document's own prefix

        # A second chat with the same document and another question: the document is not read again.
        second_answer, second = ask(engine, document, "Which region sold the most units?")
        assert covers_the_document(second.cached_tokens, block, second.prompt_tokens), (second, block)
        cold_answer, cold = ask(engine, document, "Which region sold the most units?", use_cache=False)
        assert cold.cached_tokens == 0 and cold_answer == second_answer
        engine.cache.flush()
        assert len(list(states.glob(f"pfx-*{SUFFIX}"))) == 1  # saved once, not once per chat

    with Engine() as engine:  # a restart: a new engine on the same data folder
        again_answer, again = ask(engine, document, "What is the title of section 2?")
        assert covers_the_document(again.cached_tokens, block, again.prompt_tokens), (again, block)
        assert again_answer == first_answer


def shared_tokens(engine: Engine, document: Document, system_prompt: str, question: str) -> int:
    """The prompt's leading tokens that are the documents' block (the scheduler's measure:
    the block rendered alone, as far as it agrees with the whole prompt)."""
    (model,) = engine.scheduler.loaded_models()
    block = {"role": "system", "content": documents_block([document])}
    alone = model.chat_tokens([block])
    prompt = model.chat_tokens([block, {"role": "system", "content": system_prompt}, {"role": "user", "content": question}])
    return next(i for i, (a, b) in enumerate(zip(alone, prompt, strict=False)) if a != b)


def test_a_second_chat_reads_only_what_follows_the_document(home: Path, tmp_path: Path) -> None:
    """The second chat takes every token of the documents' block from the first chat's state
    but the block's last alignment group (under ``prefill_align`` tokens; none for SmolLM2 on x86): it reads the chat's own
    system prompt and question and those few tokens, not the ``canonical_rows`` (64) that the
    rule for a plain prompt always re-reads (a question after a document is shorter than
    that). Cold or restored, the prompt is read in two parts, so the answers agree."""
    document = convert_file(report_pdf(tmp_path / "report.pdf", n_pages=2))
    with Engine() as engine:
        ask(engine, document, "What is the title of section 2?")
        shared = shared_tokens(engine, document, "Answer in a few words.", "Sales?")
        second_answer, second = ask(engine, document, "Sales?")
        assert second.cached_tokens == shared - shared % alignment(), (second, shared)
        assert second.prompt_tokens - shared < FA_TILE_ROWS  # the rest alone: shorter than a canonical chunk
        cold_answer, cold = ask(engine, document, "Sales?", use_cache=False)
        assert cold.cached_tokens == 0 and cold_answer == second_answer


def test_a_chat_without_documents_keeps_no_shared_prefix(home: Path) -> None:
    with Engine() as engine:
        conversation = engine.chats.new_conversation(system_prompt="You are terse. " * 40)
        engine.chats.send(conversation.id, "Hello?", **SETTINGS).wait()
        engine.cache.flush()
    assert not list((home / "cache" / "states").glob(f"pfx-*{SUFFIX}"))

"""Documents (issue 30): a document is read once.

Times to first token for questions about a ~6,000-token document (a generated PDF, converted
by the engine): the first question (the document is prefilled), a question in a second chat
with the same document (its prefill restored from the prompt cache), and a question after a
restart (a new Engine on the same data folder: restored from disk). The model is loaded
before each timed question, so the times are prefill and first decode, not loading. Each
restored answer is checked against a cold run of the same question (same greedy tokens).
Also: conversion speed of a 100-page generated PDF through the engine's conversion worker
(process start included) beside pypdfium2's own command line on the same file, and indexing
speed: passages and their FTS5 keyword index for all 100 pages, and the search model's
vectors for the first pages (embedding is the slow part; it runs once per document, on the
first searched question). Prints JSON.

    python benchmarks/documents.py [--pages 5] [--context 8192]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from inglenook.engine.core.engine import Engine
from inglenook.engine.documents import Document, convert_file, documents_block
from inglenook.engine.store.paths import Paths

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.document_files import pdf_bytes  # the tests' PDF writer, from the checkout

SETTINGS = {"max_tokens": 4, "temperature": 0.0, "seed": 1}
PLACES = ["Harbour", "Mill", "Orchard", "Quarry", "Forge", "Bakery", "Dairy", "Brewery", "Tannery", "Smithy"]


def long_pdf(path: Path, pages: int, seed: int = 7) -> Path:
    """A report of ``pages`` pages of varied sentences (about 1,200 tokens a page)."""
    rng = random.Random(seed)
    out = []
    for number in range(1, pages + 1):
        lines = [(72.0, 740.0, f"Section {number}: the {rng.choice(PLACES)} district")]
        for k in range(40):
            place, other = rng.sample(PLACES, 2)
            lines.append((72.0, 720.0 - 16 * k, f"In {1900 + rng.randrange(120)} the {place} sent "
                          f"{rng.randrange(10, 999)} crates to the {other}, priced at {rng.randrange(2, 90)} pence."))
        out.append(lines)
    path.write_bytes(pdf_bytes(out))
    return path


def ask(engine: Engine, document: Document, question: str, use_cache: bool = True) -> dict[str, Any]:
    conversation = engine.chats.new_conversation(system_prompt="Answer briefly.")
    engine.chats.attach_documents(conversation.id, [document])
    turn = engine.chats.send(conversation.id, question, use_cache=use_cache, **SETTINGS)
    message = turn.wait()
    finished = turn.finished
    assert message is not None and finished is not None
    return {"ttft_s": round(finished.timings.ttft_s, 4), "prompt_tokens": finished.usage.prompt_tokens,
            "cached_tokens": finished.usage.cached_tokens, "answer": message.content}


def warm(engine: Engine) -> None:
    """Load the model (and run one tiny turn) so the timed questions measure reading, not loading."""
    conversation = engine.chats.new_conversation()
    engine.chats.send(conversation.id, "Hi", max_tokens=1, temperature=0.0).wait()


def open_engine(context: int) -> Engine:
    engine = Engine(Paths.default().ensure(), sequences=1)
    engine.override_settings(context_size=context)
    return engine


def conversion(folder: Path) -> tuple[Document, dict[str, Any]]:
    pdf = long_pdf(folder / "hundred.pdf", 100, seed=11)
    started = time.perf_counter()
    document = convert_file(pdf)
    ours = time.perf_counter() - started
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pypdfium2", "extract-text", str(pdf)], capture_output=True,
                          text=True, check=False)
    theirs = time.perf_counter() - started
    return document, {
        "pages": document.page_count, "characters": len(document.text),
        "inglenook_worker_s": round(ours, 3), "inglenook_pages_per_s": round(100 / ours, 1),
        "pypdfium2_cli_s": round(theirs, 3), "pypdfium2_cli_pages_per_s": round(100 / theirs, 1),
        "pypdfium2_cli_ok": done.returncode == 0,
        "note": "both times include starting a Python process (the worker's is one per file)",
    }


def indexing(engine: Engine, document: Document, embedded_pages: int) -> dict[str, Any]:
    """Passages + FTS5 for the whole document; vectors (the search model's) for its first pages."""
    search = engine.chats.document_search()
    started = time.perf_counter()
    passages = search.index.ensure(document)
    keywords_s = time.perf_counter() - started
    first = Document(name="first-pages.pdf", kind=document.kind, sha256="first-pages-" + document.sha256[:16],
                     size=0, text="\n\n".join(f"## Page {i}\n\n{page}" for i, page in
                                                enumerate(document.pages[:embedded_pages], 1)),
                     pages=document.pages[:embedded_pages])
    started = time.perf_counter()
    search.find("Which district sent crates?", [first])  # embeds every passage, then the question
    vectors_s = time.perf_counter() - started
    return {
        "passages": passages, "keywords_s": round(keywords_s, 3),
        "keywords_pages_per_s": round(document.page_count / keywords_s, 1),
        "search_model": engine.chats.background.search_model() if engine.chats.background else None,
        "embedded_pages": embedded_pages, "vectors_s": round(vectors_s, 3),
        "vectors_pages_per_s": round(embedded_pages / vectors_s, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5, help="pages of the timed document (~1,200 tokens each)")
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--embedded-pages", type=int, default=5, help="pages of the 100 whose vectors are timed")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="inglenook-bench-docs-") as folder_name:
        folder = Path(folder_name)
        os.environ["INGLENOOK_HOME"] = str(folder / "home")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        document = convert_file(long_pdf(folder / "report.pdf", args.pages))
        with open_engine(args.context) as engine:
            warm(engine)
            (model,) = engine.scheduler.loaded_models()
            document_tokens = len(model.chat_tokens([{"role": "system", "content": documents_block([document])}]))
            first = ask(engine, document, "What did the Mill send in the first section?")
            second = ask(engine, document, "Which district is section 3 about?")
            engine.cache.flush()
            cold_second = ask(engine, document, "Which district is section 3 about?", use_cache=False)
        with open_engine(args.context) as engine:
            warm(engine)
            restart = ask(engine, document, "How much were the Quarry's crates?")
            cold_restart = ask(engine, document, "How much were the Quarry's crates?", use_cache=False)
            hundred, converted = conversion(folder)
            indexed = indexing(engine, hundred, args.embedded_pages)
        result = {
            "model": model.record.id,
            "document": {"pages": document.page_count, "characters": len(document.text), "tokens": document_tokens},
            "first_question": first,
            "second_chat": second,
            "after_restart": restart,
            "cold_reference_ttft_s": {"second_chat": cold_second["ttft_s"], "after_restart": cold_restart["ttft_s"]},
            "speedup": {
                "second_chat": round(first["ttft_s"] / max(second["ttft_s"], 1e-9), 1),
                "after_restart": round(first["ttft_s"] / max(restart["ttft_s"], 1e-9), 1),
            },
            "same_answer_as_cold": {"second_chat": second["answer"] == cold_second["answer"],
                                    "after_restart": restart["answer"] == cold_restart["answer"]},
            "conversion_100_pages": converted,
            "indexing_100_pages": indexed,
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

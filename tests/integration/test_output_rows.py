"""A chat context asks llama.cpp for the logits rows a step reads, not a whole micro-batch's
(``model_loading.output_rows``): its compute buffer is sized for those, the fit estimate
counts the same, and the fullest step (every sequence verifying a draft) still runs."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

import pytest

from inglenook.engine.base.generation_events import Chunk
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.batch import ALL, LAST, BatchRow
from inglenook.engine.runtime.fit import ModelShape, compute_bytes
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions, output_rows
from inglenook.engine.runtime.speculative import MAX_DRAFT, RowCost

from .conftest import GPU_LAYERS, record_for

MIB = 1024 * 1024
COMPUTE_BUFFER = re.compile(r"CPU compute buffer size\s*=\s*([0-9.]+) MiB")


def compute_buffer_mib(path: Path, model_id: str, options: LoadOptions, caplog: pytest.LogCaptureFixture) -> float:
    """The CPU compute buffer llama.cpp reports when it loads ``path`` with ``options``."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="inglenook.llama"):
        LoadedModel(record_for(path, model_id), options).close()
    sizes = [float(m.group(1)) for r in caplog.records if (m := COMPUTE_BUFFER.search(r.getMessage()))]
    assert sizes, "llama.cpp reported no compute buffer"
    return sizes[-1]


def test_a_chat_context_holds_a_steps_logits_not_a_micro_batchs(gemma_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # gemma-3-270m's 262,144-token vocabulary: a 512-row micro-batch's logits are 512 MiB.
    chat = LoadOptions(context_size=1024, gpu_layers=0, parallel=2, speculative="lookup")
    rows = output_rows(chat, 2)
    assert rows == 2 * (1 + MAX_DRAFT)
    every = compute_buffer_mib(gemma_path, "gemma-3-270m:q4_k_m", LoadOptions(context_size=1024, gpu_layers=0,
                                                                               parallel=2, every_logit=True), caplog)
    asked = compute_buffer_mib(gemma_path, "gemma-3-270m:q4_k_m", chat, caplog)
    shape = ModelShape.from_gguf(read_gguf(gemma_path))
    logits_row_mib = shape.n_vocab * 4 / MIB  # 1 MiB
    # What the smaller buffer saves is the logits of the rows no step asks for.
    assert every - asked == pytest.approx((512 - rows) * logits_row_mib, rel=0.02), (every, asked)
    # The fit estimate counts what llama.cpp allocates, from above and within its graph margin.
    estimate = compute_bytes(shape, 1024, 512, True, rows) / MIB
    assert asked <= estimate <= asked + 64, (asked, estimate)
    assert every <= compute_bytes(shape, 1024, 512, True) / MIB <= every + 64


def test_two_sequences_verifying_drafts_in_one_step_answer_as_each_alone(smollm2_path: Path) -> None:
    # The most rows a chat step asks for: both sequences' fed token and a draft. Prompts that
    # end by copying their own text out again, so that prompt lookup drafts long runs.
    model = LoadedModel(record_for(smollm2_path, "smollm2-135m-instruct:q4_1"),
                        LoadOptions(context_size=1024, gpu_layers=GPU_LAYERS, parallel=2, speculative="lookup"))
    model.row_cost = RowCost(per_row=0.0, base=0.0, fixed=True)  # drafts always pay
    try:
        texts = ["".join(f"Ship {i} passed the lighthouse at {i % 12 + 1} o'clock.\n" for i in range(n))
                 for n in (14, 18)]
        prompts = [model.tokenize(f"The harbour log.\n\n{text}\nThe harbour log, copied out again:\n\n{text[:40]}")
                   for text in texts]
        greedy = SamplingParams(temperature=0.0, max_tokens=96)
        alone = [[t for e in model.generate(p, greedy, reuse_kv=False) if isinstance(e, Chunk) for t in e.token_ids]
                 for p in prompts]

        asked: list[int] = []
        fill = model.decoder.fill

        def counting_fill(rows: list[BatchRow]) -> list[int]:
            asked.append(sum(len(r.tokens) if r.logits == ALL else int(r.logits == LAST) for r in rows))
            return fill(rows)

        model.decoder.fill = counting_fill  # type: ignore[method-assign]
        sequences = [model.open_sequence(p, greedy, threading.Event(), time.perf_counter(), reuse_kv=False,
                                         slot=model.slots[i]) for i, p in enumerate(prompts)]
        together: list[list[int]] = [[], []]
        while not all(s.done for s in sequences):
            model.step(sequences, model.options.batch_size)
            for answer, sequence in zip(together, sequences):
                answer += [t for e in sequence.drain() if isinstance(e, Chunk) for t in e.token_ids]
        for sequence in sequences:
            model.release(sequence)
        assert together == alone
        # Steps asked for both sequences' drafts at once, never more rows than the context holds.
        assert 2 + 2 < max(asked) <= output_rows(model.options, 2)
    finally:
        model.close()

"""Speculative decoding and shared prefills with the real starter model (SmolLM2-135M).

Prompt lookup and a draft model (SmolLM2 drafting for itself: the same vocabulary, so
nearly every draft is kept) must leave greedy output as plain decoding makes it; sampled
output must keep obeying its grammar; a sequence whose drafts keep failing stops drafting;
a draft model of another vocabulary (gemma-3) is refused; and ``n`` choices of one prompt
prefill it once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.lab.backend import NumpyBackend
from inglenook.engine.runtime.batch import LAST, BatchRow
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.speculative import RowCost
from inglenook.engine.text import gbnf
from inglenook.engine.text.json_grammar import grammar_for_schema
from tests.integration.conftest import GPU_LAYERS, record_for
from tests.integration.test_cli import STARTER

SMOLLM2_ID = "smollm2-135m-instruct:q4_1"
CODE = (
    "def add(values, extra):\n"
    "    total = 0\n"
    "    for value in values:\n"
    "        total += value\n"
    "    return total + extra\n"
)
GROUNDED = [{"role": "user", "content": f"Repeat this code exactly, renaming `values` to `items`:\n\n{CODE}"}]
FREE_FORM = [{"role": "user", "content": "Write a short story about a lighthouse keeper who finds a bottle."}]
TYPOS = ("The lighthouse stood on a rock at the edge of the bay. Every night the keepr climbed the stairs, lit the "
         "lamp and watched the ships pass. In winter the storms came from the north and the waves broke over the "
         "rocks, but the light never went out. The village below relied on it, and the fishermen said that as long "
         "as the lamp burned they would always find their way home. One morning the keepr found a bottle wedged "
         "between two stones, with a letter inside.")
QUOTE = [{"role": "user", "content": f"Fix the spelling in this text and return it unchanged otherwise:\n\n{TYPOS}"}]
# An answer to QUOTE as SmolLM2 writes one: both typos fixed, three commas added.
EDITED = ("The lighthouse stood on a rock at the edge of the bay. Every night the keeper climbed the stairs, lit the "
          "lamp and watched the ships pass. In winter, the storms came from the north and the waves broke over the "
          "rocks, but the light never went out. The village below relied on it, and the fishermen said that as long "
          "as the lamp burned, they would always find their way home. One morning, the keeper found a bottle wedged "
          "between two stones, with a letter inside.")


# Whether a draft pays depends on what a batch row costs on the machine at that moment; the
# tests fix it (free rows) so what they check never depends on timing.
FREE_ROWS = RowCost(per_row=0.0, base=0.0, fixed=True)


def load(path: Path, **options: object) -> LoadedModel:
    model = LoadedModel(record_for(path, SMOLLM2_ID), LoadOptions(context_size=1024, gpu_layers=GPU_LAYERS, **options))
    model.row_cost = FREE_ROWS
    return model


@pytest.fixture(scope="module")
def lookup(smollm2_path: Path) -> Iterator[LoadedModel]:
    model = load(smollm2_path, speculative="lookup")
    yield model
    model.close()


def run(model: LoadedModel, messages: list[dict], sampling: SamplingParams) -> tuple[list[int], str, Finished]:
    tokens: list[int] = []
    parts: list[str] = []
    finished = None
    for event in model.generate(model.chat_tokens(messages), sampling, reuse_kv=False):
        if isinstance(event, Chunk):
            tokens += event.token_ids
            parts.append(event.text)
        else:
            finished = event
    assert isinstance(finished, Finished)
    return tokens, "".join(parts), finished


def test_lookup_keeps_greedy_output_and_accepts_drafts(smollm2: LoadedModel, lookup: LoadedModel) -> None:
    greedy = SamplingParams(temperature=0.0, max_tokens=48)
    plain, _, plain_finished = run(smollm2, GROUNDED, greedy)
    drafted, text, finished = run(lookup, GROUNDED, greedy)
    assert drafted == plain
    assert "def add" in text
    assert plain_finished.timings.draft_n == 0
    assert finished.timings.draft_n_accepted > 0
    assert finished.timings.draft_n >= finished.timings.draft_n_accepted


def test_sampled_output_with_lookup_still_follows_its_grammar(lookup: LoadedModel) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
              "required": ["name", "count"]}
    record = '{"name": "lighthouse", "count": 3}'
    messages = [{"role": "user", "content": f"Repeat this JSON exactly: {record}"}]
    for seed in (1, 2, 3):
        sampling = SamplingParams(temperature=0.8, seed=seed, max_tokens=40, grammar=grammar_for_schema(schema))
        _, text, finished = run(lookup, messages, sampling)
        value = json.loads(text)
        assert isinstance(value["name"], str) and isinstance(value["count"], int)
        assert finished.timings.draft_n > 0


def test_a_sequence_whose_drafts_fail_stops_drafting(lookup: LoadedModel) -> None:
    prompt = lookup.chat_tokens(FREE_FORM)
    sequence = lookup.open_sequence(prompt, SamplingParams(temperature=0.0, max_tokens=160), threading.Event(),
                                    time.perf_counter(), reuse_kv=False, slot=lookup.slots[0])
    control = sequence.control
    assert control is not None
    drafted_while_paused = 0
    paused_steps = 0
    try:
        while not sequence.done:
            paused, before = not control.active, control.drafted
            lookup.step([sequence], lookup.options.batch_size)
            if paused:
                paused_steps += 1
                drafted_while_paused += control.drafted - before
    finally:
        lookup.release(sequence)
    assert control.drafted > control.accepted * 2  # a story is not its prompt: most drafts fail
    assert paused_steps > 0 and drafted_while_paused == 0


# Rows priced as SmolLM2 on 2 CPU cores prices them (a step with k draft rows costs
# 1.75 + 0.37 k plain steps), fixed, so the count below does not depend on the machine's load.
CPU_ROWS = RowCost(per_row=0.37, base=0.75, fixed=True)


def test_an_answer_that_copies_its_input_through_edits_drafts_most_of_it(smollm2_path: Path) -> None:
    # The answer returns the paragraph with the typo fixed twice and three commas added: the
    # lookup must follow the copy through those edits and draft long. The answer is held to
    # that text by a grammar: which edits SmolLM2 chooses by itself differs between CPUs (the
    # jittered pass of issue 39 found an answer with more commas and a sentence split, on
    # which any lookup drafts less), and what this tests is the cursor, not the model's choice.
    # Measured in plain-step units under CPU_ROWS: 1.32 tokens per unit, the same on every CPU
    # variant and jitter seed tried (the drafts and their verification depend only on tokens);
    # before the cursor and the fixed row price the lookup re-found its place by n-grams after
    # each edit and drafted short (1.26 on the model's own answer then).
    lookup = load(smollm2_path, speculative="lookup")
    try:
        copied_with_edits(lookup)
    finally:
        lookup.close()


def copied_with_edits(lookup: LoadedModel) -> None:
    answer = SamplingParams(temperature=0.0, max_tokens=200, grammar="root ::= " + gbnf.literal(EDITED))
    sequence = lookup.open_sequence(lookup.chat_tokens(QUOTE), answer,
                                    threading.Event(), time.perf_counter(), reuse_kv=False, slot=lookup.slots[0])
    control = sequence.control
    assert control is not None
    lookup.row_cost = CPU_ROWS
    units = 0.0
    try:
        while not sequence.done:
            drafted = control.drafted
            lookup.step([sequence], lookup.options.batch_size)
            rows = control.drafted - drafted
            units += 1.0 + (CPU_ROWS.extra(rows) if rows else 0.0)
    finally:
        lookup.row_cost = FREE_ROWS
        lookup.release(sequence)
    [finished] = [e for e in sequence.drain() if isinstance(e, Finished)]
    assert finished.finish_reason == "stop"  # the whole edited text, ended by its grammar
    tokens = sequence.usage.completion_tokens
    assert tokens > 80 and control.accepted > 0.75 * tokens
    assert tokens / units > 1.3


def test_a_draft_model_of_the_same_vocabulary_keeps_greedy_output(smollm2: LoadedModel, smollm2_path: Path) -> None:
    greedy = SamplingParams(temperature=0.0, max_tokens=32)
    plain, _, _ = run(smollm2, GROUNDED, greedy)
    model = load(smollm2_path, speculative="draft", draft_model=record_for(smollm2_path, SMOLLM2_ID))
    try:
        drafted, _, finished = run(model, GROUNDED, greedy)
    finally:
        model.close()
    assert drafted == plain
    # The model drafting for itself: nearly every draft is what it then decides.
    assert finished.timings.draft_n_accepted >= 0.8 * finished.timings.draft_n > 0


def test_a_sliding_window_model_drafts_and_its_cache_survives_rejected_drafts(gemma_path: Path) -> None:
    # gemma-3 attends through a 512-token window in most layers, and llama.cpp reuses cells
    # that fall out of it. Drafts move positions on and rejected ones are removed: after a
    # generation well past the window, the cache must still predict as a full prefill does.
    # every_logit: the full prefill below reads the logits after every position.
    model = LoadedModel(record_for(gemma_path, "gemma-3-270m:q4_k_m"),
                        LoadOptions(context_size=1024, gpu_layers=GPU_LAYERS, speculative="lookup", every_logit=True))
    try:
        assert model.n_swa == 512 and model.speculative_mode == "lookup"
        model.row_cost = FREE_ROWS
        lines = "".join(f"Ship {i} passed the lighthouse at {i % 12 + 1} o'clock, carrying {i * 7 % 50} crates.\n"
                        for i in range(24))
        prompt = model.prompt_tokens(f"The harbour log.\n\n{lines}\nThe harbour log, copied out again:\n\n{lines[:60]}")
        tokens: list[int] = []
        finished = None
        for event in model.generate(prompt, SamplingParams(temperature=0.0, max_tokens=320), reuse_kv=False):
            if isinstance(event, Chunk):
                tokens += event.token_ids
            else:
                finished = event
        assert isinstance(finished, Finished) and len(prompt) + len(tokens) > model.n_swa + 200
        drafted, kept = finished.timings.draft_n, finished.timings.draft_n_accepted
        assert kept > 100 and drafted > kept  # drafts were kept, and some were rejected and removed
        # The next token's logits from the drafted-through cache, fed the last token as a
        # decode step would (generated tokens are not reused for a new prompt: a prompt's KV
        # comes from a prefill), against a fresh full prefill of the same tokens.
        slot = model.slots[0]
        assert slot.kv_tokens == prompt + tokens[:-1]
        model.decoder.fill([BatchRow(slot.seq_id, len(slot.kv_tokens), [tokens[-1]], LAST)])
        assert model.context.lib.llama_decode(model.context.ctx, model.context.batch) == 0
        log_softmax = NumpyBackend().log_softmax
        cached = log_softmax(model.decoder.logits_at(0))
        full = log_softmax(model.logits_for(prompt + tokens)[-1])
        top = np.argsort(-full)[:5]
        assert int(cached.argmax()) == int(full.argmax())
        # Rounding, not lost cells: the chosen token's log-probability agrees to 1.5e-5 (measured);
        # the next four, far less likely, move by up to 0.24 (haswell, upstream's decode loop)
        # and 0.37 (haswell, the recipe's f32 one), as a decode step and a prefill round apart.
        assert abs(cached[top[0]] - full[top[0]]) < 0.01
        assert np.abs(cached - full)[top].max() < 0.5
    finally:
        model.close()


def test_a_draft_model_of_another_vocabulary_is_refused(smollm2_path: Path, gemma_path: Path) -> None:
    # The draft model is refused, not the model: it loads and drafts by prompt lookup, and
    # says why (the setting is one for all models, and a model of another family must open).
    model = load(smollm2_path, speculative="draft", draft_model=record_for(gemma_path, "gemma-3-270m:q4_k_m"))
    try:
        message = model.draft_note
        assert "gemma-3-270m:q4_k_m" in message and SMOLLM2_ID in message and "vocabular" in message
        assert model.speculative_mode == "lookup"
        _, text, finished = run(model, GROUNDED, SamplingParams(temperature=0.0, max_tokens=24))
        assert "def add" in text and finished.timings.draft_n > 0
    finally:
        model.close()


def test_n_choices_prefill_their_prompt_once(home: Path) -> None:
    with Engine() as engine:
        engine.update_settings(parallel_sequences=4, context_size=1024)
        for _ in engine.scheduler.load(STARTER):
            pass
        model = engine.scheduler.loaded_models()[0]
        prompt = model.chat_tokens(FREE_FORM)
        before = model.prompt_tokens_decoded
        jobs = [GenerateJob(STARTER, sampling=SamplingParams(temperature=0.0, max_tokens=12), messages=FREE_FORM,
                            use_cache=False) for _ in range(3)]
        answers = [handle.result() for handle in engine.scheduler.submit_many(jobs)]
        assert model.prompt_tokens_decoded - before == len(prompt)
        texts = {text for text, _ in answers}
        assert len(texts) == 1 and all(f.usage.completion_tokens == 12 for _, f in answers)
        # A lone run of the same prompt (its own prefill) answers the same.
        alone = engine.scheduler.submit(jobs[0]).result()[0]
        assert alone in texts


def test_the_api_reports_drafted_and_accepted_tokens_as_llama_server_does(home: Path) -> None:
    with Engine() as engine:
        engine.update_settings(context_size=1024, speculative="lookup")
        for _ in engine.scheduler.load(STARTER):
            pass
        engine.scheduler.loaded_models()[0].row_cost = FREE_ROWS
        server = ApiServer(engine, port=0)
        server.start()
        try:
            client = openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=300)
            reply = client.chat.completions.create(model=STARTER, messages=GROUNDED, temperature=0, max_tokens=24)
            timings = reply.model_dump()["timings"]
            assert timings["draft_n"] >= timings["draft_n_accepted"] > 0
            assert timings["predicted_n"] == reply.usage.completion_tokens
            chunks = list(client.chat.completions.create(model=STARTER, messages=GROUNDED, temperature=0,
                                                         max_tokens=24, stream=True))
            last = [c.model_dump() for c in chunks if c.choices and c.choices[0].finish_reason][-1]
            assert last["timings"]["draft_n_accepted"] == timings["draft_n_accepted"]
        finally:
            server.stop()


def test_a_sequence_released_mid_prefill_leads_no_one(smollm2_path: Path) -> None:
    # A failed step releases its sequences before they finish; one that was prefilling must
    # not become the leader a later request with the same prompt waits on (it never ends).
    model = LoadedModel(record_for(smollm2_path, SMOLLM2_ID), LoadOptions(context_size=512, gpu_layers=GPU_LAYERS, parallel=2))
    try:
        prompt = model.chat_tokens(FREE_FORM)
        greedy = SamplingParams(temperature=0.0, max_tokens=4)
        stranded = model.open_sequence(prompt, greedy, threading.Event(), time.perf_counter(), reuse_kv=False,
                                       slot=model.slots[0])
        model.release(stranded)  # as Scheduler._step_model does when a step raises
        later = model.open_sequence(prompt, greedy, threading.Event(), time.perf_counter(), reuse_kv=False,
                                    slot=model.slots[1])
        assert later.leader is None
        while not later.done:
            model.step([later], model.options.batch_size)
        assert later.usage.completion_tokens == 4
        model.release(later)
    finally:
        model.close()

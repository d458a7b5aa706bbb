"""Several answers at once in one context, with the real starter model.

What batching changes, and what is tested here: every sequence has its own KV stream, so a
sequence running alone answers exactly the same in any slot (and a restored conversation
exactly as a full prefill). Beside others, its rows go through llama.cpp's multi-row matrix
kernels, which round differently from the one-row kernel: logits agree to rounding, and a
greedy answer can differ only where two tokens are that close.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from inglenook.engine.base.generation_events import Chunk, Finished, PromptProgress
from inglenook.engine.base.jobs import GenerateJob, JobHandle
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.runtime.slots import DECODE
from tests.integration.test_cli import STARTER

GREEDY = SamplingParams(temperature=0.0, max_tokens=24)
TOPICS = ["foxes", "rivers", "bread", "clocks", "owls", "ships", "glass", "snow"]


@pytest.fixture()
def engine(home) -> Iterator[Engine]:  # home: the per-test INGLENOOK_HOME
    with Engine() as engine:
        engine.update_settings(parallel_sequences=8, context_size=1024, prefill_chunk=32)
        yield engine


def ask(engine: Engine, topic: str, sampling: SamplingParams = GREEDY, **job: object) -> JobHandle:
    messages = [{"role": "user", "content": f"Tell me one fact about {topic}."}]
    return engine.scheduler.submit(GenerateJob(STARTER, sampling=sampling, messages=messages, use_cache=False, **job))


def first_token(handle: JobHandle) -> tuple[int, float]:
    for event in handle:
        if isinstance(event, Chunk) and event.logprobs:
            entry = event.logprobs[0]
            handle.cancel()
            return event.token_ids[0], entry.logprob
    raise AssertionError("no token")


def test_beside_seven_others_an_answer_agrees_with_its_lone_self_to_rounding(engine: Engine) -> None:
    probe = SamplingParams(temperature=0.0, max_tokens=4, logprobs=0)
    alone = {topic: first_token(ask(engine, topic, probe)) for topic in TOPICS[:3]}
    together = [ask(engine, topic, probe if topic in alone else GREEDY) for topic in TOPICS]
    for topic, handle in zip(TOPICS, together):
        if topic in alone:
            token, logprob = first_token(handle)
            assert token == alone[topic][0], topic
            assert abs(logprob - alone[topic][1]) < 1e-2, topic
        else:
            handle.result()
    # Eight streams, eight answers of their own: nothing mixed between them.
    texts = [ask(engine, topic) for topic in TOPICS]
    answers = [handle.result()[0] for handle in texts]
    assert len(set(answers)) == len(TOPICS)
    model = engine.scheduler.loaded_models()[0]
    assert len(model.slots) == 8 and not any(slot.busy for slot in model.slots)


def test_cancels_mid_stream_free_their_slots_and_the_rest_finish(engine: Engine) -> None:
    long = SamplingParams(temperature=0.0, max_tokens=200)
    handles = [ask(engine, topic, long) for topic in TOPICS]
    results: dict[int, list[object]] = {}

    def read(index: int, handle: JobHandle) -> None:
        events = []
        for event in handle:
            events.append(event)
            if index % 2 == 0 and sum(isinstance(e, Chunk) for e in events) == 3:
                handle.cancel()  # a Stop button, or a client that went away
        results[index] = events

    readers = [threading.Thread(target=read, args=(i, h)) for i, h in enumerate(handles)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=300)
    for index, events in results.items():
        finished = events[-1]
        assert isinstance(finished, Finished)
        assert finished.finish_reason in (("cancelled",) if index % 2 == 0 else ("stop", "length"))
    assert len(results) == len(TOPICS)
    # The slots are free and reusable: a new answer matches the one it gives alone.
    again = ask(engine, "foxes").result()[0]
    assert again == ask(engine, "foxes").result()[0]


def test_a_long_prompt_enters_in_chunks_while_a_stream_keeps_flowing(engine: Engine) -> None:
    order: list[str] = []
    lock = threading.Lock()
    streaming = ask(engine, "rivers", SamplingParams(temperature=0.0, max_tokens=120))
    # The first stream is decoding (its prompt's progress comes first, then its text).
    assert isinstance(next(e for e in streaming if not isinstance(e, PromptProgress)), Chunk)
    long_text = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(40))
    late = engine.scheduler.submit(GenerateJob(
        STARTER, sampling=SamplingParams(temperature=0.0, max_tokens=4), use_cache=False,
        messages=[{"role": "user", "content": long_text + "\nSummarise that."}]))

    def read(name: str, handle: JobHandle) -> None:
        for event in handle:
            if isinstance(event, Chunk):
                with lock:
                    order.append(name)

    readers = [threading.Thread(target=read, args=("stream", streaming)),
               threading.Thread(target=read, args=("long", late))]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=300)
    assert "long" in order
    # The long prompt (~600 tokens) took many 32-token steps; the stream went on meanwhile.
    assert order.index("long") >= 5, order


def test_a_chat_turn_is_admitted_before_queued_api_requests(engine: Engine) -> None:
    engine.update_settings(parallel_sequences=1)
    engine.scheduler.unload_all()
    busy = ask(engine, "owls", SamplingParams(temperature=0.0, max_tokens=40))
    next(iter(busy))  # the only slot is taken
    api = ask(engine, "ships")
    conversation = engine.chats.new_conversation(model_id=STARTER)
    chat = ask(engine, "glass", conversation_id=conversation.id)
    finished_at: dict[str, float] = {}

    def wait(name: str, handle: JobHandle) -> None:
        handle.result()
        finished_at[name] = time.perf_counter()

    waiters = [threading.Thread(target=wait, args=(n, h)) for n, h in (("api", api), ("chat", chat))]
    for waiter in waiters:
        waiter.start()
    busy.result()
    for waiter in waiters:
        waiter.join(timeout=300)
    assert finished_at["chat"] < finished_at["api"]


def test_time_to_first_token_counts_the_wait_in_the_queue(engine: Engine) -> None:
    engine.update_settings(parallel_sequences=1)
    engine.scheduler.unload_all()
    ask(engine, "snow").result()  # loaded
    started = time.perf_counter()
    busy = ask(engine, "owls", SamplingParams(temperature=0.0, max_tokens=60))
    queued = ask(engine, "ships", SamplingParams(temperature=0.0, max_tokens=4))
    busy.result()
    waited = time.perf_counter() - started
    _, finished = queued.result()
    assert finished.timings.ttft_s >= waited * 0.9  # not just its own prefill


def test_a_conversation_restored_into_another_sequence_answers_as_a_full_prefill(home) -> None:
    # A system prompt long enough that the saved state outlasts the 64 tokens read again.
    question = [{"role": "system", "content": "You are a geography teacher who answers briefly and clearly. " * 8},
                {"role": "user", "content": "Name three rivers in Europe and say one thing about each."}]
    with Engine() as first:
        first.update_settings(parallel_sequences=4, context_size=1024)
        conversation = first.chats.new_conversation(model_id=STARTER).id
        answer, _ = first.scheduler.submit(GenerateJob(STARTER, sampling=GREEDY, messages=question,
                                                       conversation_id=conversation)).result()
    follow_up = question + [{"role": "assistant", "content": answer},
                            {"role": "user", "content": "Which of them is the longest?"}]
    with Engine() as restarted:  # a new process would see the same: the state comes from disk
        list(restarted.scheduler.load(STARTER))
        model = restarted.scheduler.loaded_models()[0]
        prompt = model.chat_tokens(follow_up)
        # The scheduler is idle: drive the model directly, the saved state into sequence 3.
        kept = restarted.cache.restore(model.slot_view(model.slots[3]), prompt, conversation)
        assert kept > 0
        restored = alone_in(model, model.slots[3], prompt, reuse=True)
        full = alone_in(model, model.slots[0], prompt, reuse=False)
        assert restored.usage.cached_tokens == kept and full.usage.cached_tokens == 0
        assert restored.text == full.text


def alone_in(model, slot, prompt: list[int], reuse: bool):
    sequence = model.open_sequence(prompt, GREEDY, threading.Event(), time.perf_counter(), reuse_kv=reuse, slot=slot)
    parts = []
    while not sequence.done:
        model.step([sequence], model.options.batch_size)
        parts += [e.text for e in sequence.drain() if isinstance(e, Chunk)]
    parts += [e.text for e in sequence.drain() if isinstance(e, Chunk)]
    model.release(sequence)
    sequence.text = "".join(parts)
    return sequence


def test_a_step_batches_its_rows_in_sequence_order_whatever_the_admission_order(engine: Engine) -> None:
    # llama.cpp keeps rows of per-sequence KV streams in one micro-batch only while their
    # sequence ids run consecutively in batch order; rows in admission order split a step of
    # eight answers into up to eight micro-batches (a step took 55 ms instead of 32).
    list(engine.scheduler.load(STARTER))
    model = engine.scheduler.loaded_models()[0]  # the scheduler is idle: drive the model directly
    cancel = threading.Event()
    admitted = [model.slots[i] for i in (5, 0, 3, 1)]
    sequences = [model.open_sequence(model.chat_tokens([{"role": "user", "content": f"About {t}."}]),
                                     GREEDY, cancel, time.perf_counter(), slot=slot)
                 for t, slot in zip(TOPICS, admitted)]
    calls = DecodeCalls(model)
    model.context.lib = calls
    try:
        model.step(sequences, 512)  # the prompts: a llama_decode each (LoadedModel.step)
        assert sorted(calls.calls, key=min) == [{0}, {1}, {3}, {5}], calls.calls
        for _ in range(2):  # decode steps: every answer's row in one call, in sequence order
            model.step(sequences, 512)
            batch = model.context.batch
            order = [batch.seq_id[i][0] for i in range(batch.n_tokens)]
            assert order == sorted(order) and set(order) == {0, 1, 3, 5}, order
    finally:
        model.context.lib = calls._lib
        for sequence in sequences:
            model.release(sequence)


class DecodeCalls:
    """The model's llama.cpp library, recording which sequences each ``llama_decode`` fed."""

    def __init__(self, model: object) -> None:
        self._lib = model.context.lib  # type: ignore[attr-defined]
        self._model = model
        self.calls: list[set[int]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._lib, name)

    def llama_decode(self, ctx: object, batch: object) -> int:
        fed = self._model.context.batch  # type: ignore[attr-defined]
        self.calls.append({fed.seq_id[i][0] for i in range(fed.n_tokens)})
        return self._lib.llama_decode(ctx, batch)


def test_a_stream_and_a_prompt_beside_it_are_fed_apart_and_the_stream_is_unchanged(engine: Engine) -> None:
    # llama.cpp cuts a call into micro-batches that take the same number of tokens from each
    # sequence (a KV stream per sequence): a stream's row and a prompt chunk in one call became
    # a micro-batch of the row plus one prompt token, a two-row step that costs twice a
    # one-row one on a 2-core CPU, then the rest of the chunk (70 ms a step instead of 50).
    # So the step feeds them in separate calls; and the stream's tokens and log-probabilities
    # stay exactly those it has alone.
    list(engine.scheduler.load(STARTER))
    model = engine.scheduler.loaded_models()[0]  # the scheduler is idle: drive the model directly
    sampling = SamplingParams(temperature=0.0, max_tokens=40, logprobs=0)
    prompt = model.chat_tokens([{"role": "user", "content": "Tell me about rivers."}])
    long_prompt = model.chat_tokens([{"role": "user", "content": " ".join(
        f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(30)) + "\nSummarise that."}])

    def stream(beside: bool) -> tuple[list[tuple[int, float]], list[set[int]]]:
        cancel = threading.Event()
        sequence = model.open_sequence(prompt, sampling, cancel, time.perf_counter(), reuse_kv=False,
                                       slot=model.slots[0])
        running = [sequence]
        while sequence.state != DECODE:  # its own prefill, alone in both runs
            model.step(running, 512)
        if beside:
            running.append(model.open_sequence(long_prompt, GREEDY, cancel, time.perf_counter(), reuse_kv=False,
                                               slot=model.slots[1]))
        fed_beside = 0
        recorder = DecodeCalls(model)
        model.context.lib = recorder
        try:
            while not sequence.done:
                fed_beside += model.step(running, 8)  # 8 prompt tokens a step: many steps of both
        finally:
            model.context.lib = recorder._lib
            for each in running:
                model.release(each)
        if beside:
            assert fed_beside >= 8 * 20  # the prompt was prefilled during the stream's steps
        tokens = [(token, entry.logprob) for event in sequence.drain() if isinstance(event, Chunk) and event.logprobs
                  for token, entry in zip(event.token_ids, event.logprobs)]
        return tokens, recorder.calls

    alone, _ = stream(beside=False)
    together, calls = stream(beside=True)
    assert len(alone) >= 30 and together == alone
    assert {0} in calls and {1} in calls and {0, 1} not in calls

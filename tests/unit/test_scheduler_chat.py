from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from inglenook.engine.base.errors import (
    ContextLengthExceeded, InvalidRequest, ModelNotFound, ModelTooLarge, QueueFull,
)
from inglenook.engine.base.generation_events import Chunk, Finished, PromptProgress
from inglenook.engine.base.jobs import EmbedJob, GenerateJob
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.chat.chat import ChatService
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.store import Store
from tests.fakes import FakeModel, FakeSequence

if TYPE_CHECKING:
    from inglenook.engine.api.shared.runs import LoopWaker


def _record(model_id: str) -> ModelRecord:
    return ModelRecord(model_id, Path(f"/models/{model_id}.gguf"), model_id, "llama", "Q4_0", 1, 256, 1, "fp-" + model_id, "scan")


def _resolve(model_id: str) -> ModelRecord:
    if model_id.startswith("missing"):
        raise ModelNotFound(f"no local model named {model_id!r}")
    return _record(model_id)


@pytest.fixture()
def scheduler():
    FakeModel.step_delay_s = 0.0
    sched = Scheduler(_resolve, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel)
    yield sched
    sched.close()


def test_a_job_streams_chunks_then_finishes(scheduler: Scheduler) -> None:
    handle = scheduler.submit(GenerateJob("m:q4_0", messages=[{"role": "user", "content": "hi"}]))
    events = list(handle)
    # Admitted first (the prompt fits, its sequence is open), then the answer.
    assert isinstance(events[0], PromptProgress) and (events[0].read, events[0].cached) == (0, 0)
    assert all(isinstance(e, Chunk) for e in events[1:-1])
    assert isinstance(events[-1], Finished) and events[-1].finish_reason == "stop"
    assert "".join(e.text for e in events[1:-1]) == FakeModel.reply


def test_max_tokens_ends_with_length(scheduler: Scheduler) -> None:
    text, finished = scheduler.submit(GenerateJob("m:q4_0", text="x", sampling=SamplingParams(max_tokens=3))).result()
    assert text == "The quick brown" and finished.finish_reason == "length"


def test_a_token_cap_is_a_limit_clipped_to_the_context_left(scheduler: Scheduler) -> None:
    """The API's default cap (and the Messages API's max_tokens) ends the answer as max_tokens
    would, with real usage, yet never refuses a prompt for want of room; max_tokens still must fit."""
    text, finished = scheduler.submit(GenerateJob("m:q4_0", text="x", token_cap=3)).result()
    assert (text, finished.finish_reason, finished.usage.completion_tokens) == ("The quick brown", "length", 3)
    long_prompt = "y" * 250  # 250 of the fake's 256 context tokens: room for 6 more
    text, finished = scheduler.submit(GenerateJob("m:q4_0", text=long_prompt, token_cap=10_000)).result()
    assert (finished.finish_reason, finished.usage.completion_tokens) == ("length", 6)
    assert text == "The quick brown fox jumps over"
    with pytest.raises(ContextLengthExceeded):
        scheduler.submit(GenerateJob("m:q4_0", text=long_prompt, sampling=SamplingParams(max_tokens=10_000))).result()
    text, _ = scheduler.submit(GenerateJob("m:q4_0", text="x", sampling=SamplingParams(max_tokens=2), token_cap=5)).result()
    assert text == "The quick"  # the client's own max_tokens wins over the cap


def test_cancel_stops_between_steps(scheduler: Scheduler) -> None:
    FakeModel.step_delay_s = 0.05
    handle = scheduler.submit(GenerateJob("m:q4_0", text="x"))
    events = iter(handle)
    assert isinstance(next(events), PromptProgress)  # admitted
    first = next(events)
    assert isinstance(first, Chunk)
    handle.cancel()
    rest = list(events)
    assert rest[-1].finish_reason == "cancelled"
    assert len(rest) < len(FakeModel.reply.split())


def test_errors_reach_the_caller_as_their_own_type(scheduler: Scheduler) -> None:
    with pytest.raises(ModelNotFound):
        scheduler.submit(GenerateJob("missing:q4_0", text="x")).result()
    with pytest.raises(ContextLengthExceeded):
        scheduler.submit(GenerateJob("m:q4_0", text="x" * 300)).result()
    # The worker survives errors and runs the next job.
    assert scheduler.submit(GenerateJob("m:q4_0", text="x")).result()[1].finish_reason == "stop"


def test_jobs_from_many_threads_each_get_their_own_answer(scheduler: Scheduler) -> None:
    results: dict[int, str] = {}

    def ask(i: int) -> None:
        results[i] = scheduler.submit(GenerateJob("m:q4_0", text=f"q{i}", sampling=SamplingParams(max_tokens=i + 1))).result()[0]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [len(results[i].split()) for i in range(5)] == [1, 2, 3, 4, 5]


def test_another_model_loads_beside_the_first(scheduler: Scheduler) -> None:
    states: list[tuple[str, str]] = []
    scheduler.add_listener(lambda model_id, state, _detail: states.append((model_id, state)))
    scheduler.submit(GenerateJob("a:q4_0", text="x")).result()
    scheduler.submit(GenerateJob("b:q4_0", text="x")).result()
    assert [m.record.id for m in scheduler.loaded_models()] == ["b:q4_0", "a:q4_0"], "most recently used first"
    assert ("a:q4_0", "unloaded") not in states
    assert ("a:q4_0", "loading") in states and ("b:q4_0", "loaded") in states


def test_an_embedding_context_is_not_announced_as_the_model_loading(scheduler: Scheduler) -> None:
    # The window shows what listeners hear as the chat model's state: search's own context
    # of the same file must not read as "Loading m…" over the chat.
    states: list[tuple[str, str]] = []
    scheduler.add_listener(lambda model_id, state, _detail: states.append((model_id, state)))
    scheduler.submit(EmbedJob("m:q4_0", ["ab"], pooling="last")).embeddings()
    assert states == []
    scheduler.submit(GenerateJob("m:q4_0", text="x")).result()
    assert ("m:q4_0", "loading") in states and ("m:q4_0", "loaded") in states


def _sized(record: ModelRecord, _options: LoadOptions) -> int:
    return {"big": 100, "huge": 101}.get(record.base_id, 40)


def test_least_recently_used_idle_model_makes_room() -> None:
    sched = Scheduler(_resolve, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel,
                      memory_budget=lambda: 100, estimate=_sized)
    try:
        for model_id in ("a:q4_0", "b:q4_0", "a:q4_0", "c:q4_0"):  # b is the least recently used when c comes
            sched.submit(GenerateJob(model_id, text="x")).result()
        assert sorted(m.record.id for m in sched.loaded_models()) == ["a:q4_0", "c:q4_0"]
        sched.submit(GenerateJob("big:q4_0", text="x")).result()
        assert [m.record.id for m in sched.loaded_models()] == ["big:q4_0"]
        with pytest.raises(ModelTooLarge, match="more than the memory budget"):
            sched.submit(GenerateJob("huge:q4_0", text="x", sampling=SamplingParams(max_tokens=1))).result()
    finally:
        sched.close()


def test_a_model_in_use_is_not_evicted_the_new_one_waits_for_it() -> None:
    FakeModel.step_delay_s = 0.02
    sched = Scheduler(_resolve, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel,
                      memory_budget=lambda: 60, estimate=_sized)
    try:
        first = sched.submit(GenerateJob("a:q4_0", text="x"))
        events = iter(first)
        assert isinstance(next(events), PromptProgress) and isinstance(next(events), Chunk)
        second = sched.submit(GenerateJob("b:q4_0", text="x"))
        text, _finished = first.result()
        assert text == FakeModel.reply[len("The"):], "a ran to its end beside the waiting job"
        assert second.result()[0] == FakeModel.reply
        assert [m.record.id for m in sched.loaded_models()] == ["b:q4_0"]
    finally:
        FakeModel.step_delay_s = 0.0
        sched.close()


def test_two_resident_models_step_in_the_same_loop() -> None:
    FakeModel.step_delay_s = 0.01
    sched = Scheduler(_resolve, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel)
    try:
        sched.submit(GenerateJob("a:q4_0", text="x")).result()
        sched.submit(GenerateJob("b:q4_0", text="x")).result()  # both resident now
        order: list[str] = []
        handles = {m: sched.submit(GenerateJob(m, text="x")) for m in ("a:q4_0", "b:q4_0")}
        threads = [threading.Thread(target=lambda m=m: order.extend(m for e in handles[m] if isinstance(e, Chunk)))
                   for m in handles]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        words = len(FakeModel.reply.split())
        assert order.count("a:q4_0") == order.count("b:q4_0") == words
        first_of_b, last_of_a = order.index("b:q4_0"), len(order) - 1 - order[::-1].index("a:q4_0")
        assert first_of_b < last_of_a, "the two answers ran side by side, not one after the other"
    finally:
        FakeModel.step_delay_s = 0.0
        sched.close()


def test_idle_models_are_unloaded() -> None:
    sched = Scheduler(_resolve, lambda: LoadOptions(), idle_unload_s=0.2, loader=FakeModel)
    try:
        sched.submit(GenerateJob("m:q4_0", text="x")).result()
        assert sched.loaded_models()
        deadline = time.monotonic() + 5
        while sched.loaded_models() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not sched.loaded_models()
    finally:
        sched.close()


def test_a_full_queue_refuses_with_queue_full() -> None:
    FakeModel.step_delay_s = 0.05
    sched = Scheduler(_resolve, lambda: LoadOptions(), max_queue=2, loader=FakeModel)
    try:
        handles = []
        with pytest.raises(QueueFull):
            for _ in range(10):
                handles.append(sched.submit(GenerateJob("m:q4_0", text="x")))
    finally:
        FakeModel.step_delay_s = 0.0
        sched.close()


def test_embeddings_job(scheduler: Scheduler) -> None:
    result = scheduler.submit(EmbedJob("m:q4_0", ["ab", "abcd"])).embeddings()
    assert result.vectors == [[2.0, 1.0], [4.0, 1.0]]


def test_close_ends_queued_jobs(scheduler: Scheduler) -> None:
    FakeModel.step_delay_s = 0.05
    running = scheduler.submit(GenerateJob("m:q4_0", text="x"))
    first = next(iter(running))
    assert isinstance(first, PromptProgress), "the first job is running"
    queued = [scheduler.submit(GenerateJob("m:q4_0", text=f"q{i}")) for i in range(3)]
    assert scheduler.queue_depth == 3, "one slot: the others wait"
    scheduler.close()
    assert list(running)[-1].finish_reason == "cancelled"
    for handle in queued:
        events = list(handle)
        assert [type(e) for e in events] == [Finished] and events[0].finish_reason == "cancelled", (
            "a job that never started ends at once, with no text"
        )


# -- chat service ------------------------------------------------------------------------


@pytest.fixture()
def chats(tmp_path: Path, scheduler: Scheduler) -> ChatService:
    return ChatService(Store(tmp_path / "db.sqlite"), scheduler, lambda: "m:q4_0")


def test_the_user_message_is_committed_before_the_answer(chats: ChatService) -> None:
    conversation = chats.new_conversation(system_prompt="Be kind.")
    FakeModel.step_delay_s = 0.05
    turn = chats.send(conversation.id, "Tell me a story about a fox")
    stored = chats.store.messages(conversation.id)
    assert [(m.role, m.content) for m in stored] == [("user", "Tell me a story about a fox")]
    message = turn.wait()
    assert message is not None and message.content == FakeModel.reply and message.status == "complete"
    assert message.finish_reason == "stop" and message.completion_tokens == 10
    assert chats.store.get_conversation(conversation.id).title == "Tell me a story about a fox"


def test_a_stopped_answer_is_saved_as_partial(chats: ChatService) -> None:
    conversation = chats.new_conversation()
    FakeModel.step_delay_s = 0.05
    turn = chats.send(conversation.id, "go")
    for i, _ in enumerate(turn):
        if i == 1:
            turn.cancel()
    assert turn.message is not None and turn.message.status == "partial"
    assert turn.message.content and turn.message.content != FakeModel.reply


def test_regenerate_replaces_the_last_answer(chats: ChatService) -> None:
    conversation = chats.new_conversation()
    chats.send(conversation.id, "one").wait()
    chats.regenerate(conversation.id, max_tokens=2).wait()
    roles = [(m.role, m.content) for m in chats.store.messages(conversation.id)]
    assert roles == [("user", "one"), ("assistant", "The quick")]


def test_edit_and_resend_drops_later_messages(chats: ChatService) -> None:
    conversation = chats.new_conversation()
    chats.send(conversation.id, "first").wait()
    chats.send(conversation.id, "second").wait()
    first_user = chats.store.messages(conversation.id)[0]
    chats.edit_and_resend(first_user.id, "first, edited").wait()
    contents = [m.content for m in chats.store.messages(conversation.id)]
    assert contents == ["first, edited", FakeModel.reply]


def test_history_has_the_system_prompt_first(chats: ChatService) -> None:
    conversation = chats.new_conversation(system_prompt="Be brief.")
    chats.send(conversation.id, "hi").wait()
    history = chats.history(chats.store.get_conversation(conversation.id))
    assert [m["role"] for m in history] == ["system", "user", "assistant"]


def test_exclusive_work_runs_on_the_worker_with_no_model_resident(scheduler: Scheduler) -> None:
    scheduler.submit(GenerateJob("m:q4_0", text="x")).result()
    assert scheduler.loaded_models()
    seen: dict[str, object] = {}

    def work() -> str:
        seen["thread"] = threading.current_thread().name
        seen["resident"] = list(scheduler.loaded_models())
        return "measured"

    assert scheduler.run_exclusive(work) == "measured"
    assert seen == {"thread": "inglenook-scheduler", "resident": []}


def test_exclusive_work_errors_reach_the_caller_and_queued_chats_wait() -> None:
    """Jobs queued behind exclusive work wait for it, then a chat turn is admitted before API
    requests queued earlier. Everything is recorded on the scheduler's thread as it happens:
    the end of the exclusive work, and each job's admission (the model opening its sequence)."""
    events: list[str] = []

    class AdmissionLog(FakeModel):
        def open_sequence(self, prompt: list[int], *args, **kwargs) -> FakeSequence:
            events.append("admitted " + "".join(map(chr, prompt)))
            return super().open_sequence(prompt, *args, **kwargs)

    FakeModel.step_delay_s = 0.0
    scheduler = Scheduler(_resolve, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=AdmissionLog)
    try:
        def fails() -> None:
            raise ModelNotFound("gone")

        with pytest.raises(ModelNotFound):
            scheduler.run_exclusive(fails)
        holding, gate = threading.Event(), threading.Event()

        def slow() -> None:
            holding.set()
            gate.wait(30)
            events.append("exclusive ended")

        worker = threading.Thread(target=scheduler.run_exclusive, args=(slow,))
        worker.start()
        assert holding.wait(30)  # the worker is inside the exclusive work: what comes now queues
        api = [scheduler.submit(GenerateJob("m:q4_0", text=f"api{i}", client="api:x")) for i in range(2)]
        chat = scheduler.submit(GenerateJob("m:q4_0", text="chat", conversation_id=1, client="window"))
        assert events == []  # nothing admitted while the exclusive work holds the worker
        gate.set()
        for handle in (*api, chat):
            handle.result()
        worker.join(30)
        assert events == ["exclusive ended", "admitted chat", "admitted api0", "admitted api1"]
    finally:
        scheduler.close()


def test_a_request_larger_than_the_queue_is_invalid_not_busy() -> None:
    sched = Scheduler(_resolve, lambda: LoadOptions(context_size=256), loader=FakeModel, max_queue=4)
    try:
        with pytest.raises(InvalidRequest, match="at most 4 completions") as caught:
            sched.submit_many([GenerateJob("m:q4_0", text="x") for _ in range(5)])
        assert not isinstance(caught.value, QueueFull) and caught.value.param == "n"
        assert sched.queue_depth == 0  # all or nothing
        handles = sched.submit_many([GenerateJob("m:q4_0", text="x", sampling=SamplingParams(max_tokens=1))] * 4)
        assert all(h.result()[1].finish_reason == "length" for h in handles)
    finally:
        sched.close()


def test_heartbeat_shows_the_unit_of_work_in_progress(scheduler: Scheduler) -> None:
    assert scheduler.heartbeat() is None  # idle
    FakeModel.step_delay_s = 0.05
    handle = scheduler.submit(GenerateJob("m:q4_0", text="x"))
    next(iter(handle))
    beat = scheduler.heartbeat()
    assert beat is not None and "step of 1 sequence" in beat.doing and beat.busy_s >= 0
    handle.cancel()
    list(handle)
    for _ in range(400):  # the worker goes idle once the job is over
        if scheduler.heartbeat() is None:
            break
        time.sleep(0.01)
    assert scheduler.heartbeat() is None


def test_exclusive_work_is_not_reported_as_a_stuck_step(scheduler: Scheduler) -> None:
    beats: list[object] = []
    scheduler.run_exclusive(lambda: beats.append(scheduler.heartbeat()))
    assert beats == [None]


# -- events on an event loop (the HTTP server's path) --------------------------------------


def test_runs_read_every_event_on_the_loop_without_worker_threads(scheduler: Scheduler) -> None:
    import asyncio

    from inglenook.engine.api.shared.runs import Run, RunSet

    async def read_two() -> list[str]:
        handles = [scheduler.submit(GenerateJob("m:q4_0", text=f"q{i}")) for i in range(2)]
        runs = [Run(handle, RunSet()) for handle in handles]

        async def text(run: Run) -> str:
            return "".join([chunk.text async for chunk in run.chunks()])

        return list(await asyncio.gather(*(text(run) for run in runs)))

    before = {t.ident for t in threading.enumerate()}
    assert asyncio.run(read_two()) == [FakeModel.reply, FakeModel.reply]
    assert not [t.name for t in threading.enumerate() if t.ident not in before and "AnyIO" in t.name]


def count_fires(waker: "LoopWaker", count: list[int]) -> None:
    """Count in ``count[0]`` each callback ``waker`` runs on its loop (one per wake-up)."""
    original = waker._fire

    def counted() -> None:
        count[0] += 1
        original()

    waker._fire = counted  # type: ignore[method-assign]


@pytest.mark.parametrize("whole", [True, False], ids=["drained", "streamed"])
def test_a_drained_answer_wakes_the_loop_at_its_end_not_per_chunk(scheduler: Scheduler, whole: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-streaming request reads its answer whole: the scheduler's thread announces only
    its admission and its end, so the loop does not wake (and take CPU from the decode) once
    a token; a stream is still woken for every chunk."""
    import asyncio

    from inglenook.engine.api.shared import runs as runs_module
    from inglenook.engine.api.shared.runs import Run, RunSet

    monkeypatch.setattr(FakeModel, "step_delay_s", 0.02)  # each word its own step, as a real decode gives it
    fires: list[int] = []

    async def read() -> tuple[str, int]:
        fires.append(0)
        count_fires(runs_module.loop_waker(), fires)
        run = Run(scheduler.submit(GenerateJob("m:q4_0", text="q")), RunSet())
        await run.until_admitted()  # as run_plan does for a stream; the drain switches after it
        if whole:
            await run.drain()
        else:
            [chunk async for chunk in run.chunks()]
        return run.text, run.usage.completion_tokens

    text, tokens = asyncio.run(read())
    wakes = fires[0]
    assert text == FakeModel.reply and tokens == len(FakeModel.reply.split(" "))
    # Drained: the admission, the drain's own look at what is queued, then the end (Finished
    # and the job's close, one wake-up or two). Streamed: about one a word; words that land
    # while the loop is still busy share one, so only "more than the drained bound" is sure.
    if whole:
        assert wakes <= 4
    else:
        assert wakes > 4


def test_one_loop_wake_up_serves_every_event_of_a_step() -> None:
    import asyncio

    from inglenook.engine.api.shared.runs import LoopWaker

    async def main() -> tuple[list[bool], int]:
        waker = LoopWaker(asyncio.get_running_loop())
        fired = [0]
        count_fires(waker, fired)
        events = [asyncio.Event() for _ in range(3)]
        wakes = [waker.waker_for(event) for event in events]
        worker = threading.Thread(target=lambda: [wake() for wake in wakes])  # the scheduler's thread
        worker.start()
        worker.join()
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in events)), 5)
        return [event.is_set() for event in events], fired[0]

    assert asyncio.run(main()) == ([True, True, True], 1)

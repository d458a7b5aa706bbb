"""Usage accounting against a real SQLite file: rows per generation, totals per day, model and
client, reasoning counts, retention, and answers that arrive while the store is unavailable."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from inglenook.engine.base.generation_events import Chunk, Finished, Timings, Usage
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.chat.chat import ChatService
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.store import Store
from inglenook.engine.usage.recorder import UsageRecorder
from inglenook.engine.usage.usage import (
    ReasoningTally, api_client, checked_days, period_days, uncounted, usage_report,
)
from tests.fakes import FakeModel
from tests.unit.test_scheduler_chat import _resolve


@pytest.fixture()
def store(tmp_path: Path):
    opened = Store(tmp_path / "inglenook.db")
    yield opened
    opened.close()


@pytest.fixture()
def recorder(store: Store):
    made = UsageRecorder(store, lambda: 30, batch_delay_s=0.0)
    yield made
    made.close()


def _finished(model: str, prompt: int, cached: int, completion: int, seconds: float = 1.0) -> Finished:
    return Finished("stop", Usage(prompt, cached, completion), Timings(0.1, seconds / 2, seconds / 2), model)


def test_each_generation_is_one_row_totalled_per_day_model_and_client(store: Store, recorder: UsageRecorder) -> None:
    jobs = [GenerateJob("small", client="window"), GenerateJob("small", client="api:curl/8"),
            GenerateJob("large", client="api:curl/8")]
    recorder.observe(jobs[0], _finished("small", 100, 40, 10))
    recorder.observe(jobs[1], _finished("small", 50, 0, 5))
    recorder.observe(jobs[2], _finished("large", 1000, 900, 200, seconds=4.0))
    assert recorder.flush()
    report = usage_report(store, days=7)
    total = report.total()
    assert (total.requests, total.prompt_tokens, total.cached_tokens, total.completion_tokens) == (3, 1150, 940, 215)
    assert total.duration_s == pytest.approx(6.0)
    assert report.by_model()["small"].prompt_tokens == 150 and report.by_model()["large"].requests == 1
    assert report.by_client()["api:curl/8"].completion_tokens == 205
    today = period_days(1)[0]
    assert report.by_day()[today].requests == 3 and len(report.by_day()) == 7
    assert set(report.day_by_model()[today]) == {"small", "large"}
    with store.reading() as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(usage_events)")]
    assert "content" not in columns and "text" not in columns  # counts only


def test_close_writes_a_waiting_record_without_waiting_out_the_burst_delay(store: Store) -> None:
    # A terminal run closes the engine right after its one answer: the record must be written
    # then, not after the delay that lets a burst of answers share a transaction.
    recorder = UsageRecorder(store, lambda: 30, batch_delay_s=600.0)
    recorder.observe(GenerateJob("small", client="cli"), _finished("small", 10, 0, 2))
    recorder.close(timeout=60.0)
    assert not recorder._thread.is_alive()
    assert usage_report(store, days=1).total().requests == 1


def test_a_reasoning_count_reaches_its_row_before_or_after_the_write(store: Store, recorder: UsageRecorder) -> None:
    first, second = GenerateJob("m", client="window"), GenerateJob("m", client="window")
    recorder.observe(first, _finished("m", 10, 0, 30))
    recorder.note_reasoning(first, 20)  # arrives in the same batch as its row
    assert recorder.flush()
    recorder.observe(second, _finished("m", 10, 0, 8))
    assert recorder.flush()
    recorder.note_reasoning(second, 5)  # the row was written already: it is updated
    assert recorder.flush()
    assert usage_report(store).total().reasoning_tokens == 25


def test_uncounted_jobs_leave_no_row(store: Store, recorder: UsageRecorder) -> None:
    recorder.observe(GenerateJob("m", client=uncounted("api:claude-cli")), _finished("m", 500, 0, 1))
    assert recorder.flush()
    assert usage_report(store).total().requests == 0


def test_rows_older_than_the_retention_are_removed(store: Store) -> None:
    old = time.time() - 40 * 86400
    with store.writing() as conn:
        conn.execute("INSERT INTO usage_events (at, day, model_id, client, prompt_tokens) VALUES (?, ?, 'm', 'x', 1)",
                     [old, time.strftime("%Y-%m-%d", time.localtime(old))])
    recorder = UsageRecorder(store, lambda: 30, batch_delay_s=0.0)
    try:
        recorder.observe(GenerateJob("m", client="window"), _finished("m", 1, 0, 1))
        assert recorder.flush()
    finally:
        recorder.close()
    with store.reading() as conn:
        assert conn.execute("SELECT COUNT(*) FROM usage_events").fetchone()[0] == 1  # only the new one
    assert usage_report(store, days=60).total().requests == 1


def test_an_unavailable_store_delays_the_count_never_the_answer(store: Store) -> None:
    FakeModel.step_delay_s = 0.0
    scheduler = Scheduler(_resolve, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel)
    recorder = UsageRecorder(store, lambda: 0, batch_delay_s=0.0)
    scheduler.add_finished_observer(recorder.observe)
    conn = store.db.conn
    try:
        with store.reading():
            conn.execute("PRAGMA query_only = ON")  # SQLite refuses every write from here on
        text, finished = scheduler.submit(GenerateJob("m:q4_0", text="x", client="terminal")).result()
        assert text == FakeModel.reply and finished.finish_reason == "stop"  # the answer arrived
        assert recorder.flush() and recorder.pending == 1  # its count waits for the store
        with store.reading():
            conn.execute("PRAGMA query_only = OFF")
        recorder._write()  # the retry the writer makes every RETRY_AFTER_S, made now
        assert recorder.pending == 0
        assert usage_report(store).by_client()["terminal"].completion_tokens == finished.usage.completion_tokens
    finally:
        with store.reading():
            conn.execute("PRAGMA query_only = OFF")
        scheduler.close()
        recorder.close()


def test_chat_turns_count_as_their_client_with_reasoning(store: Store) -> None:
    FakeModel.step_delay_s = 0.0
    scheduler = Scheduler(_resolve, lambda: LoadOptions(context_size=256), idle_unload_s=0, loader=FakeModel)
    recorder = UsageRecorder(store, lambda: 0, batch_delay_s=0.0)
    scheduler.add_finished_observer(recorder.observe)
    chats = ChatService(store, scheduler, lambda: "m:q4_0", usage=recorder)
    chats.client = "window"
    try:
        conversation = chats.new_conversation()
        chats.send(conversation.id, "hello").wait()
        assert recorder.flush()
        counts = usage_report(store).by_client()["window"]
        assert counts.requests == 1 and counts.completion_tokens == len(FakeModel.reply.split())
        assert counts.reasoning_tokens == 0  # the fake model does not reason
    finally:
        scheduler.close()
        recorder.close()


def test_reasoning_tally_counts_tokens_inside_the_block() -> None:
    tally = ReasoningTally()
    for text in ["<think>", "Let me", " think", "</think>", "Hello", " there"]:
        tally.feed(text, 1)
    # "<think>" and its two reasoning chunks are reasoning; "</think>" goes with the answer.
    assert tally.finish() == 3
    opened = ReasoningTally(inside="</think>")  # the template opened the block in the prompt
    for text in ["plan", " more", "</think>", "Answer"]:
        opened.feed(text, 1)
    assert opened.finish() == 2
    straddling = ReasoningTally()
    straddling.feed("<think>ab</think>cd", 4)
    assert straddling.finish() == 2  # shared by characters


def test_client_tags_and_periods() -> None:
    assert api_client("OpenAI/Python 1.99.0") == "api:OpenAI/Python 1.99.0"
    assert api_client(None) == "api" and api_client("x\x00y") == "api:xy"
    assert api_client("curl", key_client="api:team") == "api:team"
    assert len(api_client("a" * 500)) == len("api:") + 80
    assert checked_days(None) == 7 and checked_days("30") == 30
    for bad in ("0", "-3", "soon", 10**6):
        with pytest.raises(ValueError):
            checked_days(bad)
    days = period_days(3)
    assert len(days) == 3 and days == sorted(days)


def test_chunks_are_what_a_tally_reads() -> None:
    chunk = Chunk("<think>x", [1, 2])
    tally = ReasoningTally()
    tally.feed(chunk.text, len(chunk.token_ids))
    assert tally.finish() == 2

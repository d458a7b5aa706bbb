"""The prefix cache as the real Scheduler drives it: restore before a job, save after it.

The model is a stand-in whose "KV state" is a deterministic function of its tokens, so a
restore can be checked byte for byte; everything else (the scheduler's admission, its
save after the answer is delivered, the cache's files and budgets) is the real thing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from inglenook.engine.base.generation_events import Finished
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.slots import KvSlot
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.cache import MIB, PrefixCache
from inglenook.engine.store.statefile import SUFFIX

from tests.fakes import FakeModel, FakeSequence

BYTES_PER_TOKEN = 64


def state_of(tokens: list[int]) -> bytes:
    rng = np.random.default_rng(sum(tokens) + len(tokens))
    return rng.integers(0, 256, len(tokens) * BYTES_PER_TOKEN, dtype=np.uint8).tobytes()


class SlotState:
    """One sequence's state, as ``LoadedModel.slot_view`` gives the cache."""

    n_swa = 0

    def __init__(self, model: "StatefulModel", slot: KvSlot) -> None:
        self.model = model
        self.slot = slot
        self.n_ctx = model.n_ctx
        self.record = model.record

    @property
    def kv_tokens(self) -> list[int]:
        return self.slot.kv_tokens

    def state_key(self) -> str:
        return "stand-in-state-v1"

    def reusable_prefix(self, prompt: list[int], shared: int = 0) -> int:
        return common_prefix(self.slot.kv_tokens, prompt, len(prompt) - 1)

    def reusable_length(self, prompt_tokens: int, common: int, shared: int = 0) -> int:
        return min(common, prompt_tokens - 2)  # this stand-in's rule: the last two read again

    def export_sequence(self, limit=None, destination=None):
        if limit is not None:
            del self.slot.kv_tokens[limit:]
        if not self.slot.kv_tokens:
            return None
        state = state_of(self.slot.kv_tokens)
        buffer = destination(len(state)) if destination is not None else None
        if buffer is None:
            return list(self.slot.kv_tokens), bytearray(state)
        buffer[:] = np.frombuffer(state, dtype=np.uint8)
        return list(self.slot.kv_tokens), buffer

    def import_sequence(self, tokens: list[int], payload, keep: int) -> int:
        if bytes(payload) != state_of(tokens):
            raise AssertionError("restored bytes differ from the saved state")
        self.model.imports.append((self.slot.seq_id, len(tokens), keep))
        self.slot.kv_tokens = list(tokens[:keep])
        return keep


def common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = 0
    while n < min(len(a), len(b), limit) and a[n] == b[n]:
        n += 1
    return n


class StatefulModel(FakeModel):
    """FakeModel whose sequences leave their tokens in the slot, as llama.cpp's KV does."""

    def __init__(self, record: ModelRecord, options: LoadOptions, progress=None) -> None:
        super().__init__(record, options, progress)
        self.imports: list[tuple[int, int, int]] = []  # (sequence id, tokens in the state, kept)
        self.prompts: dict[int, list[int]] = {}

    def slot_view(self, slot: KvSlot) -> SlotState:
        return SlotState(self, slot)

    def open_sequence(self, prompt, sampling, cancel, started, reuse_kv=True, slot=None, shared=0,
                      template_stops=()) -> FakeSequence:
        slot = slot or self.pick_slot(prompt)
        assert slot is not None
        cached = common_prefix(slot.kv_tokens, prompt, len(prompt) - 1) if reuse_kv else 0
        sequence = super().open_sequence(prompt, sampling, cancel, started, reuse_kv, slot)
        sequence.usage.cached_tokens = cached
        self.prompts[slot.seq_id] = list(prompt)
        return sequence

    def release(self, sequence: FakeSequence) -> None:
        # What the KV holds after an answer: the prompt and the answer's tokens.
        answer = [100_000 + i for i in range(sequence.usage.completion_tokens)]
        sequence.slot.kv_tokens = self.prompts[sequence.slot.seq_id] + answer
        super().release(sequence)


RECORD = ModelRecord("m:q4_0", Path("/models/m.gguf"), "m", "llama", "Q4_0", 1, 4096, 1, "fp-1", "scan")
MESSAGES = [{"role": "system", "content": "You keep a small bakery's answers short. " * 8},
            {"role": "user", "content": "Do you sell rye bread?"}]


def scheduler_over(directory: Path, parallel: int = 1) -> tuple[Scheduler, PrefixCache]:
    cache = PrefixCache(directory, lambda: 64 * MIB, lambda: 16 * MIB)
    scheduler = Scheduler(lambda _id: RECORD, lambda: LoadOptions(context_size=4096, parallel=parallel),
                          idle_unload_s=0, loader=StatefulModel, cache=cache)
    return scheduler, cache


def ask(scheduler: Scheduler, messages: list[dict], **job) -> Finished:
    handle = scheduler.submit(GenerateJob("m:q4_0", sampling=SamplingParams(max_tokens=4), messages=messages, **job))
    return handle.result()[1]


def model_of(scheduler: Scheduler) -> StatefulModel:
    (model,) = scheduler.loaded_models()
    assert isinstance(model, StatefulModel)
    return model


def test_a_conversation_saved_by_one_scheduler_is_restored_by_the_next(tmp_path: Path) -> None:
    scheduler, cache = scheduler_over(tmp_path)
    try:
        assert ask(scheduler, MESSAGES, conversation_id=7).usage.cached_tokens == 0
        cache.flush()
    finally:
        scheduler.close()
        cache.close()
    assert len(list(tmp_path.glob(f"conv-*{SUFFIX}"))) == 1

    scheduler, cache = scheduler_over(tmp_path)  # a restart: new model, new cache, same files
    try:
        follow_up = MESSAGES + [{"role": "assistant", "content": "The quick brown fox"},
                                {"role": "user", "content": "And on Mondays?"}]
        finished = ask(scheduler, follow_up, conversation_id=7)
        model = model_of(scheduler)
        assert model.imports, "the scheduler did not restore the saved state before the job"
        first_prompt = len(model.chat_tokens(MESSAGES))
        assert finished.usage.cached_tokens >= first_prompt - 2
        # Another conversation with the same opening reads no saved state of conversation 7's
        # (it may reuse what the slot still holds: KV depends only on the tokens).
        imported = len(model.imports)
        ask(scheduler, MESSAGES, conversation_id=8)
        assert len(model.imports) == imported
    finally:
        scheduler.close()
        cache.close()


def test_use_cache_false_reads_and_writes_nothing(tmp_path: Path) -> None:
    scheduler, cache = scheduler_over(tmp_path)
    try:
        ask(scheduler, MESSAGES, conversation_id=1, use_cache=False)
        cache.flush()
        assert not list(tmp_path.glob(f"*{SUFFIX}"))
        assert model_of(scheduler).imports == []
    finally:
        scheduler.close()
        cache.close()


def test_a_failing_restore_costs_a_prefill_not_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler, cache = scheduler_over(tmp_path)
    try:
        ask(scheduler, MESSAGES, conversation_id=3)

        def broken(*_args: object, **_kwargs: object) -> int:
            raise OSError("disk gone")

        monkeypatch.setattr(cache, "restore", broken)
        finished = ask(scheduler, MESSAGES, conversation_id=3)
        assert finished.finish_reason in ("stop", "length")
        assert finished.usage.cached_tokens == 0  # the slot was cleared, not trusted
    finally:
        scheduler.close()
        cache.close()


def test_states_of_parallel_sequences_are_saved_per_slot(tmp_path: Path) -> None:
    scheduler, cache = scheduler_over(tmp_path, parallel=3)
    try:
        threads = [threading.Thread(target=ask, args=(scheduler, [*MESSAGES[:1], {"role": "user", "content": q}]),
                                    kwargs={"conversation_id": cid})
                   for cid, q in ((1, "Rye?"), (2, "Spelt?"), (3, "Sourdough?"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        cache.flush()
    finally:
        scheduler.close()
        cache.close()
    assert len(list(tmp_path.glob(f"conv-*{SUFFIX}"))) == 3

    scheduler, cache = scheduler_over(tmp_path, parallel=3)
    try:
        for cid, q in ((2, "Spelt?"), (3, "Sourdough?")):
            messages = [*MESSAGES[:1], {"role": "user", "content": q}, {"role": "assistant", "content": "The"},
                        {"role": "user", "content": "Thanks"}]
            assert ask(scheduler, messages, conversation_id=cid).usage.cached_tokens > 0
    finally:
        scheduler.close()
        cache.close()

"""The prefix cache with real models and real llama.cpp states.

A "restart" is a new Scheduler (a fresh LoadedModel) or a new Engine on the same
INGLENOOK_HOME. Every reuse is checked against a full prefill of the same prompt at
temperature 0: the token ids must be identical.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.cache import MIB, PrefixCache
from inglenook.engine.store.statefile import SUFFIX, StateHeader, read_state_file, write_state_file

from ..prefix_rule import alignment, least_read_again, served
from .conftest import record_for

GREEDY = SamplingParams(temperature=0.0, max_tokens=10, seed=3)
SYSTEM = {
    "role": "system",
    # Long enough that a first prompt fills several of the cache's 32-token blocks past the
    # tokens every prompt reads again (tests/prefix_rule.py).
    "content": "You are a concise assistant for a small bakery. Answer in one short sentence. " * 8,
}


def scheduler_at(directory: Path, record) -> tuple[Scheduler, PrefixCache]:
    cache = PrefixCache(directory, lambda: 256 * MIB, lambda: 128 * MIB)
    scheduler = Scheduler(
        resolve=lambda _id: record,
        load_options=lambda: LoadOptions(context_size=1024),
        idle_unload_s=0,
        cache=cache,
    )
    return scheduler, cache


def ask(scheduler: Scheduler, messages: list[dict], **job) -> tuple[list[int], str, Finished]:
    handle = scheduler.submit(GenerateJob(model_id="m", sampling=GREEDY, messages=messages, **job))
    ids: list[int] = []
    parts: list[str] = []
    finished = None
    for event in handle.events():
        if isinstance(event, Chunk):
            ids += event.token_ids
            parts.append(event.text)
        else:
            finished = event
    assert isinstance(finished, Finished)
    return ids, "".join(parts), finished


def close(scheduler: Scheduler, cache: PrefixCache) -> None:
    scheduler.close()
    cache.close()


def test_smollm2_conversations_resume_after_restart_with_identical_tokens(smollm2_path: Path, tmp_path: Path) -> None:
    record = record_for(smollm2_path, "smollm2-135m-instruct:q4_1")
    firsts = {1: [SYSTEM, {"role": "user", "content": "Do you sell rye bread?"}],
              2: [SYSTEM, {"role": "user", "content": "When do you open on Sundays?"}]}
    scheduler, cache = scheduler_at(tmp_path, record)
    answers = {cid: ask(scheduler, messages, conversation_id=cid)[1] for cid, messages in firsts.items()}
    close(scheduler, cache)
    assert len(list(tmp_path.glob(f"conv-*{SUFFIX}"))) == 2

    scheduler, cache = scheduler_at(tmp_path, record)  # a restart: a fresh model, the same files
    try:
        for cid, messages in firsts.items():
            follow_up = messages + [{"role": "assistant", "content": answers[cid]},
                                    {"role": "user", "content": "And on Mondays?"}]
            cached_ids, _, cached = ask(scheduler, follow_up, conversation_id=cid)
            first_prompt = len(scheduler_model_tokens(scheduler, messages))
            fresh_ids, _, fresh = ask(scheduler, follow_up, use_cache=False)
            # Each conversation restores its own state: its first prompt, as the rule allows.
            assert cached.usage.cached_tokens == served(first_prompt, cached.usage.prompt_tokens) > 0
            assert fresh.usage.cached_tokens == 0
            assert cached_ids == fresh_ids
    finally:
        close(scheduler, cache)


def scheduler_model_tokens(scheduler: Scheduler, messages: list[dict]) -> list[int]:
    (model,) = scheduler.loaded_models()
    return model.chat_tokens(messages)


def test_gemma_sliding_window_state_resumes_with_identical_tokens(gemma_path: Path, tmp_path: Path) -> None:
    record = record_for(gemma_path, "gemma-3-270m:q4_k_m")
    first = [{"role": "user", "content": "I am painting my kitchen and would like some ideas. " * 6
              + "List the colours of the rainbow, then name three fruits."}]
    scheduler, cache = scheduler_at(tmp_path, record)
    _, answer, _ = ask(scheduler, first, conversation_id=1)
    close(scheduler, cache)
    follow_up = first + [{"role": "assistant", "content": answer}, {"role": "user", "content": "Which is red?"}]
    scheduler, cache = scheduler_at(tmp_path, record)
    try:
        cached_ids, _, cached = ask(scheduler, follow_up, conversation_id=1)
        fresh_ids, _, _ = ask(scheduler, follow_up, use_cache=False)
        assert cached.usage.cached_tokens > 0
        assert cached_ids == fresh_ids
    finally:
        close(scheduler, cache)


def test_regenerate_and_edit_after_restart_reuse_the_common_prefix(home: Path) -> None:
    settings = {"max_tokens": 8, "temperature": 0.0}
    with Engine() as engine:
        conversation = engine.chats.new_conversation(system_prompt=SYSTEM["content"])
        engine.chats.send(conversation.id, "Do you sell rye bread?", **settings).wait()
        engine.chats.send(conversation.id, "Is it baked daily?", **settings).wait()
        first_user = engine.store.messages(conversation.id)[0]

    with Engine() as engine:  # restart
        turn = engine.chats.regenerate(conversation.id, **settings)
        regenerated = turn.wait()
        prompt, cached = turn.finished.usage.prompt_tokens, turn.finished.usage.cached_tokens
        assert cached == served(prompt, prompt) > 0  # all but the last tokens (tests/prefix_rule.py)
        reference = engine.chats.regenerate(conversation.id, use_cache=False, **settings)
        assert reference.wait().content == regenerated.content and reference.finished.usage.cached_tokens == 0

    with Engine() as engine:  # restart again, then edit the first question
        turn = engine.chats.edit_and_resend(first_user.id, "Do you sell spelt bread?", **settings)
        edited = turn.wait()
        usage = turn.finished.usage
        system_tokens = len(engine.scheduler.loaded_models()[0].chat_tokens([SYSTEM]))
        # The system prompt (and the start of the question) comes from the saved state.
        # (Up to an aligned position, never the prompt's last tokens: tests/prefix_rule.py.)
        readable = usage.prompt_tokens - least_read_again()
        assert min(system_tokens - 5, readable) - alignment() <= usage.cached_tokens <= min(system_tokens + 5, readable)
        assert usage.cached_tokens > 0
        reference = engine.chats.edit_and_resend(
            engine.store.messages(conversation.id)[0].id, "Do you sell spelt bread?", use_cache=False, **settings
        )
        assert reference.wait().content == edited.content


def test_a_branch_starts_from_its_source_conversations_saved_state(home: Path) -> None:
    """"Branch from here" after a restart: the new conversation's first answer restores the
    shared beginning from the source's saved state, and answers as a full prefill does."""
    settings = {"max_tokens": 8, "temperature": 0.0}
    with Engine() as engine:
        conversation = engine.chats.new_conversation(system_prompt=SYSTEM["content"])
        engine.chats.send(conversation.id, "Do you sell rye bread?", **settings).wait()
        engine.chats.send(conversation.id, "Is it baked daily?", **settings).wait()
        first_answer = engine.store.messages(conversation.id)[1]

    with Engine() as engine:  # restart: nothing is resident
        branch = engine.chats.branch(first_answer.id)
        turn = engine.chats.send(branch.id, "Is it baked daily?", **settings)
        answer = turn.wait()
        prompt, cached = turn.finished.usage.prompt_tokens, turn.finished.usage.cached_tokens
        assert cached == served(prompt, prompt) > 0  # the source's second prompt, the same tokens
        reference = engine.chats.regenerate(branch.id, use_cache=False, **settings)
        assert reference.wait().content == answer.content and reference.finished.usage.cached_tokens == 0


def test_api_prefix_hits_survive_an_engine_restart(home: Path) -> None:
    long_system = {"role": "system", "content": SYSTEM["content"] * 3}  # well past one 64-token block
    messages = [long_system, {"role": "user", "content": "What flour do you use for croissants?"}]
    with Engine() as engine:
        model_id = engine.default_model_id()
        first_text, first = engine.scheduler.submit(
            GenerateJob(model_id=model_id, sampling=GREEDY, messages=messages)
        ).result()
        assert first.usage.cached_tokens == 0
    assert list((home / "cache" / "states").glob(f"pfx-*{SUFFIX}"))

    with Engine() as engine:  # a restarted server: no conversation id, same messages
        text, again = engine.scheduler.submit(GenerateJob(model_id=model_id, sampling=GREEDY, messages=messages)).result()
        assert again.usage.cached_tokens == served(first.usage.prompt_tokens, again.usage.prompt_tokens) > 0
        assert text == first_text
        grown = messages + [{"role": "assistant", "content": text}, {"role": "user", "content": "And for bread?"}]
        _, grew = engine.scheduler.submit(GenerateJob(model_id=model_id, sampling=GREEDY, messages=grown)).result()
        assert grew.usage.cached_tokens >= served(first.usage.prompt_tokens, grew.usage.prompt_tokens) > 0
        _, bypass = engine.scheduler.submit(
            GenerateJob(model_id=model_id, sampling=GREEDY, messages=grown, use_cache=False)
        ).result()
        assert bypass.usage.cached_tokens == 0


def test_no_cache_writes_nothing_and_deleting_a_conversation_deletes_its_state(home: Path) -> None:
    states = home / "cache" / "states"
    with Engine() as engine:
        bypassed = engine.chats.new_conversation(system_prompt=SYSTEM["content"])
        turn = engine.chats.send(bypassed.id, "Hello?", use_cache=False, max_tokens=4)
        turn.wait()
        engine.cache.flush()
        assert turn.finished.usage.cached_tokens == 0
        assert not list(states.glob(f"*{SUFFIX}"))

        kept = engine.chats.new_conversation(system_prompt=SYSTEM["content"])
        engine.chats.send(kept.id, "Hello?", max_tokens=4).wait()
        engine.cache.flush()
        assert list(states.glob(f"conv-{kept.id}-*{SUFFIX}"))
        usage = engine.cache_usage()
        assert usage.disk_files == 1 and usage.disk_bytes > 0 and usage.disk_budget_bytes == 2048 * MIB
        engine.chats.delete_conversation(kept.id)
        assert not list(states.glob(f"conv-{kept.id}-*{SUFFIX}"))
        assert engine.cache_usage().disk_files == 0


def test_damaged_or_foreign_states_fall_back_to_a_full_prefill(
    smollm2: LoadedModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [SYSTEM, {"role": "user", "content": "Do you bake on Sundays?"}]
    prompt = smollm2.chat_tokens(messages)
    cache = PrefixCache(tmp_path, lambda: 64 * MIB, lambda: 0)
    list(smollm2.generate(prompt, GREEDY, reuse_kv=False))
    sequence0 = smollm2.slot_view(smollm2.slots[0])  # the sequence generate() runs on
    cache.save(sequence0, len(prompt), conversation_id=1)
    cache.close()
    (path,) = tmp_path.glob(f"*{SUFFIX}")
    good = path.read_bytes()
    header, payload = read_state_file(path)
    longer = prompt + smollm2.tokenize(" More bread, please?", add_special=False)

    def payload_garbage(target: Path) -> None:  # well-formed file, valid checksum, nonsense state
        write_state_file(target, StateHeader(header.state_key, "conversation", header.tokens, 1), bytes(len(payload)))

    def payload_short(target: Path) -> None:
        write_state_file(target, StateHeader(header.state_key, "conversation", header.tokens, 1), payload[: len(payload) // 3])

    def foreign(target: Path) -> None:
        other_key = "0" * 64 + header.state_key[header.state_key.index("|"):]
        write_state_file(target, StateHeader(other_key, "conversation", header.tokens, 1), payload)

    damages = {
        "truncated": lambda target: target.write_bytes(good[: len(good) // 2]),
        "bit flip": lambda target: target.write_bytes(good[:-7] + bytes([good[-7] ^ 1]) + good[-6:]),
        "garbage payload": payload_garbage,
        "short payload": payload_short,
        "foreign model": foreign,
    }
    lib = smollm2.context.lib
    for name, damage in damages.items():
        damage(path)
        list(smollm2.generate(prompt[:3], SamplingParams(max_tokens=1), reuse_kv=False))  # KV: 3 tokens
        caplog.clear()
        with caplog.at_level(logging.INFO):
            restored = PrefixCache(tmp_path, lambda: 64 * MIB, lambda: 0).restore(sequence0, longer, conversation_id=1)
        assert restored == 0, name
        assert caplog.records, f"{name}: no log line"
        # Whatever happened, llama.cpp's KV and our token list still agree.
        assert lib.llama_memory_seq_pos_max(smollm2.context.memory, 0) == len(smollm2.kv_tokens) - 1, name
    # The intact file restores (trimmed to what it shares with the new prompt) and the
    # continuation is exactly what a full prefill gives.
    path.write_bytes(good)
    list(smollm2.generate(prompt[:3], SamplingParams(max_tokens=1), reuse_kv=False))
    assert PrefixCache(tmp_path, lambda: 64 * MIB, lambda: 0).restore(sequence0, longer, conversation_id=1) == served(len(prompt), len(longer))
    restored_ids = [t for e in smollm2.generate(longer, GREEDY) if isinstance(e, Chunk) for t in e.token_ids]
    fresh_ids = [t for e in smollm2.generate(longer, GREEDY, reuse_kv=False) if isinstance(e, Chunk) for t in e.token_ids]
    assert restored_ids == fresh_ids

"""The state-file format and the prefix cache's bookkeeping (budgets, LRU, isolation, lookups).

The cache is driven by ``StateModel``: a stand-in for LoadedModel's state interface whose
"KV state" is bytes derived from the tokens, so a restore can be checked for exactly the
state that was saved. The real llama.cpp path is in tests/integration/test_prefix_cache.py.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from inglenook.engine.base.errors import StateFileInvalid
from inglenook.engine.store.cache import MIB, PrefixCache
from inglenook.engine.store.cache_keys import BLOCK, key_hash
from inglenook.engine.store.statefile import (
    FORMAT_VERSION, MAGIC, SUFFIX, StateHeader, read_header, read_state_file, write_state_file,
)

KEY = "fp-abc|kv=f16;fa=off|llama-cpp-python 0.3.36"


# -- the file format -----------------------------------------------------------------------


def make_file(path: Path, tokens: list[int], payload: bytes, key: str = KEY) -> StateHeader:
    header = StateHeader(state_key=key, kind="conversation", tokens=tokens, conversation_id=7, prompt_tokens=len(tokens))
    write_state_file(path, header, payload)
    return header


def test_round_trip_keeps_tokens_payload_and_meta(tmp_path: Path) -> None:
    path = tmp_path / f"a{SUFFIX}"
    payload = os.urandom(10_000)
    make_file(path, [1, 2, 3, 50_000], payload)
    header, data = read_state_file(path, expected_key=KEY)
    assert header.tokens == [1, 2, 3, 50_000]
    assert bytes(data) == payload
    assert header.conversation_id == 7 and header.kind == "conversation"
    assert header.model_fingerprint == "fp-abc"
    meta = header.meta()
    assert meta["kv_layout"] == "kv=f16;fa=off" and meta["llama_build"] == "llama-cpp-python 0.3.36"
    assert path.read_bytes().startswith(MAGIC)
    assert read_header(path).tokens == [1, 2, 3, 50_000]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


@pytest.mark.parametrize("cut", [0, 5, 30, 40, 60, -1, -500])
def test_truncated_files_are_rejected(tmp_path: Path, cut: int) -> None:
    path = tmp_path / f"a{SUFFIX}"
    make_file(path, list(range(20)), os.urandom(1000))
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    with pytest.raises(StateFileInvalid):
        read_state_file(path)


def test_flipped_payload_byte_fails_the_checksum(tmp_path: Path) -> None:
    path = tmp_path / f"a{SUFFIX}"
    make_file(path, list(range(20)), os.urandom(1000))
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x40
    path.write_bytes(bytes(data))
    read_header(path)  # the header itself is still fine
    with pytest.raises(StateFileInvalid, match="checksum"):
        read_state_file(path)


def test_flipped_token_fails_the_header_checksum(tmp_path: Path) -> None:
    path = tmp_path / f"a{SUFFIX}"
    make_file(path, [10] * 20, b"x" * 100)
    data = bytearray(path.read_bytes())
    data[-100 - 4] ^= 0x01  # last token id
    path.write_bytes(bytes(data))
    with pytest.raises(StateFileInvalid, match="header checksum"):
        read_header(path)


def test_wrong_magic_version_and_key_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / f"a{SUFFIX}"
    make_file(path, [1, 2], b"payload")
    data = bytearray(path.read_bytes())
    wrong_version = data.copy()
    wrong_version[8:10] = struct.pack("<H", FORMAT_VERSION + 1)
    path.write_bytes(bytes(wrong_version))
    with pytest.raises(StateFileInvalid, match="version"):
        read_header(path)
    path.write_bytes(b"GGUF" + bytes(data[4:]))
    with pytest.raises(StateFileInvalid, match="not an Inglenook state file"):
        read_header(path)
    path.write_bytes(bytes(data))
    with pytest.raises(StateFileInvalid, match="another model"):
        read_state_file(path, expected_key="fp-other|kv=f16;fa=off|llama-cpp-python 0.3.36")


def test_missing_file_is_an_invalid_state_not_a_crash(tmp_path: Path) -> None:
    with pytest.raises(StateFileInvalid):
        read_header(tmp_path / "nothing.ilstate")


# -- the cache's bookkeeping with a stand-in model ------------------------------------------------


class _Record:
    id = "stand-in"


class StateModel:
    """LoadedModel's state interface; the "state" is a deterministic function of the tokens."""

    n_swa = 0

    def __init__(self, key: str = KEY, n_ctx: int = 100_000, bytes_per_token: int = 1000) -> None:
        self._key = key
        self.n_ctx = n_ctx
        self.record = _Record()
        self.kv_tokens: list[int] = []
        self.bytes_per_token = bytes_per_token
        self.imports: list[tuple[int, int]] = []  # (tokens in the state, kept)

    def state_key(self) -> str:
        return self._key

    def reusable_prefix(self, prompt: list[int], shared: int = 0) -> int:
        common = 0
        while common < min(len(self.kv_tokens), len(prompt) - 2) and self.kv_tokens[common] == prompt[common]:
            common += 1
        return common

    def reusable_length(self, prompt_tokens: int, common: int, shared: int = 0) -> int:
        return min(common, prompt_tokens - 2)  # this stand-in's rule: the last two read again

    def state_of(self, tokens: list[int]) -> bytearray:
        rng = np.random.default_rng(sum(tokens) + len(tokens))
        return bytearray(rng.integers(0, 256, len(tokens) * self.bytes_per_token, dtype=np.uint8).tobytes())

    def export_sequence(self, limit: int | None = None, destination=None):
        if limit is not None:
            del self.kv_tokens[limit:]
        if not self.kv_tokens:
            return None
        state = self.state_of(self.kv_tokens)
        buffer = destination(len(state)) if destination is not None else None
        if buffer is None:
            return list(self.kv_tokens), state
        buffer[:] = np.frombuffer(bytes(state), dtype=np.uint8)  # as llama.cpp copies into it
        return list(self.kv_tokens), buffer

    def import_sequence(self, tokens: list[int], payload: bytearray, keep: int) -> int:
        assert bytes(payload) == bytes(self.state_of(tokens)), "restored bytes differ from the saved state"
        self.imports.append((len(tokens), keep))
        self.kv_tokens = list(tokens[:keep])
        return keep


def cache_at(path: Path, disk_mib: float = 64, ram_mib: float = 64) -> PrefixCache:
    return PrefixCache(path, lambda: int(disk_mib * MIB), lambda: int(ram_mib * MIB))


def turn(cache: PrefixCache, model: StateModel, prompt: list[int], conversation_id: int | None = None, answer: int = 5) -> int:
    """What the scheduler does: restore, 'generate' (prefill the rest, decode ``answer``), save."""
    restored = cache.restore(model, prompt, conversation_id)
    common = 0
    while common < min(len(model.kv_tokens), len(prompt) - 2) and model.kv_tokens[common] == prompt[common]:
        common += 1
    cache.prompts_read()  # the scheduler's word once the prompt is read (the spare pages in)
    model.kv_tokens = list(prompt) + [900_000 + i for i in range(answer)]
    cache.save(model, len(prompt), conversation_id)
    cache.prompts_read()  # and when it is idle after the save
    return max(restored, common)


def test_conversation_state_survives_a_restart(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    turn(cache, StateModel(), list(range(300)), conversation_id=1)
    cache.close()
    fresh, model = cache_at(tmp_path), StateModel()
    # Saved: the prompt but its last two tokens (what a resend of the same prompt reuses).
    assert fresh.restore(model, list(range(300)) + [900_000, 900_001, 900_002, 5, 6], conversation_id=1) == 298
    assert model.imports == [(298, 298)]


def test_two_conversations_never_see_each_others_state(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    shared = list(range(400))
    turn(cache, StateModel(), shared + [1, 2, 3], conversation_id=1)
    cache.close()
    fresh, model = cache_at(tmp_path), StateModel()
    # Conversation 2 shares 400 tokens with conversation 1, yet finds nothing of it.
    assert fresh.restore(model, shared + [7, 8, 9], conversation_id=2) == 0
    assert model.imports == []
    assert fresh.restore(model, shared + [1, 2, 3, 4, 5], conversation_id=1) == 401


def test_api_prefix_lookup_finds_the_longest_cached_prefix_after_restart(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    system = list(range(10_000, 10_000 + 3 * BLOCK + 10))
    turn(cache, StateModel(), system + [1, 2, 3])
    turn(cache, StateModel(), [5] * (2 * BLOCK))  # unrelated prompt
    cache.close()
    fresh, model = cache_at(tmp_path), StateModel()
    grown = system + [1, 2, 3] + [900_000, 900_001] + [42] * 20
    assert fresh.restore(model, grown) == len(system) + 1
    model.kv_tokens = []
    # A different question after the same system prompt reuses the system prompt.
    assert fresh.restore(model, system + [77, 78]) == len(system)
    model.kv_tokens = []
    # Shorter than one block shared: no hit.
    assert fresh.restore(model, system[: BLOCK - 1] + [1] * 200) == 0


def test_a_grown_prompt_supersedes_the_entry_it_extends(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    model = StateModel()
    history = list(range(3 * BLOCK))
    turn(cache, model, history)
    turn(cache, model, history + [900_000 + i for i in range(5)] + [1, 2, 3])
    cache.flush()
    assert len(list(tmp_path.glob(f"pfx-*{SUFFIX}"))) == 1


def test_disk_budget_is_respected_least_recently_used_first(tmp_path: Path) -> None:
    # Each state is 500 tokens × 1000 bytes ≈ 0.48 MiB; the budget holds two of them.
    cache = cache_at(tmp_path, disk_mib=1.0, ram_mib=0)
    model = StateModel()
    for conversation in (1, 2):
        turn(cache, model, [conversation] * 495, conversation_id=conversation)
        cache.flush()
    # Recency is a file's mtime: stated here, not left to the clock's resolution between writes.
    now = time.time()
    for conversation, age_s in ((1, 100), (2, 50)):  # 2 was used after 1
        (path,) = tmp_path.glob(f"conv-{conversation}-*{SUFFIX}")
        os.utime(path, (now - age_s, now - age_s))
    model.kv_tokens = []
    assert cache.restore(model, [1] * 495 + [900_000] * 5 + [3], conversation_id=1) > 0  # 1 is now fresher than 2
    turn(cache, model, [3] * 495, conversation_id=3)
    cache.flush()
    names = sorted(p.name.split("-")[1] for p in tmp_path.glob(f"*{SUFFIX}"))
    assert names == ["1", "3"]
    usage = cache.usage()
    assert usage.disk_bytes <= usage.disk_budget_bytes == 1 * MIB
    cache.close()


def test_a_budget_cut_evicts_at_once_and_zero_turns_the_disk_tier_off(tmp_path: Path) -> None:
    budget = {"mib": 64.0}
    cache = PrefixCache(tmp_path, lambda: int(budget["mib"] * MIB), lambda: 0)
    model = StateModel()
    for conversation in (1, 2, 3):
        turn(cache, model, [conversation] * 300, conversation_id=conversation)
    cache.flush()
    assert cache.usage().disk_files == 3
    budget["mib"] = 0.5
    cache.enforce_budget()
    assert cache.usage().disk_files == 1
    budget["mib"] = 0
    cache.enforce_budget()
    turn(cache, model, [4] * 300, conversation_id=4)
    cache.flush()
    assert cache.usage().disk_files == 0


def test_ram_tier_keeps_hot_states_within_its_budget(tmp_path: Path) -> None:
    cache = cache_at(tmp_path, disk_mib=0, ram_mib=1.0)  # RAM only: ~2 states of 0.48 MiB
    model = StateModel()
    for conversation in (1, 2, 3):
        turn(cache, model, [conversation] * 495, conversation_id=conversation)
    usage = cache.usage()
    assert usage.ram_bytes <= usage.ram_budget_bytes and usage.ram_entries == 2
    assert usage.disk_files == 0
    model.kv_tokens = []
    assert cache.restore(model, [1] * 500, conversation_id=1) == 0  # evicted, and never on disk
    assert cache.restore(model, [3] * 500, conversation_id=3) > 0


def test_forget_and_clear(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    model = StateModel()
    turn(cache, model, [1] * 300, conversation_id=1)
    turn(cache, model, [2] * 300, conversation_id=2)
    turn(cache, model, [3] * 300)
    cache.flush()
    assert cache.forget_conversation(1) == 1
    model.kv_tokens = []
    assert cache.restore(model, [1] * 310, conversation_id=1) == 0
    assert cache.usage().disk_files == 2
    freed = cache.clear()
    assert freed > 0 and cache.usage().disk_files == 0 and cache.usage().ram_bytes == 0
    assert cache.restore(model, [3] * 310) == 0
    cache.close()


def test_damaged_files_are_ignored_logged_and_removed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = cache_at(tmp_path, ram_mib=0)
    turn(cache, StateModel(), list(range(300)), conversation_id=1)
    cache.close()
    (path,) = tmp_path.glob(f"*{SUFFIX}")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    model = StateModel()
    with caplog.at_level(logging.WARNING, logger="inglenook.engine.store.cache"):
        assert cache_at(tmp_path).restore(model, list(range(310)), conversation_id=1) == 0
    assert "checksum" in caplog.text
    assert model.imports == [] and not path.exists()


def test_foreign_model_and_oversized_states_are_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = cache_at(tmp_path)
    turn(cache, StateModel(key="fp-other|kv=f16;fa=off|x"), list(range(300)), conversation_id=1)
    turn(cache, StateModel(key="fp-other|kv=f16;fa=off|x"), list(range(300)))
    cache.close()
    fresh = cache_at(tmp_path)
    model = StateModel()
    assert fresh.restore(model, list(range(310)), conversation_id=1) == 0
    assert fresh.restore(model, list(range(310))) == 0
    # A state longer than the context is never loaded.
    turn(fresh, StateModel(), list(range(300)), conversation_id=2)
    fresh.close()
    small = StateModel(n_ctx=200)
    with caplog.at_level(logging.INFO, logger="inglenook.engine.store.cache"):
        assert cache_at(tmp_path).restore(small, list(range(199)), conversation_id=2) == 0
    assert "exceed the context" in caplog.text
    assert small.imports == []


def test_states_of_vanished_conversations_are_pruned(tmp_path: Path) -> None:
    cache = cache_at(tmp_path)
    model = StateModel()
    for conversation in (1, 2):
        turn(cache, model, [conversation] * 300, conversation_id=conversation)
    turn(cache, model, [3] * 300)
    cache.flush()
    assert cache.prune_conversations({2}) == 1
    assert [p.name.split("-")[1] for p in tmp_path.glob(f"conv-*{SUFFIX}")] == ["2"]
    assert next(p.name for p in tmp_path.glob(f"pfx-*{SUFFIX}")).startswith(f"pfx-{key_hash(KEY)}-")


def test_saves_copy_into_a_buffer_paged_in_ahead_of_time(tmp_path: Path) -> None:
    import time

    cache = cache_at(tmp_path)
    model = StateModel(bytes_per_token=40_000)  # 12 MB: a spare more than twice a state is not used
    turn(cache, model, list(range(300)), conversation_id=1)
    deadline = time.monotonic() + 5
    while cache._spare is None and time.monotonic() < deadline:  # prepared on a helper thread
        time.sleep(0.01)
    spare = cache._spare
    assert spare is not None and len(spare) > 300 * model.bytes_per_token
    turn(cache, model, list(range(300)) + [900_000, 900_001, 900_002] + list(range(7, 40)), conversation_id=1)
    (entry,) = [e for e in cache._entries.values()]
    assert entry.payload.base is spare  # the copy landed in the spare, not in fresh memory
    cache.close()
    # What was saved through the spare restores byte for byte after a restart.
    fresh, again = cache_at(tmp_path), StateModel(bytes_per_token=40_000)
    assert fresh.restore(again, list(range(300)) + [900_000, 900_001, 900_002] + list(range(7, 45)), 1) > 300


def test_a_window_state_envelope_round_trips_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    # A sliding-window model's saved state: the full state, then its window checkpoints
    # (runtime/swa_checkpoints.py), stored by the state file as one opaque payload.
    from inglenook.engine.runtime.slots import Checkpoint
    from inglenook.engine.runtime.swa_checkpoints import pack, packed_size, unpack

    state = np.arange(100, dtype=np.uint8)
    checkpoints = [Checkpoint(512, np.full(40, 7, dtype=np.uint8)), Checkpoint(1856, np.full(24, 9, dtype=np.uint8))]
    payload = np.empty(packed_size(len(state), checkpoints), dtype=np.uint8)
    payload[:len(state)] = state
    pack(payload, len(state), checkpoints)
    header = StateHeader(state_key="fp|kv=f16;fa=on;swa=window|b", kind="conversation", tokens=[1, 2, 3],
                         conversation_id=1)
    write_state_file(tmp_path / f"a{SUFFIX}", header, payload)
    _, read = read_state_file(tmp_path / f"a{SUFFIX}")
    unpacked = unpack(read)
    assert unpacked is not None
    full, got = unpacked
    assert full.tobytes() == state.tobytes()
    assert [(c.position, c.payload.tobytes()) for c in got] == [(c.position, c.payload.tobytes()) for c in checkpoints]
    # A state without an envelope (or one cut short) is not read as one.
    assert unpack(state) is None
    assert unpack(read[:-1]) is None
    assert unpack(read[:len(state) + 10]) is None


def test_window_checkpoints_are_thinned_evenly_keeping_the_newest() -> None:
    from inglenook.engine.runtime.slots import MAX_CHECKPOINTS, MIN_CHECKPOINTS, Checkpoint
    from inglenook.engine.runtime.swa_checkpoints import thinned as thin

    def thinned(positions: list[int], limit: int) -> list[int]:
        return [c.position for c in thin([Checkpoint(p, None) for p in positions], limit)]

    positions = thinned([*range(512, 512 * 14, 512), 512 * 14 + 64], MAX_CHECKPOINTS)
    assert len(positions) == MAX_CHECKPOINTS and positions[-2:] == [512 * 13, 512 * 14 + 64]
    gaps = [b - a for a, b in zip(positions, positions[1:])]
    assert max(gaps) <= 3 * min(gaps)  # spread over the sequence, not only its newest part
    # A context that pays for two keeps the last prompt's end pair (an edit of its last
    # question, a regenerate), however close together, over older ones further apart.
    assert thinned([512, 1024, 1504, 1536, 2496, 2528], MIN_CHECKPOINTS) == [2496, 2528]
    assert thinned([512, 1024, 2496, 2528], 0) == [2496, 2528]  # never fewer than the pair


def test_window_start_for_sliding_windows_and_chunks() -> None:
    from inglenook.engine.runtime.swa_checkpoints import window_needed_from, window_start

    # A sliding window of 512: position 1,000 attends to 489..1,000; a checkpoint taken when
    # a sequence ends at 1,000 holds 512 cells; going on at 1,000 needs 488 on (one more, as
    # llama.cpp's server asks), the first cell such a checkpoint holds.
    assert window_start(1000, 512, chunked=False) == 489
    assert 1000 - window_start(999, 512, chunked=False) == 512
    assert window_needed_from(1000, 512, chunked=False) == 488
    assert window_start(100, 512, chunked=False) == window_needed_from(100, 512, chunked=False) == 0
    # Chunks of 8,192: position 9,000 attends to 8,192..9,000; a new chunk's first token to
    # itself only, so a sequence goes on at 8,192 with nothing before it in those layers.
    assert window_start(9000, 8192, chunked=True) == window_needed_from(9000, 8192, chunked=True) == 8192
    assert window_needed_from(8192, 8192, chunked=True) == 8192
    assert 8192 - window_start(8191, 8192, chunked=True) == 8192
    assert 8200 - window_start(8199, 8192, chunked=True) == 8

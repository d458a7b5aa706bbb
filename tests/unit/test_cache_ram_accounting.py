"""The prompt cache's RAM tier counts the memory its states keep alive, not only their bytes.

The soak (issue 14) grew to 2.5 GB with a 512 MiB RAM tier: a state copied into the paged-in
spare buffer is a view of it, so each small conversation state kept the spare's 8 MiB of
headroom alive while the tier counted only the state's own size. These tests add up what
the entries really hold (the buffer each payload is a view of) and check it against the
budget.
"""

from __future__ import annotations

import time
import weakref
from pathlib import Path

import numpy as np
from inglenook.engine.store.cache import PrefixCache

from tests.unit.test_statefile import StateModel, cache_at, turn


def buffer_of(payload: object) -> np.ndarray | bytearray:
    """The allocation a payload lives in: the array a numpy view was cut from."""
    if isinstance(payload, np.ndarray) and isinstance(payload.base, np.ndarray):
        return payload.base
    assert isinstance(payload, (np.ndarray, bytearray))
    return payload


def memory_held(cache: PrefixCache) -> int:
    """Bytes of every distinct buffer the RAM tier's payloads keep alive."""
    buffers = {id(buffer_of(e.payload)): buffer_of(e.payload) for e in cache._entries.values() if e.payload is not None}
    return sum(b.nbytes if isinstance(b, np.ndarray) else len(b) for b in buffers.values())


def wait_for_spare(cache: PrefixCache) -> None:
    """The spare is paged in on a helper thread; the next save should find it ready."""
    deadline = time.monotonic() + 10
    while cache._spare is None and time.monotonic() < deadline:
        time.sleep(0.01)


def test_small_states_never_keep_the_spares_headroom(tmp_path: Path) -> None:
    budget_mib = 16  # room for the spare (8 MiB of headroom), which a smaller budget never prepares
    cache = cache_at(tmp_path, disk_mib=64, ram_mib=budget_mib)
    model = StateModel(bytes_per_token=1000)  # ~0.3 MB per state, far under the spare's headroom
    for conversation in range(1, 13):
        turn(cache, model, [conversation] * 300, conversation_id=conversation)
        wait_for_spare(cache)
    usage = cache.usage()
    assert usage.ram_entries == 12  # all of them fit the budget at their real size
    assert memory_held(cache) == usage.ram_bytes <= budget_mib * 2**20
    cache.close()


def test_a_state_in_the_spare_counts_the_whole_spare_and_leaves_with_its_entry(tmp_path: Path) -> None:
    cache = cache_at(tmp_path, disk_mib=0, ram_mib=40)  # RAM only: an evicted state is gone
    model = StateModel(bytes_per_token=40_000)  # 12 MB states: the spare (state + 8 MiB) is used
    turn(cache, model, list(range(300)), conversation_id=1)
    wait_for_spare(cache)
    spare = cache._spare
    assert spare is not None
    spare_gone = weakref.ref(spare)
    del spare
    turn(cache, model, list(range(300)) + list(range(36)), conversation_id=1)
    (entry,) = cache._entries.values()
    assert entry.payload is not None and entry.payload.base is spare_gone()
    assert cache.usage().ram_bytes == memory_held(cache) == spare_gone().nbytes > len(entry.payload)
    for conversation in (2, 3, 4):  # more states than the budget holds
        wait_for_spare(cache)
        turn(cache, model, [conversation] * 300, conversation_id=conversation)
        usage = cache.usage()
        assert memory_held(cache) == usage.ram_bytes <= usage.ram_budget_bytes
    assert 1 not in {e.conversation_id for e in cache._entries.values()}
    assert spare_gone() is None  # evicted with its entry: nothing else holds the buffer
    cache.close()

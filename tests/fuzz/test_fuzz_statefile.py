"""Property-based tests for the state-file reader: damaged files are StateFileInvalid, nothing else.

Both checksums are recomputed after each mutation, so the reader's own validation (not only
the CRC) is what the examples exercise.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inglenook.engine.base.errors import StateFileInvalid
from inglenook.engine.store.statefile import MAGIC, StateHeader, read_header, read_state_file, write_state_file

EXAMPLES = int(os.environ.get("INGLENOOK_FUZZ_EXAMPLES", "50"))
_FIXED = struct.Struct("<8sHHIIQII")

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


def _read_both(path: Path) -> None:
    for reader in (read_header, read_state_file):
        try:
            reader(path)
        except StateFileInvalid:
            pass


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    meta=st.one_of(_json, st.fixed_dictionaries({"state_key": _json, "kind": _json}, optional={
        "conversation_id": _json, "prompt_tokens": _json, "model_id": _json, "created_at": _json})),
    raw_meta=st.one_of(st.none(), st.binary(max_size=200), st.just(b"[" * 30_000 + b"]" * 30_000)),
    tokens=st.binary(max_size=64).map(lambda b: b[: len(b) // 4 * 4]),
    payload=st.binary(max_size=256),
    lies=st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**64 - 1)),
    lie=st.sampled_from(["none", "meta_len", "n_tokens", "payload_size"]),
    version=st.sampled_from([1, 1, 1, 0, 2, 65535]),
)
def test_crafted_files_with_valid_checksums(
    tmp_path: Path, meta: object, raw_meta: bytes | None, tokens: bytes, payload: bytes,
    lies: tuple[int, int, int], lie: str, version: int,
) -> None:
    meta_bytes = raw_meta if raw_meta is not None else json.dumps(meta).encode()
    meta_len, n_tokens, payload_size = len(meta_bytes), len(tokens) // 4, len(payload)
    if lie == "meta_len":
        meta_len = lies[0]
    elif lie == "n_tokens":
        n_tokens = lies[1]
    elif lie == "payload_size":
        payload_size = lies[2]
    header_crc = zlib.crc32(tokens, zlib.crc32(meta_bytes))
    fixed = _FIXED.pack(MAGIC, version, 0, meta_len, n_tokens, payload_size, header_crc, zlib.crc32(payload))
    path = tmp_path / "fuzz.ilstate"
    path.write_bytes(fixed + meta_bytes + tokens + payload)
    _read_both(path)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 400), flips=st.lists(st.tuples(st.integers(0, 399), st.integers(0, 255)), max_size=3))
def test_truncated_or_flipped_real_files(tmp_path: Path, cut: int, flips: list[tuple[int, int]]) -> None:
    path = tmp_path / "real.ilstate"
    write_state_file(path, StateHeader(state_key="fp|kv|build", kind="conversation", tokens=[1, 2, 3],
                                       conversation_id=4), b"x" * 200)
    data = bytearray(path.read_bytes())
    for where, value in flips:
        if where < len(data):
            data[where] = value
    path.write_bytes(bytes(data[:cut]))
    _read_both(path)

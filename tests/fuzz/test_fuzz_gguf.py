"""Property-based tests for the GGUF header reader: whatever the bytes, only ModelLoadError.

Random headers (magic, version, counts), random metadata trees (types, counts, nesting),
and truncations of valid files. Every case also checks that memory stays bounded. A longer
run: ``scripts/fuzz_long.sh`` (HYPOTHESIS_PROFILE=long).
"""

from __future__ import annotations

import os
import struct
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inglenook.engine.base.errors import ModelLoadError
from inglenook.engine.base.gguf import parse_gguf_header, read_gguf
from tests.gguf_writer import write_gguf

EXAMPLES = int(os.environ.get("INGLENOOK_FUZZ_EXAMPLES", "50"))
# Python allocations allowed for one header of at most a few hundred kB.
MEMORY_LIMIT = 16 * 1024 * 1024

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _check(data: bytes) -> None:
    """Parse ``data``; anything but success or ModelLoadError fails, and so does a memory spike."""
    tracemalloc.start()
    try:
        try:
            parse_gguf_header(data, "fuzz.gguf", len(data))
        except ModelLoadError:
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT + 4 * len(data)


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


@st.composite
def _value(draw: st.DrawFn, depth: int = 0) -> tuple[int, bytes]:
    """A metadata value: type and encoding, sometimes with a lying count."""
    kinds = ["scalar", "string", "bad_type"] + (["array"] if depth < 8 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "scalar":
        code = draw(st.sampled_from(sorted(_SCALARS)))
        return code, draw(st.binary(min_size=struct.calcsize(_SCALARS[code]), max_size=struct.calcsize(_SCALARS[code])))
    if kind == "string":
        text = draw(st.binary(max_size=64))
        claimed = draw(st.one_of(st.just(len(text)), st.integers(0, 2**64 - 1)))
        return 8, struct.pack("<Q", claimed) + text
    if kind == "bad_type":
        return draw(st.integers(13, 2**32 - 1)), draw(st.binary(max_size=16))
    items = draw(st.lists(_value(depth + 1), max_size=4))
    item_type = items[0][0] if items else draw(st.integers(0, 2**32 - 1))
    claimed = draw(st.one_of(st.just(len(items)), st.integers(0, 2**64 - 1)))
    return 9, struct.pack("<IQ", item_type, claimed) + b"".join(body for _, body in items)


@st.composite
def _header(draw: st.DrawFn) -> bytes:
    magic = draw(st.sampled_from([b"GGUF", b"GGUF", b"GGUF", b"GGML", b"\0\0\0\0"]))
    version = draw(st.sampled_from([2, 3, 3, 1, 0, 2**32 - 1]))
    pairs = draw(st.lists(st.tuples(st.binary(max_size=24), _value()), max_size=6))
    kv_count = draw(st.one_of(st.just(len(pairs)), st.integers(0, 2**64 - 1)))
    tensors = draw(st.lists(st.tuples(
        st.binary(max_size=12), st.lists(st.integers(0, 2**64 - 1), max_size=5),
        st.integers(0, 40), st.integers(0, 2**64 - 1),
    ), max_size=4))
    tensor_count = draw(st.one_of(st.just(len(tensors)), st.integers(0, 2**64 - 1)))
    blob = magic + struct.pack("<IQQ", version, tensor_count, kv_count)
    for key, (code, body) in pairs:
        blob += _string(key) + struct.pack("<I", code) + body
    for name, shape, ggml_type, offset in tensors:
        blob += _string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        blob += struct.pack("<IQ", ggml_type, offset)
    return blob + draw(st.binary(max_size=256))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_header())
def test_random_headers_only_raise_model_load_error(data: bytes) -> None:
    _check(data)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_after_the_magic(data: bytes) -> None:
    _check(b"GGUF" + struct.pack("<I", 3) + data)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.0, 1.0), flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=4))
def test_truncated_or_flipped_valid_files(tmp_path: Path, cut: float, flips: list[tuple[float, int]]) -> None:
    path = tmp_path / "valid.gguf"
    if not path.exists():
        write_gguf(path, metadata={"tokenizer.ggml.tokens": ["a", "b", "c"], "tokenizer.ggml.bos_token_id": 1,
                                   "tokenizer.chat_template": "{{ x }}", "nested": [[1, 2], [3]]})
    data = bytearray(path.read_bytes())
    for where, value in flips:
        data[int(where * (len(data) - 1))] = value
    data = data[: int(cut * len(data))]
    _check(bytes(data))
    # The same bytes through the file path (mmap) behave the same way.
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(bytes(data))
    try:
        read_gguf(damaged)
    except ModelLoadError:
        pass


_metadata_values = st.one_of(
    st.integers(0, 2**32 - 1),
    st.text(max_size=40),
    st.booleans(),
    st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=600),
    st.lists(st.text(max_size=8), min_size=1, max_size=20),
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(min_size=1, max_size=20).map(lambda k: "x." + k), _metadata_values, max_size=8))
def test_valid_metadata_reads_back(tmp_path: Path, metadata: dict) -> None:
    """The limits never reject a well-formed header: short values come back as written."""
    path = write_gguf(tmp_path / "valid.gguf", metadata=metadata)
    info = read_gguf(path)
    for key, value in metadata.items():
        got = info.metadata[key]
        if isinstance(value, list) and len(value) > 512:
            assert got.length == len(value)  # long arrays are kept as a count
        else:
            assert got == value

"""Read and validate a GGUF file's header without loading its weights.

llama.cpp aborts or crashes on some malformed files; everything it would trip over is
checked here first, in Python, so a bad file becomes a clear ``ModelLoadError``.
The format is documented in ggml's ``docs/gguf.md``: magic, version, tensor count,
key/value count, the key/value pairs, the tensor infos, then aligned tensor data.

Why one file of ~460 lines: the reader and the bounds it enforces (depth, array sizes, string
lengths) are one parser; splitting them would separate each read from its check.
"""

from __future__ import annotations

import io
import logging
import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from .errors import ModelLoadError

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32

# Limits far above any real model, so that a corrupt or hostile count is caught before we
# allocate or loop over it (rule 7 of docs/ARCHITECTURE.md: GGUF metadata depth and sizes are bounded).
MAX_TENSORS = 100_000
MAX_KV_PAIRS = 100_000
MAX_DIMS = 4
MAX_STRING_BYTES = 64 * 1024 * 1024
#: Arrays inside arrays: real files use none; one level of nesting is allowed, a little more
#: is tolerated, and anything deeper is refused (it was a RecursionError, not an error).
MAX_ARRAY_DEPTH = 4
#: A vocabulary larger than this is not a tokenizer (the largest real ones hold ~260k).
MAX_VOCAB = 4 * 1024 * 1024

# Arrays longer than this are kept as a count only (the tokenizer's vocabulary and merges);
# they are skipped over without being decoded, so their cost is time, never memory.
KEEP_ARRAY_LIMIT = 512
#: Items kept over all arrays of one header, and the longest string value kept (a chat
#: template is a few kB): beyond these, values are skipped and stand as stubs.
KEEP_ITEMS_BUDGET = 65_536
MAX_KEPT_STRING_BYTES = 1024 * 1024
# Smallest encoding of one item of each kind, used to refuse counts the file cannot hold.
_MIN_STRING_BYTES = 8
_MIN_ARRAY_BYTES = 12

# Header reads are small and sequential: one buffer serves thousands of them.
_READ_BUFFER = 1024 * 1024
# Long string arrays (a vocabulary, its merges) are walked a block at a time (``skip_strings``).
_WALK_BLOCK = 256 * 1024
_U64 = struct.Struct("<Q")

_SCALAR_FORMATS: dict[int, str] = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}
_STRING, _ARRAY = 8, 9

# ggml tensor types: name, elements per block, bytes per block.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
}

# llama.cpp's ``general.file_type`` (enum llama_ftype): the quantization a file was made with.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
    22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int

    @property
    def n_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @property
    def n_bytes(self) -> int | None:
        info = GGML_TYPES.get(self.ggml_type)
        if info is None:
            return None
        _, block, size = info
        return (self.n_elements + block - 1) // block * size


@dataclass
class GGUFInfo:
    """What a GGUF header says about a model, read without touching the weights."""

    path: Path
    version: int
    file_size: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo] = field(repr=False)
    data_offset: int
    # Special tokens as {role: (id, text)}, e.g. {"bos": (1, "<|im_start|>")}.
    special_tokens: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    vocab_size: int = 0
    # Set once ``gguf_vocabulary.check_vocabulary`` read the whole vocabulary of this parse
    # and found no token twice (the parses are cached: a model loaded again is not re-read).
    vocabulary_checked: bool = field(default=False, compare=False, repr=False)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def name(self) -> str | None:
        value = self.metadata.get("general.name")
        return str(value) if value else None

    @property
    def parameter_count(self) -> int:
        return sum(t.n_elements for t in self.tensors)

    @property
    def quantization(self) -> str:
        file_type = self.metadata.get("general.file_type")
        if isinstance(file_type, int) and file_type in FILE_TYPES:
            return FILE_TYPES[file_type]
        return self._dominant_tensor_type()

    @property
    def bits_per_weight(self) -> float:
        params = self.parameter_count
        return (self.file_size - self.data_offset) * 8 / params if params else 0.0

    @property
    def context_length(self) -> int | None:
        value = self.metadata.get(f"{self.architecture}.context_length")
        return int(value) if isinstance(value, int) else None

    @property
    def block_count(self) -> int | None:
        value = self.metadata.get(f"{self.architecture}.block_count")
        return int(value) if isinstance(value, int) else None

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) and value.strip() else None

    def arch_value(self, key: str) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}")

    def _dominant_tensor_type(self) -> str:
        weights: dict[int, int] = {}
        for tensor in self.tensors:
            if len(tensor.shape) >= 2:
                weights[tensor.ggml_type] = weights.get(tensor.ggml_type, 0) + tensor.n_elements
        if not weights:
            return "unknown"
        dominant = max(weights, key=lambda k: weights[k])
        return GGML_TYPES.get(dominant, (f"type{dominant}", 0, 0))[0]


class _Reader:
    """Bounds-checked little-endian reads from a file (or bytes), by ordinary reads and seeks.

    Not a memory map: a file truncated while it is mapped kills the process with SIGBUS,
    and a model file may be replaced or cut while the models folder is listed. Skipped
    values are seeked over, never read, so a huge array costs neither memory nor I/O.
    """

    def __init__(self, source: BinaryIO, size: int, path: Path) -> None:
        self.source = source
        self.size = size  # bytes the source holds; reads past it are "truncated"
        self.pos = 0
        self.path = path
        self.keep_budget = KEEP_ITEMS_BUDGET

    def fail(self, what: str) -> ModelLoadError:
        return ModelLoadError(f"{self.path.name} is not a valid GGUF file: {what}")

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def skip(self, n: int) -> None:
        if n < 0 or n > self.remaining:
            raise self.fail("the file is truncated (header runs past the end of the file)")
        self.pos += n

    def take(self, n: int) -> bytes:
        start = self.pos
        self.skip(n)
        if self.source.tell() != start:
            self.source.seek(start)  # within the read buffer this costs no system call
        data = self.source.read(n)
        if len(data) != n:  # the file shrank while we read it
            raise self.fail("the file is truncated (it changed while being read)")
        return data

    def peek(self, n: int) -> bytes:
        """Up to ``n`` bytes from the current position, which stays where it is (fewer bytes
        when the file has shrunk: whoever reads past them finds it truncated)."""
        if self.source.tell() != self.pos:
            self.source.seek(self.pos)
        return self.source.read(n)

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def u32(self) -> int:
        return self.scalar("<I")

    def u64(self) -> int:
        return self.scalar("<Q")

    def string_length(self) -> int:
        length = self.u64()
        if length > MAX_STRING_BYTES:
            raise self.fail(f"a string claims {length} bytes")
        return length

    def string(self) -> str:
        return self.take(self.string_length()).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip(self.string_length())

    def skip_strings(self, count: int) -> None:
        """Walk over ``count`` strings, checked as ``skip_string`` checks each one.

        Their lengths are read from blocks of the file rather than eight bytes at a time: a
        vocabulary and its merges are ~100k strings, and one buffered read and unpack per
        length made the walk most of a header's 0.2 s parse, which every model load pays
        (twice: the memory estimate, then the validation right before llama.cpp opens it).
        """
        while count > 0:
            block = self.peek(min(self.remaining, _WALK_BLOCK))
            end = len(block)
            offset = 0
            while count > 0 and offset + 8 <= end:
                (length,) = _U64.unpack_from(block, offset)
                if length > MAX_STRING_BYTES:
                    raise self.fail(f"a string claims {length} bytes")
                if offset + 8 + length > end:
                    break  # it runs past this block: the next block starts with it
                offset += 8 + length
                count -= 1
            if offset:
                self.pos += offset
            else:
                # A string longer than a block, or the end of the file: the plain walk seeks
                # over the one, and says the file is truncated at the other.
                self.skip_string()
                count -= 1

    def value(self, value_type: int, depth: int = 0) -> Any:
        """One metadata value; arrays longer than KEEP_ARRAY_LIMIT come back as an _ArrayStub."""
        if value_type in _SCALAR_FORMATS:
            return self.scalar(_SCALAR_FORMATS[value_type])
        if value_type == _STRING:
            length = self.string_length()
            if length > MAX_KEPT_STRING_BYTES:
                self.skip(length)
                return _SkippedString(length)
            return self.take(length).decode("utf-8", errors="replace")
        if value_type == _ARRAY:
            item_type, count = self.array_header(depth)
            # Only short, flat arrays are kept, and only while the budget lasts: what a header
            # costs in memory is bounded whatever the file holds.
            if depth == 0 and item_type != _ARRAY and count <= min(KEEP_ARRAY_LIMIT, self.keep_budget):
                self.keep_budget -= count
                return [self.value(item_type, depth + 1) for _ in range(count)]
            self.skip_items(item_type, count, depth + 1)
            return _ArrayStub(count, item_type)
        raise self.fail(f"unknown metadata value type {value_type}")

    def array_header(self, depth: int) -> tuple[int, int]:
        """An array's item type and count, refused when the rest of the file cannot hold it."""
        if depth >= MAX_ARRAY_DEPTH:
            raise self.fail(f"arrays are nested more than {MAX_ARRAY_DEPTH} deep")
        item_type = self.u32()
        count = self.u64()
        if item_type in _SCALAR_FORMATS:
            smallest = struct.calcsize(_SCALAR_FORMATS[item_type])
        elif item_type == _STRING:
            smallest = _MIN_STRING_BYTES
        elif item_type == _ARRAY:
            smallest = _MIN_ARRAY_BYTES
        else:
            raise self.fail(f"unknown array item type {item_type}")
        if count * smallest > self.remaining:
            raise self.fail(f"an array claims {count} items but the file has {self.remaining} bytes left")
        return item_type, count

    def skip_items(self, item_type: int, count: int, depth: int) -> None:
        """Walk over ``count`` items without keeping them: time linear in their bytes, no memory."""
        if item_type in _SCALAR_FORMATS:
            self.skip(struct.calcsize(_SCALAR_FORMATS[item_type]) * count)
        elif item_type == _STRING:
            self.skip_strings(count)
        else:
            for _ in range(count):
                inner_type, inner_count = self.array_header(depth)
                self.skip_items(inner_type, inner_count, depth + 1)


@dataclass(frozen=True)
class _SkippedString:
    """Stands for a string value too long to keep (no real metadata string is)."""

    length: int


@dataclass(frozen=True)
class _ArrayStub:
    """Stands for a long array that we skipped over but did not keep."""

    length: int
    item_type: int = -1
    # Where the items start in the file (-1 when not recorded): lets the vocabulary be
    # looked up for the few special tokens without keeping it.
    start: int = field(default=-1, compare=False)


_SPECIAL_TOKEN_KEYS = ("bos", "eos", "eot", "eom", "unknown", "padding", "sep")


def read_gguf(path: Path | str) -> GGUFInfo:
    """Parse and validate a GGUF header. Raises ModelLoadError for anything malformed."""
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    try:
        # O_NONBLOCK: a FIFO named like a model must not block whoever lists the folder.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb", buffering=_READ_BUFFER) as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise ModelLoadError(f"not a file: {path}")
            file_size = status.st_size
            if file_size < 24:
                raise ModelLoadError(f"{path.name} is not a GGUF file (only {file_size} bytes)")
            return _parse(_Reader(handle, file_size, path), file_size)
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path.name}: {exc.strerror or exc}") from exc


def parse_gguf_header(data: bytes, name: str, file_size: int) -> GGUFInfo:
    """Parse a header from a file's first bytes (e.g. fetched with an HTTP Range request).

    ``file_size`` is the whole file's size. A ModelLoadError while ``len(data) < file_size``
    may only mean that the header is longer than ``data``: fetch more and try again.
    """
    return _parse(_Reader(io.BytesIO(data), len(data), Path(name)), file_size)


def _parse(reader: _Reader, file_size: int) -> GGUFInfo:
    """Every way a header can be wrong ends as ModelLoadError, whatever the reader tripped on."""
    path = reader.path
    try:
        return _parse_checked(reader, path, file_size)
    except ModelLoadError:
        raise
    except (ValueError, TypeError, OverflowError, struct.error, RecursionError, MemoryError) as exc:
        # The checks above should leave nothing for these; if one slips through, it is still
        # a bad file, not a crash of whoever listed the models folder.
        log.warning("%s: unexpected %s while reading the header", path.name, type(exc).__name__)
        raise ModelLoadError(f"{path.name} is not a valid GGUF file ({type(exc).__name__})") from None


def _parse_checked(reader: _Reader, path: Path, file_size: int) -> GGUFInfo:
    magic = bytes(reader.take(4))
    if magic != GGUF_MAGIC:
        raise ModelLoadError(f"{path.name} is not a GGUF file (bad magic bytes {magic!r})")
    version = reader.u32()
    if version not in SUPPORTED_VERSIONS:
        raise ModelLoadError(f"{path.name} uses GGUF version {version}; supported: 2 and 3")
    tensor_count = reader.u64()
    kv_count = reader.u64()
    if tensor_count > MAX_TENSORS or kv_count > MAX_KV_PAIRS:
        raise reader.fail(f"absurd counts ({tensor_count} tensors, {kv_count} metadata keys)")
    # Each key/value pair and each tensor info takes at least this many bytes.
    if kv_count * (_MIN_STRING_BYTES + 4) + tensor_count * (_MIN_STRING_BYTES + 28) > reader.remaining:
        raise reader.fail(f"{tensor_count} tensors and {kv_count} metadata keys cannot fit in the file")

    metadata: dict[str, Any] = {}
    for _ in range(kv_count):
        key = reader.string()
        value_type = reader.u32()
        if key == _TOKENS_KEY and value_type == _ARRAY:
            metadata[key] = _read_vocabulary(reader)
        else:
            metadata[key] = reader.value(value_type)

    tensors: list[TensorInfo] = []
    for _ in range(tensor_count):
        name = reader.string()
        n_dims = reader.u32()
        if n_dims == 0 or n_dims > MAX_DIMS:
            raise reader.fail(f"tensor {name!r} has {n_dims} dimensions")
        shape = tuple(reader.u64() for _ in range(n_dims))
        if any(d == 0 or d > 2**40 for d in shape):
            raise reader.fail(f"tensor {name!r} has an absurd shape {shape}")
        ggml_type = reader.u32()
        offset = reader.u64()
        tensors.append(TensorInfo(name, shape, ggml_type, offset))

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise reader.fail(f"bad alignment {alignment!r}")
    data_offset = (reader.pos + alignment - 1) // alignment * alignment
    _check_tensor_data(tensors, data_offset, file_size, path)

    vocabulary = metadata.get(_TOKENS_KEY)
    info = GGUFInfo(
        path=path,
        version=version,
        file_size=file_size,
        metadata=metadata,
        tensors=tensors,
        data_offset=data_offset,
        vocab_size=vocabulary.length if isinstance(vocabulary, _ArrayStub) else 0,
    )
    wanted = {
        role: token_id
        for role in _SPECIAL_TOKEN_KEYS
        if isinstance(token_id := metadata.get(f"tokenizer.ggml.{role}_token_id"), int)
        and not isinstance(token_id, bool)
    }
    texts = _token_texts(reader, vocabulary, set(wanted.values()))
    for role, token_id in wanted.items():
        info.special_tokens[role] = (token_id, texts.get(token_id))
    return info


_TOKENS_KEY = "tokenizer.ggml.tokens"


def vocabulary_start(info: GGUFInfo) -> tuple[int, int]:
    """Where ``info``'s vocabulary (a string array) starts in its file and how many tokens it
    has; (-1, 0) when the parse did not record it (a short vocabulary, kept as a list)."""
    found = info.metadata.get(_TOKENS_KEY)
    if isinstance(found, _ArrayStub) and found.item_type == _STRING and found.start >= 0:
        return found.start, found.length
    return -1, 0


def _read_vocabulary(reader: _Reader) -> _ArrayStub | list[Any]:
    """Skip over the vocabulary, remembering where it starts; only special tokens are decoded."""
    item_type, count = reader.array_header(0)
    if item_type != _STRING:
        raise reader.fail(f"the vocabulary is not a list of strings (item type {item_type})")
    if count > MAX_VOCAB:
        raise reader.fail(f"the vocabulary claims {count} tokens")
    start = reader.pos
    reader.skip_items(item_type, count, 1)
    return _ArrayStub(count, item_type, start)


def _token_texts(reader: _Reader, vocabulary: Any, ids: set[int]) -> dict[int, str]:
    """The text of the vocabulary entries ``ids``, walking the (already checked) array once."""
    if not isinstance(vocabulary, _ArrayStub) or vocabulary.start < 0:
        return {}
    wanted = {i for i in ids if 0 <= i < vocabulary.length}
    if not wanted:
        return {}
    reader.pos = vocabulary.start
    texts: dict[int, str] = {}
    index = 0  # the entry the reader is at
    for token_id in sorted(wanted):
        reader.skip_strings(token_id - index)
        texts[token_id] = reader.string()
        index = token_id + 1
    return texts


def _check_tensor_data(tensors: list[TensorInfo], data_offset: int, file_size: int, path: Path) -> None:
    data_size = file_size - data_offset
    if data_size < 0:
        raise ModelLoadError(f"{path.name} is truncated (no tensor data)")
    for tensor in tensors:
        size = tensor.n_bytes
        if size is None:
            log.warning("%s: tensor %s has unknown type %d", path.name, tensor.name, tensor.ggml_type)
            size = 0
        if tensor.offset + size > data_size:
            raise ModelLoadError(
                f"{path.name} is truncated: tensor {tensor.name!r} ends past the end of the file "
                f"({file_size} bytes); the download may be incomplete"
            )

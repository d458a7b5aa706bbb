"""The prefix cache's keys: how its entries are named, and how a prompt finds a saved prefix.

A *conversation* entry is named by its conversation and the model's state key; a *prefix*
entry (an API prompt, a documents block) by the state key and its tokens, and found through
chained hashes of its tokens at every ``BLOCK``-token boundary (``PrefixIndex``), so a prompt
that shares a saved prompt's first blocks finds it without comparing every entry. The names
are the files' names on disk: the index lives in the files, not in a table (``cache``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from .statefile import SUFFIX, StateHeader

BLOCK = 64  # tokens per content-hash block for prefix entries
MIN_PREFIX_TOKENS = BLOCK  # API prompts shorter than one block are not worth a file
CONVERSATION, PREFIX = "conv", "pfx"  # the first part of an entry's name


@dataclass
class CacheEntry:
    """A saved state the cache knows: its name (and file), header, tokens, and where it is."""

    name: str
    header: StateHeader
    tokens: np.ndarray  # int32, for fast prefix comparison
    payload: bytearray | np.ndarray | None = None  # present while the entry is in the RAM tier
    on_disk: bool = False
    size: int = 0  # RAM the payload holds while in the RAM tier (``held_bytes``)

    @property
    def conversation_id(self) -> int | None:
        return self.header.conversation_id


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def key_hash(state_key: str) -> str:
    return hashlib.sha256(state_key.encode()).hexdigest()[:16]


def block_hashes(state_key: str, tokens: np.ndarray, count: int) -> list[bytes]:
    """Hashes of tokens[:BLOCK], tokens[:2*BLOCK], … (``count`` of them), each chained on the last."""
    digest = hashlib.blake2b(state_key.encode(), digest_size=16).digest()
    out = []
    for k in range(count):
        chunk = tokens[k * BLOCK : (k + 1) * BLOCK].astype("<i4", copy=False).tobytes()
        digest = hashlib.blake2b(digest + chunk, digest_size=16).digest()
        out.append(digest)
    return out


def conversation_name(conversation_id: int, state_key: str) -> str:
    return f"{CONVERSATION}-{int(conversation_id)}-{key_hash(state_key)}"


def conversation_files(conversation_id: int) -> str:
    """A glob for every saved state of a conversation (every model)."""
    return f"{CONVERSATION}-{int(conversation_id)}-*{SUFFIX}"


def conversation_of(file_name: str) -> int | None:
    """The conversation a state file belongs to; None for a prefix entry or another file."""
    parts = file_name.split("-")
    if parts[0] == CONVERSATION and len(parts) >= 3 and parts[1].isdigit():
        return int(parts[1])
    return None


def prefix_name(state_key: str, tokens: np.ndarray) -> str:
    return f"{PREFIX}-{key_hash(state_key)}-{hashlib.sha256(tokens.tobytes()).hexdigest()[:24]}"


def prefix_files(state_key: str) -> str:
    """A glob for the prefix entries of one state key."""
    return f"{PREFIX}-{key_hash(state_key)}-*{SUFFIX}"


def is_prefix_name(name: str) -> bool:
    return name.startswith(f"{PREFIX}-")


@dataclass
class PrefixIndex:
    """Prefix entries of one state key, by chained block hash."""

    blocks: dict[bytes, set[str]] = field(default_factory=dict)
    loaded_from_disk: bool = False

    def add(self, entry: CacheEntry) -> None:
        for digest in block_hashes(entry.header.state_key, entry.tokens, len(entry.tokens) // BLOCK):
            self.blocks.setdefault(digest, set()).add(entry.name)

    def remove(self, entry: CacheEntry) -> None:
        for digest in block_hashes(entry.header.state_key, entry.tokens, len(entry.tokens) // BLOCK):
            names = self.blocks.get(digest)
            if names is not None:
                names.discard(entry.name)
                if not names:
                    del self.blocks[digest]

    def longest(self, state_key: str, prompt: np.ndarray) -> set[str]:
        """The entries that share the most whole blocks with ``prompt`` (its last token apart:
        a prompt always reads at least one token); empty when none shares one."""
        count = (len(prompt) - 1) // BLOCK
        if count == 0:
            return set()
        for digest in reversed(block_hashes(state_key, prompt, count)):
            names = self.blocks.get(digest)
            if names:
                return names
        return set()

    def starting_with(self, entry: CacheEntry) -> set[str]:
        """The entries whose first block is ``entry``'s."""
        if len(entry.tokens) < BLOCK:
            return set()
        return self.blocks.get(block_hashes(entry.header.state_key, entry.tokens, 1)[0], set())

"""The prefix cache: saved KV states of conversations and of API prompts, in RAM and on disk.

Three tiers, cheapest first:

1. the loaded model's own KV cache (``KvSlot.kv_tokens``; ``KvStates.reuse_prefix`` keeps the
   part shared with the next prompt) — free, one sequence;
2. RAM: recently saved states, as the bytes llama.cpp copied out, up to a budget;
3. disk: one state file per entry (``statefile``), up to ``Settings.cache_budget_mb``,
   least recently used evicted first. Files survive restarts.

Two kinds of entry:

- *conversation* entries, named by conversation id and model: a chat turn restores only
  its own conversation's state, so two conversations never see each other's entries;
- *prefix* entries for requests without a conversation (the HTTP API): content-addressed
  by chained hashes of the token ids at every ``BLOCK``-token boundary, so a client that
  resends the same system prompt and a growing history finds the longest saved prefix.

A restored state is only ever used for the tokens it provably shares with the new
prompt (token ids compared one by one), and is trimmed to them; everything else is
prefilled. Any damaged, truncated, foreign or refused file is logged and ignored.

The index lives in the files themselves (each header carries its state key and token
ids; recency is the file's mtime) rather than in a database table: a file and its index
entry cannot disagree after a crash, Clear is "delete the files", and another process
(the GUI and a terminal session at once) sees the same cache without sharing a table.

Here: the policy (what is restored, what is kept in RAM and on disk, what is evicted),
under one lock and one budget accounting. The entries' names and the prefix index are
``cache_keys``'; the thread that writes saved states to disk is ``cache_writer``'s; the file
format is ``statefile``'s.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..base import StateFileInvalid
from .cache_keys import (
    MIN_PREFIX_TOKENS, CacheEntry, PrefixIndex, common_prefix, conversation_files, conversation_name,
    conversation_of, is_prefix_name, prefix_files, prefix_name,
)
from .cache_spare import SpareBuffer
from .cache_writer import StateWriter
from .statefile import SUFFIX, StateHeader, read_header, read_state_file, write_state_file


log = logging.getLogger(__name__)

MIB = 1024 * 1024


class _Record(Protocol):
    id: str


class CachedSequence(Protocol):
    """What the prefix cache needs of a model sequence: ``sequence.SlotView`` (one sequence
    id of a ``LoadedModel``) and the tests' stand-ins provide it."""

    n_ctx: int
    n_swa: int  # sliding-window size (0: none); such states are cut back through their checkpoints
    record: _Record

    @property
    def kv_tokens(self) -> list[int]: ...

    def state_key(self) -> str: ...

    def reusable_prefix(self, prompt: list[int], shared: int = 0) -> int: ...

    def reusable_length(self, prompt_tokens: int, common: int, shared: int = 0) -> int: ...

    def export_sequence(
        self, limit: int | None = None, destination: Callable[[int], np.ndarray | None] | None = None
    ) -> tuple[list[int], np.ndarray | bytearray] | None: ...

    def import_sequence(self, tokens: list[int], payload: Any, keep: int) -> int: ...



@dataclass
class CacheUsage:
    """What the Settings page shows: space used and the budgets."""

    disk_bytes: int
    disk_files: int
    disk_budget_bytes: int
    ram_bytes: int
    ram_entries: int
    ram_budget_bytes: int


@dataclass
class SaveTimings:
    """The last save, for benchmarks: copying the state out blocks the turn, writing does not."""

    snapshot_s: float = 0.0  # llama_state_seq_get_data into RAM (on the scheduler thread)
    write_s: float = 0.0  # checksum + write + fsync + rename (on the writer thread)
    bytes: int = 0


def held_bytes(payload: bytearray | bytes | np.ndarray) -> int:
    """The memory ``payload`` keeps alive: for a numpy view (a state copied into the spare
    buffer), the whole buffer it is a view of, not only the bytes it shows."""
    if not isinstance(payload, np.ndarray):
        return len(payload)
    owner = payload
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if owner.base is not None:  # a view of another buffer (np.frombuffer): all of it stays
        return max(owner.nbytes, memoryview(owner.base).nbytes)
    return owner.nbytes


class PrefixCache:
    """Saved sequence states for one profile directory. Thread-safe; ``close()`` flushes writes."""

    def __init__(
        self,
        directory: Path,
        disk_budget_bytes: Callable[[], int],
        ram_budget_bytes: Callable[[], int],
    ) -> None:
        self.directory = Path(directory)
        self._disk_budget = disk_budget_bytes
        self._ram_budget = ram_budget_bytes
        self._lock = threading.RLock()
        self._entries: dict[str, CacheEntry] = {}
        self._ram: OrderedDict[str, None] = OrderedDict()  # LRU order of entries holding a payload
        self._ram_bytes = 0
        self._indexes: dict[str, PrefixIndex] = {}
        self._writer = StateWriter(self._lock, self._path, self._landed, self._written)
        self._closed = False
        self._reserved = 0  # saves announced by the scheduler that have not run yet
        self.last_save = SaveTimings()
        # A buffer already paged in, for the next save to copy into (``cache_spare``).
        self._spares = SpareBuffer(self._lock, ram_budget_bytes)

    @property
    def _spare(self) -> np.ndarray | None:
        """The buffer paged in for the next save, if one is ready (tests wait for it)."""
        return self._spares.buffer

    # -- the scheduler's side --------------------------------------------------------

    def restore(self, model: CachedSequence, prompt: list[int], conversation_id: int | None = None,
                shared: int = 0) -> int:
        """Load the best saved state for ``prompt`` into ``model`` when it beats what the model
        already holds. Returns the tokens restored (0 when nothing better was found).

        ``shared``: the prompt's first tokens that any conversation may share (its documents'
        block): a conversation's turn also looks among the content-addressed prefix entries,
        for those tokens only, so a document read in one chat serves every chat."""
        if len(prompt) < 3:
            return 0
        state_key = model.state_key()
        wanted = np.asarray(prompt, dtype=np.int32)
        resident = model.reusable_prefix(prompt, shared)
        # How far each candidate may serve: a conversation's own state all of it, a prefix
        # entry seen from a conversation only its shared tokens.
        candidates: list[tuple[CacheEntry, int]] = []
        if conversation_id is not None:
            found = self._conversation_entry(state_key, conversation_id)
            candidates = [(found, len(prompt))] if found is not None else []
            if shared >= MIN_PREFIX_TOKENS:
                candidates += [(e, shared) for e in self._prefix_candidates(state_key, wanted[:shared])]
        else:
            candidates = [(e, len(prompt)) for e in self._prefix_candidates(state_key, wanted)]
        best, best_common = None, 0
        for entry, reach in candidates:
            # The model's rule: how much of a shared prefix a prompt may take from a state
            # and still read exactly what a full prefill reads (runtime/slots.py).
            common = model.reusable_length(len(prompt), min(reach, common_prefix(entry.tokens, wanted)), shared)
            # (A sliding-window state cut back past its window resumes from one of the
            # window checkpoints it carries, or is not restored: ``import_sequence``.)
            if common > best_common:
                best, best_common = entry, common
        if best is None or best_common <= resident:
            return 0
        if best.header.n_tokens > model.n_ctx:
            log.info("ignoring saved state %s: %d tokens exceed the context of %d", best.name, best.header.n_tokens, model.n_ctx)
            return 0
        payload = self._payload(best, state_key)
        if payload is None:
            return 0
        kept = model.import_sequence(best.header.tokens, payload, best_common)
        if kept == 0:
            log.info("saved state %s could not be restored; prefilling the whole prompt", best.name)
            return 0
        self._spares.want(len(payload))  # this turn's save will be about this size
        self._touch(best)
        log.debug("restored %d of %d prompt tokens from %s", kept, len(prompt), best.name)
        return kept

    def prompts_read(self) -> None:
        """The scheduler's word that no prompt is being read now: the buffer the next save
        wants is paged in from here on (``cache_spare``), beside decoding or idle time, never
        beside the prompt whose first token a person is waiting for."""
        self._spares.start()

    def reserve_save(self) -> None:
        """Announce a ``save(..., reserved=True)`` that will run shortly; ``flush`` waits for it."""
        with self._lock:
            self._reserved += 1

    def save(self, model: CachedSequence, prompt_tokens: int, conversation_id: int | None = None,
             reserved: bool = False, shared: int = 0, documents: tuple[str, ...] = ()) -> None:
        """Copy the model's sequence out and queue it for disk; call after a turn ends.

        ``shared`` (a conversation's documents, see ``restore``): after the conversation's own
        state, its first ``shared`` tokens are saved as a content-addressed prefix entry too,
        unless one already holds them. That entry ends where the model's rule lets a prompt
        sharing those tokens resume (``reusable_length``), so it is never trimmed, and names
        ``documents`` (their sha256), so that removing them removes it (``forget_documents``)."""
        try:
            self._save(model, prompt_tokens, conversation_id)
            # As much as a prompt with these tokens and at least one more may take from a state.
            keep = model.reusable_length(shared + 1, shared, shared) if shared >= MIN_PREFIX_TOKENS else 0
            if conversation_id is not None and keep >= MIN_PREFIX_TOKENS and not self._holds_prefix(model, keep):
                self._save(model, shared, None, limit=keep, documents=documents)
        finally:
            if reserved:
                with self._lock:
                    self._reserved -= 1

    def _save(self, model: CachedSequence, prompt_tokens: int, conversation_id: int | None,
              limit: int | None = None, documents: tuple[str, ...] = ()) -> None:
        if self._closed:
            return
        if conversation_id is None and len(model.kv_tokens) < MIN_PREFIX_TOKENS:
            return
        if self._disk_budget() <= 0 and self._ram_budget() <= 0:
            return
        started = time.perf_counter()
        # The same prompt sent again (regenerate, a retried API call) reuses all but its last
        # two tokens; saving exactly that much means it never has to trim the restored state,
        # which sliding-window models cannot do.
        exported = model.export_sequence(limit or max(1, prompt_tokens - 2), self._spares.take)
        snapshot_s = time.perf_counter() - started
        if exported is None:
            return
        tokens, payload = exported
        self._spares.want(len(payload))  # for the next save, which is usually a little larger
        state_key = model.state_key()
        header = StateHeader(
            state_key=state_key,
            kind="conversation" if conversation_id is not None else "prefix",
            tokens=tokens,
            conversation_id=conversation_id,
            prompt_tokens=min(prompt_tokens, len(tokens)),
            model_id=model.record.id,
            payload_size=len(payload),
            documents=documents,
        )
        array = np.asarray(tokens, dtype=np.int32)
        if conversation_id is not None:
            name = conversation_name(conversation_id, state_key)
        else:
            name = prefix_name(state_key, array)
        entry = CacheEntry(name, header, array, payload=payload, size=held_bytes(payload))
        with self._lock:
            self._drop(name, keep_file=True)
            self._entries[name] = entry
            self._ram[name] = None
            self._ram_bytes += entry.size
            if conversation_id is None:
                self._index_prefix(entry)
                self._supersede(entry)
            if self._disk_budget() > 0:
                self._writer.put(entry, payload)
            self._fit_ram()
        self.last_save = SaveTimings(snapshot_s=snapshot_s, bytes=len(payload))

    def _holds_prefix(self, model: CachedSequence, keep: int) -> bool:
        """Whether a prefix entry already holds the first ``keep`` tokens of the model's sequence."""
        tokens = np.asarray(model.kv_tokens[:keep], dtype=np.int32)
        if len(tokens) < keep:
            return False
        for entry in self._prefix_candidates(model.state_key(), np.append(tokens, -1)):
            if common_prefix(entry.tokens, tokens) >= keep:
                return True
        return False

    # -- management (Settings page, conversation deletion) ---------------------------------

    def usage(self) -> CacheUsage:
        files = self._disk_files()
        with self._lock:
            return CacheUsage(
                disk_bytes=sum(size for _, size, _ in files),
                disk_files=len(files),
                disk_budget_bytes=max(0, self._disk_budget()),
                ram_bytes=self._ram_bytes,
                ram_entries=len(self._ram),
                ram_budget_bytes=max(0, self._ram_budget()),
            )

    def clear(self) -> int:
        """Forget every saved state, in RAM and on disk; returns the bytes freed on disk."""
        self.flush()
        with self._lock:
            self._entries.clear()
            self._ram.clear()
            self._ram_bytes = 0
            self._indexes.clear()
            self._writer.pending.clear()
            freed = 0
            for path, size, _ in self._disk_files():
                freed += size if _unlink(path) else 0
        log.info("cleared the prompt cache (%d bytes on disk)", freed)
        return freed

    def forget_conversation(self, conversation_id: int) -> int:
        """Delete a conversation's saved states (every model); returns how many files went."""
        with self._lock:
            for name in [n for n, e in self._entries.items() if e.conversation_id == conversation_id]:
                self._drop(name, keep_file=True)
            removed = 0
            if self.directory.is_dir():
                for path in self.directory.glob(conversation_files(conversation_id)):
                    removed += _unlink(path)
        return removed

    def forget_documents(self, sha256s: set[str]) -> int:
        """Delete the prefix entries of documents blocks holding any of ``sha256s`` (documents
        that are gone), in RAM and on disk; returns how many entries went."""
        if not sha256s:
            return 0
        with self._lock:
            names = {n for n, e in self._entries.items() if sha256s & set(e.header.documents)}
            for path, _, _ in self._disk_files():
                name = path.name.removesuffix(SUFFIX)
                if is_prefix_name(name) and name not in self._entries:
                    try:
                        header = read_header(path)
                    except StateFileInvalid:
                        continue
                    if sha256s & set(header.documents):
                        names.add(name)
            for name in names:
                self._drop(name)
        if names:
            log.info("forgot %d saved prompt states of removed documents", len(names))
        return len(names)

    def copy_conversation(self, source_id: int, target_id: int) -> int:
        """Give a conversation branched from ``source_id`` the source's saved states, so its
        first answer restores the shared beginning instead of reading it again (the restore
        takes only the prefix the branch has in common). Returns how many were copied."""
        self.flush()
        copied = 0
        if not self.directory.is_dir():
            return 0
        for path in sorted(self.directory.glob(conversation_files(source_id))):
            try:
                header, payload = read_state_file(path)
            except StateFileInvalid as exc:
                log.warning("not copying a saved prompt state: %s", exc)
                continue
            header = replace(header, conversation_id=target_id, created_at=time.time())
            write_state_file(self._path(conversation_name(target_id, header.state_key)), header, payload)
            copied += 1
        self.enforce_budget()
        return copied

    def prune_conversations(self, existing: set[int]) -> int:
        """Delete saved states of conversations that no longer exist (deleted by a front end
        that went straight to the store, or while another process held the cache)."""
        removed = 0
        for path, _, _ in self._disk_files():
            conversation_id = conversation_of(path.name)
            if conversation_id is not None and conversation_id not in existing:
                removed += self.forget_conversation(conversation_id)
        return removed

    def enforce_budget(self) -> None:
        """Evict least recently used files until the disk tier fits its budget."""
        budget = max(0, self._disk_budget())
        with self._lock:
            files = sorted(self._disk_files(), key=lambda item: item[2])
            total = sum(size for _, size, _ in files)
            for path, size, _ in files:
                if total <= budget:
                    break
                if _unlink(path):
                    total -= size
                    entry = self._entries.get(path.name.removesuffix(SUFFIX))
                    if entry is not None:
                        entry.on_disk = False
                        if entry.payload is None:
                            self._drop(entry.name, keep_file=True)
                    log.debug("evicted %s from the prompt cache (budget %d bytes)", path.name, budget)
            self._fit_ram()

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until queued writes are on disk."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._reserved == 0 and self._writer.idle():
                    return
            time.sleep(0.005)
        log.warning("prompt-cache writes still pending after %.0fs", timeout)

    def close(self) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._spares.close()
        self._writer.close()

    # -- lookups -------------------------------------------------------------------------

    def _conversation_entry(self, state_key: str, conversation_id: int) -> CacheEntry | None:
        name = conversation_name(conversation_id, state_key)
        with self._lock:
            entry = self._entries.get(name)
        if entry is not None:
            return entry if entry.header.state_key == state_key else None
        return self._load_header(name, state_key)

    def _prefix_candidates(self, state_key: str, prompt: np.ndarray) -> list[CacheEntry]:
        with self._lock:
            names = self._index_for(state_key).longest(state_key, prompt)
            return [self._entries[n] for n in names if n in self._entries]

    def _payload(self, entry: CacheEntry, state_key: str) -> bytearray | np.ndarray | None:
        with self._lock:
            if entry.payload is not None:
                return entry.payload
        path = self._path(entry.name)
        try:
            header, payload = read_state_file(path, expected_key=state_key)
        except StateFileInvalid as exc:
            log.warning("ignoring a saved prompt state: %s", exc)
            with self._lock:
                self._drop(entry.name)
            return None
        if header.tokens != entry.header.tokens:
            log.warning("ignoring saved prompt state %s: it changed on disk", entry.name)
            with self._lock:
                self._drop(entry.name, keep_file=True)
            return None
        with self._lock:
            if self._entries.get(entry.name) is entry:
                entry.payload = payload
                entry.size = held_bytes(payload)
                self._ram[entry.name] = None
                self._ram_bytes += entry.size
                self._fit_ram(protect=entry.name)
        return payload

    def _load_header(self, name: str, state_key: str) -> CacheEntry | None:
        path = self._path(name)
        if not path.exists():
            return None
        try:
            header = read_header(path)
        except StateFileInvalid as exc:
            log.warning("ignoring a saved prompt state: %s", exc)
            _unlink(path)
            return None
        if header.state_key != state_key:
            log.info("ignoring %s: saved by another model, KV layout or llama.cpp build", path.name)
            return None
        entry = CacheEntry(name, header, np.asarray(header.tokens, dtype=np.int32), on_disk=True, size=header.payload_size)
        with self._lock:
            self._entries.setdefault(name, entry)
            return self._entries[name]

    def _index_for(self, state_key: str) -> PrefixIndex:
        index = self._indexes.get(state_key)
        if index is None:
            index = self._indexes[state_key] = PrefixIndex()
        if not index.loaded_from_disk:
            index.loaded_from_disk = True
            if self.directory.is_dir():
                for path in self.directory.glob(prefix_files(state_key)):
                    name = path.name.removesuffix(SUFFIX)
                    if name in self._entries:
                        continue
                    entry = self._load_header(name, state_key)
                    if entry is not None:
                        self._index_prefix(entry)
        return index

    def _index_prefix(self, entry: CacheEntry) -> None:
        self._indexes.setdefault(entry.header.state_key, PrefixIndex()).add(entry)

    def _unindex(self, entry: CacheEntry) -> None:
        index = self._indexes.get(entry.header.state_key)
        if index is not None and entry.header.kind == "prefix":
            index.remove(entry)

    def _supersede(self, new: CacheEntry) -> None:
        """Drop older prefix entries whose whole prompt the new entry also covers: any prompt
        that shared their prompt shares at least as much with the new one."""
        index = self._index_for(new.header.state_key)
        for name in list(index.starting_with(new)):
            old = self._entries.get(name)
            if old is None or old is new:
                continue
            if common_prefix(old.tokens, new.tokens) >= max(1, old.header.prompt_tokens):
                self._drop(name)

    # -- bookkeeping (called with the lock held) ---------------------------------------------

    def _drop(self, name: str, keep_file: bool = False) -> None:
        entry = self._entries.pop(name, None)
        self._writer.pending.pop(name, None)
        if entry is not None:
            self._unindex(entry)
            if name in self._ram:
                del self._ram[name]
                self._ram_bytes -= entry.size
            entry.payload = None
        if not keep_file:
            _unlink(self._path(name))

    def _fit_ram(self, protect: str | None = None) -> None:
        budget = max(0, self._ram_budget())
        for name in list(self._ram):
            if self._ram_bytes <= budget:
                break
            if name == protect:
                continue
            entry = self._entries[name]
            del self._ram[name]
            self._ram_bytes -= entry.size
            entry.payload = None
            if not entry.on_disk and name not in self._writer.pending:
                self._drop(name, keep_file=True)

    def _touch(self, entry: CacheEntry) -> None:
        with self._lock:
            if entry.name in self._ram:
                self._ram.move_to_end(entry.name)
        if entry.on_disk:
            try:
                os.utime(self._path(entry.name))
            except OSError:
                pass

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}{SUFFIX}"

    def _disk_files(self) -> list[tuple[Path, int, float]]:
        if not self.directory.is_dir():
            return []
        found = []
        with os.scandir(self.directory) as listing:
            for item in listing:
                if item.name.endswith(SUFFIX) and not item.name.startswith(".") and item.is_file():
                    try:
                        stat = item.stat()
                    except OSError:
                        continue
                    found.append((Path(item.path), stat.st_size, stat.st_mtime))
        return found

    # -- the writer thread's news (``cache_writer``) -------------------------------------

    def _landed(self, name: str, entry: CacheEntry, path: Path) -> None:
        """``entry`` is on disk (called with the lock held)."""
        if self._entries.get(name) is entry:
            entry.on_disk = True
        elif name not in self._writer.pending:
            _unlink(path)  # forgotten or cleared while it was being written

    def _written(self, seconds: float) -> None:
        self.last_save.write_s = seconds
        self.enforce_budget()


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("could not delete %s: %s", path.name, exc.strerror or exc)
        return False

"""Regression tests for issue 14's data-layer findings: each reproduces one finding.

Real parts only: synthetic GGUF files written byte by byte, real SQLite files, real FIFOs
and symlinks, the real registry and store.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine.base.errors import ModelLoadError, StateFileInvalid, StorageUnavailable
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.statefile import SUFFIX, StateHeader, read_header, read_state_file, write_state_file
from inglenook.engine.store.store import Store
from tests.gguf_writer import write_gguf

_ARRAY, _U8, _STRING = 9, 0, 8


def _gguf_with_raw_value(path: Path, value_type: int, body: bytes) -> Path:
    """A GGUF header with one metadata key whose value bytes are given as they are."""
    key = b"bomb"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    header += struct.pack("<I", value_type) + body
    path.write_bytes(header + b"\0" * ((-len(header)) % 32))
    return path


def _nested_arrays(depth: int) -> bytes:
    """``depth`` arrays, each holding the next: [[[...[]...]]]."""
    return struct.pack("<IQ", _ARRAY, 1) * (depth - 1) + struct.pack("<IQ", _U8, 0)


# -- finding 4: GGUF metadata bombs ---------------------------------------------------------


def test_deeply_nested_arrays_are_a_model_load_error(tmp_path: Path) -> None:
    # 200,000 levels (2.4 MB): was a RecursionError straight through read_gguf.
    path = _gguf_with_raw_value(tmp_path / "nested.gguf", _ARRAY, _nested_arrays(200_000))
    with pytest.raises(ModelLoadError, match="nested"):
        read_gguf(path)


def test_a_huge_u8_array_costs_no_memory(tmp_path: Path) -> None:
    # 40 MB of u8: the reader built a 40-million-character format string and a full list (2 GB).
    count = 40 * 1024 * 1024
    key = b"bomb"
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    header += struct.pack("<I", _ARRAY) + struct.pack("<IQ", _U8, count)
    path = tmp_path / "wide.gguf"
    with path.open("wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + count + 64)
    tracemalloc.start()
    try:
        info = read_gguf(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.metadata["bomb"].length == count
    assert peak < 4 * 1024 * 1024  # Python allocations; the file itself is memory-mapped


def test_many_kept_arrays_stay_within_the_keep_budget(tmp_path: Path) -> None:
    # 2,000 keys of 512 u32 each: short enough to keep one by one, not all together.
    metadata = {f"k{i}": list(range(512)) for i in range(2000)}
    path = write_gguf(tmp_path / "many.gguf", metadata=metadata)
    info = read_gguf(path)
    kept = sum(len(v) for v in info.metadata.values() if isinstance(v, list))
    assert kept <= 65_536
    assert info.metadata["k0"] == list(range(512))


@pytest.mark.parametrize(
    ("value_type", "body", "message"),
    [
        (_ARRAY, struct.pack("<IQ", 77, 1) + b"\0" * 16, "unknown array item type"),
        (_ARRAY, struct.pack("<IQ", _STRING, 2**40), "claims"),
        (_ARRAY, struct.pack("<IQ", _ARRAY, 2**50), "claims"),
        (_STRING, struct.pack("<Q", 2**63), "claims"),
        (99, b"", "unknown metadata value type"),
    ],
)
def test_hostile_values_are_model_load_errors(tmp_path: Path, value_type: int, body: bytes, message: str) -> None:
    path = _gguf_with_raw_value(tmp_path / "bad.gguf", value_type, body)
    with pytest.raises(ModelLoadError, match=message):
        read_gguf(path)


def test_a_metadata_bomb_in_the_models_folder_does_not_stop_listing(tmp_path: Path) -> None:
    paths = Paths.under(tmp_path / "home").ensure()
    _gguf_with_raw_value(paths.models / "nested.gguf", _ARRAY, _nested_arrays(50_000))
    good = write_gguf(paths.models / "good-F32.gguf")
    registry = ModelRegistry(Store(paths.database), paths)
    listed = registry.refresh()
    assert [r.path for r in listed if r.source == "scan"] == [good.resolve()]


def test_special_tokens_are_read_without_keeping_the_vocabulary(tmp_path: Path) -> None:
    tokens = [f"tok{i}" for i in range(5000)]
    path = write_gguf(tmp_path / "vocab.gguf", metadata={
        "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.bos_token_id": 4321, "tokenizer.ggml.eos_token_id": 99999,
    })
    info = read_gguf(path)
    assert info.vocab_size == 5000
    assert info.special_tokens == {"bos": (4321, "tok4321"), "eos": (99999, None)}


# -- finding 11: a FIFO, symlink or device where a state file should be --------------------


def _state_file(path: Path) -> Path:
    write_state_file(path, StateHeader(state_key="k|l|b", kind="prefix", tokens=[1, 2, 3]), b"payload")
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_in_the_states_folder_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / f"conv-1-abc{SUFFIX}"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        for reader in (read_header, read_state_file):
            try:
                reader(fifo)
            except StateFileInvalid as exc:
                outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(timeout=60)
    if thread.is_alive():
        # Unblock the reader so the test run can end, then fail: open() waited for a writer.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO as a state file blocked")
    assert len(outcome) == 2 and all("regular file" in str(e) for e in outcome)


def test_a_symlinked_state_file_is_refused(tmp_path: Path) -> None:
    real = _state_file(tmp_path / f"real{SUFFIX}")
    link = tmp_path / f"conv-1-abc{SUFFIX}"
    link.symlink_to(real)
    assert read_header(real).tokens == [1, 2, 3]
    with pytest.raises(StateFileInvalid):
        read_header(link)
    with pytest.raises(StateFileInvalid):
        read_state_file(link)


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_is_not_read_as_a_state_file() -> None:
    with pytest.raises(StateFileInvalid, match="regular file"):
        read_header(Path("/dev/zero"))


# -- finding 12: a healthy database set aside; real corruption must be salvaged ---------------


def _store_with_messages(path: Path, count: int) -> list[str]:
    store = Store(path)
    conversation = store.create_conversation("kept")
    texts = [f"message {i} " + "x" * 100 for i in range(count)]
    for text in texts:
        store.add_message(conversation.id, "user", text)
    store.close()
    return texts


def _damage_page(path: Path, page: int) -> None:
    page_size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as handle:
        handle.seek((page - 1) * page_size)
        handle.write(b"\xa5" * page_size)


def _root_page(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", [name]).fetchone()[0]
    finally:
        conn.close()


def test_a_locked_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    texts = _store_with_messages(path, 3)
    holder = sqlite3.connect(path)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StorageUnavailable, match="another program"):
            Store(path, busy_timeout_s=0.1)
    finally:
        holder.rollback()
        holder.close()
    assert not list(tmp_path.glob("*.corrupt-*"))
    store = Store(path)
    assert store.salvaged is None
    assert [m.content for m in store.messages(1)] == texts


def test_a_damaged_index_loses_no_message(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    texts = _store_with_messages(path, 400)
    _damage_page(path, _root_page(path, "idx_messages_conversation_id_id"))
    store = Store(path)
    assert store.set_aside is not None and store.set_aside.exists()  # the damaged file is kept
    assert store.salvaged is not None and store.salvaged["messages"] == 400
    assert store.integrity_ok()
    assert [m.content for m in store.messages(1)] == texts
    assert store.get_conversation(1).title == "kept"


def test_a_damaged_table_page_keeps_every_readable_row(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    texts = _store_with_messages(path, 400)
    conn = sqlite3.connect(path)
    # A leaf page of the messages table that is neither its first nor its last.
    pages = [r[0] for r in conn.execute("SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf'")]
    conn.close()
    assert len(pages) > 4
    _damage_page(path, sorted(pages)[len(pages) // 2])
    store = Store(path)
    kept = [m.content for m in store.messages(1)]
    assert 0 < len(kept) < 400
    assert kept[0] == texts[0] and kept[-1] == texts[-1]  # rows after the damaged page too
    assert set(kept) <= set(texts)


# -- finding 13: storage failures are one clear error (CLI line, app dialog, HTTP 503) ---------


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make one file read-only for everyone, root included (a read-only bind mount of it)."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here to make a file read-only for root")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield
    finally:
        # Lazy: a connection the test failed to close must not leave the mount behind.
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_a_full_disk_while_saving_is_storage_unavailable_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = Store(path)
    conversation = store.create_conversation("kept")
    store.add_message(conversation.id, "user", "saved before the disk filled")
    pages = store.db.conn.execute("PRAGMA page_count").fetchone()[0]
    store.db.conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own SQLITE_FULL from here on
    with pytest.raises(StorageUnavailable, match="the disk is full"):
        store.add_message(conversation.id, "assistant", "y" * 100_000)
    store.close()
    again = Store(path)
    assert [m.content for m in again.messages(conversation.id)] == ["saved before the disk filled"]
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_a_read_only_database_is_storage_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _store_with_messages(path, 2)
    with read_only(path):
        store = Store(path)
        with pytest.raises(StorageUnavailable, match="read-only"):
            store.create_conversation("new")
        assert len(store.messages(1)) == 2  # what was saved stays readable
        store.close()
    assert len(Store(path).messages(1)) == 2
    assert not list(tmp_path.glob("*.corrupt-*"))


def test_the_cli_reports_a_read_only_database_in_one_line(home: Path, smollm2_path: Path) -> None:
    paths = Paths.default().ensure()
    Store(paths.database).close()
    with read_only(paths.database):
        result = subprocess.run(
            [sys.executable, "-m", "inglenook.cli", "run", str(smollm2_path), "hi", "--max-tokens", "1"],
            capture_output=True, text=True, timeout=300, env={**os.environ, "INGLENOOK_HOME": str(home)},
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("inglenook: error:")]
    assert len(errors) == 1 and "read-only" in errors[0]


def test_storage_unavailable_is_a_503_and_a_dialog() -> None:
    from inglenook.app.services.errors import explain
    from inglenook.engine.api.shared.errors import error_for

    exc = StorageUnavailable("cannot write to the database: the disk is full. Nothing was changed.")
    assert error_for(exc).status == 503
    explanation = explain(exc)
    assert explanation.title == "Inglenook cannot save right now"
    assert "nothing was lost" in explanation.text.lower()


# -- finding 8: `inglenook rm` outside the models folder --------------------------------------


def test_rm_never_deletes_outside_the_models_folder(home: Path) -> None:
    paths = Paths.default().ensure()
    victim = write_gguf(home.parent / "victim" / "precious.gguf")
    linked = write_gguf(home.parent / "victim" / "linked.gguf", metadata={"general.name": "Linked"})
    (paths.models / "link.gguf").symlink_to(linked)
    (paths.models / "folder-link").symlink_to(victim.parent, target_is_directory=True)
    store = Store(paths.database)
    registry = ModelRegistry(store, paths)
    registry.refresh()
    # The path from the finding: lexically inside the models folder, really outside.
    sneaky = f"{paths.models}/../../{victim.parent.name}/{victim.name}"
    registry.remove(sneaky)
    assert victim.exists()
    # A scanned link inside the folder: the link goes, the file it points at stays.
    registry.remove(str(paths.models / "link.gguf"))
    assert linked.exists() and not (paths.models / "link.gguf").is_symlink()
    # A file reached through a linked folder inside the models folder is not ours either.
    through = registry.register_file(paths.models / "folder-link" / victim.name, source="scan")
    registry.remove(through.id)
    assert victim.exists()
    store.close()


def test_cli_rm_of_a_path_outside_keeps_the_file(home: Path) -> None:
    paths = Paths.default().ensure()
    victim = write_gguf(home.parent / "victim" / "precious.gguf")
    result = subprocess.run(
        [sys.executable, "-m", "inglenook.cli", "rm", f"{paths.models}/../../victim/precious.gguf"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "INGLENOOK_HOME": str(home)},
    )
    assert result.returncode == 0, result.stderr
    assert victim.exists() and "its file was kept" in result.stdout


# -- finding 10: models llama.cpp refuses -------------------------------------------------------


def test_a_file_that_cannot_run_is_not_listed(home: Path) -> None:
    paths = Paths.default().ensure()
    write_gguf(paths.models / "empty-F32.gguf", tensors=[])  # listed as "empty:unknown" before
    write_gguf(paths.models / "odd-F32.gguf", metadata={"general.name": "Odd"}, tensors=[("w", (8,))])
    registry = ModelRegistry(Store(paths.database), paths)
    ids = {r.id for r in registry.refresh()}
    assert "empty:unknown" not in ids and not any(i.startswith("empty") for i in ids)
    assert "odd:f32" in ids


def test_a_refused_load_marks_the_model_until_it_loads(home: Path) -> None:
    paths = Paths.default().ensure()
    registry = ModelRegistry(Store(paths.database), paths)
    record = registry.register_file(write_gguf(home / "tiny-F32.gguf"))
    registry.mark_problem(record.id, "llama.cpp could not load the model")
    marked = registry.get(record.id)
    assert not marked.usable and marked.problem == "llama.cpp could not load the model"
    registry.mark_problem(record.id, None)
    assert registry.get(record.id).usable


# -- finding 14: one file content, one record; variants by what the model is ------------------


def test_a_copy_of_a_registered_file_is_the_same_record(home: Path, smollm2_path: Path) -> None:
    paths = Paths.default().ensure()
    copy = home.parent / "elsewhere" / "renamed-copy.gguf"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(smollm2_path.read_bytes())
    store = Store(paths.database)
    registry = ModelRegistry(store, paths)
    registry.refresh()
    starter = registry.resolve("smollm2")
    again = registry.resolve(str(copy))
    assert again.id == starter.id  # was smollm2-135m-instruct-2:q4_1
    assert len(registry.list()) == 1
    assert registry.paths_of(starter) == [starter.path, copy]
    store.close()


def test_a_record_moves_to_another_path_when_its_file_goes(home: Path) -> None:
    paths = Paths.default().ensure()
    first = write_gguf(paths.models / "first-F32.gguf")
    second = home / "second.gguf"
    second.write_bytes(first.read_bytes())
    registry = ModelRegistry(Store(paths.database), paths)
    registry.refresh()
    record = registry.resolve("first:f32")
    assert registry.register_file(second).id == record.id
    first.unlink()
    after = {r.id: r for r in registry.refresh()}
    assert after[record.id].path == second


def test_variants_are_grouped_by_what_the_model_is_not_its_id(home: Path) -> None:
    from inglenook.engine.lab.variants import find_variants

    paths = Paths.default().ensure()
    registry = ModelRegistry(Store(paths.database), paths)
    # Same model (no name in its metadata), two quantizations under unrelated file names.
    tensors = [("token_embd.weight", (8, 4)), ("output.weight", (8, 4))]
    a = write_gguf(paths.models / "alpha-F32.gguf", metadata={"general.name": "", "general.file_type": 0},
                   tensors=tensors)
    b = write_gguf(paths.models / "zulu-F16.gguf", metadata={"general.name": "", "general.file_type": 1},
                   tensors=tensors)
    registry.refresh()
    group = find_variants(registry, registry.register_file(a).id, with_hub=False)
    assert {v.record.path for v in group.variants} == {a, b}



def test_the_cli_says_when_a_damaged_database_was_salvaged(home: Path) -> None:
    paths = Paths.default().ensure()
    _store_with_messages(paths.database, 300)
    _damage_page(paths.database, _root_page(paths.database, "idx_messages_conversation_id_id"))
    result = subprocess.run([sys.executable, "-m", "inglenook.cli", "list"], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "INGLENOOK_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert "the database was damaged; recovered" in result.stderr and "300 messages" in result.stderr
    assert list(paths.database.parent.glob("*.corrupt-*"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_like_a_model_does_not_block_reading_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    thread = threading.Thread(target=lambda: outcome.append(pytest.raises(ModelLoadError, read_gguf, fifo).value),
                              daemon=True)
    thread.start()
    thread.join(timeout=60)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO as a GGUF file blocked")
    assert "not a file" in str(outcome[0])


def test_a_damaged_character_does_not_hide_a_conversation(tmp_path: Path) -> None:
    # Found by tests/fuzz/test_fuzz_store.py: one byte of a message that is not valid UTF-8
    # (SQLite cannot see it) failed every read of the conversation.
    path = tmp_path / "db.sqlite"
    texts = _store_with_messages(path, 3)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE messages SET content = CAST(x'80ff41' AS TEXT) WHERE id = 2")
    conn.close()
    store = Store(path)
    contents = [m.content for m in store.messages(1)]
    assert contents == [texts[0], "\ufffd\ufffdA", texts[2]]
    store.close()

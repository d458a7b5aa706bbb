"""Faults while saving (issue 14): kill -9 during a state save and during a migration, and a
full disk during a state save. Nothing saved is lost; nothing half-written is used.

Each kill happens in a child process running the real code, at a chosen call (so the test
is deterministic, not a race): SIGKILL leaves the file system exactly as a power cut after
the kernel got the bytes would.
"""

from __future__ import annotations

import errno
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from inglenook.engine.base import atomic
from inglenook.engine.store.statefile import SUFFIX, StateHeader, read_header, read_state_file, write_state_file
from inglenook.engine.store.store import Store

KEY = "fp|kv=f16|build"


def _run_child(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ})


def _save(path: Path, version: int, size: int = 1 << 20) -> None:
    header = StateHeader(state_key=KEY, kind="conversation", tokens=[version] * 8, conversation_id=1)
    write_state_file(path, header, np.full(size, version % 251, dtype=np.uint8))


# -- kill -9 during a state save ----------------------------------------------------------------

_SAVE_CHILD = """
    import os, signal, sys
    import numpy as np
    from pathlib import Path
    from inglenook.engine.base import atomic
    from inglenook.engine.store.statefile import StateHeader, write_state_file

    path, where = Path(sys.argv[1]), sys.argv[2]
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    if where == "mid_write":
        real_fdopen = os.fdopen
        class Dying:
            def __init__(self, handle):
                self.handle, self.written = handle, 0
            def write(self, data):
                if self.written + len(data) > 1000:  # the payload: half of it reaches the disk
                    self.handle.write(bytes(memoryview(data).cast("B")[: len(data) // 2]))
                    self.handle.flush()
                    os.fsync(self.handle.fileno())
                    die()
                self.written += len(data)
                return self.handle.write(data)
            def __getattr__(self, name):
                return getattr(self.handle, name)
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return self.handle.__exit__(*exc)
        atomic.os.fdopen = lambda *a, **k: Dying(real_fdopen(*a, **k))
    elif where == "before_rename":
        atomic.os.replace = die
    elif where == "before_dir_sync":
        atomic._fsync_directory = die
    header = StateHeader(state_key="fp|kv=f16|build", kind="conversation", tokens=[2] * 8, conversation_id=1)
    write_state_file(path, header, np.full(1 << 20, 2, dtype=np.uint8))
"""


@pytest.mark.parametrize("where", ["mid_write", "before_rename", "before_dir_sync"])
def test_kill_during_a_state_save_keeps_the_previous_state(tmp_path: Path, where: str) -> None:
    path = tmp_path / f"conv-1-abc{SUFFIX}"
    _save(path, 1)
    child = _run_child(_SAVE_CHILD, str(path), where)
    assert child.returncode == -signal.SIGKILL, child.stderr
    header, payload = read_state_file(path, expected_key=KEY)  # whole and checksummed, old or new
    version = header.tokens[0]
    assert version == (2 if where == "before_dir_sync" else 1)
    assert header.tokens == [version] * 8 and int(payload[0]) == version and len(payload) == 1 << 20
    # The half-written temporary never carries the state file's name.
    leftovers = [p for p in tmp_path.iterdir() if p != path]
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in leftovers)
    # Their space comes back; a write in progress (recent) would be left alone.
    assert atomic.remove_stale_temporaries(tmp_path, older_than_s=3600) == 0
    assert atomic.remove_stale_temporaries(tmp_path, older_than_s=-1) == len(leftovers)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


# -- a full disk during a state save -------------------------------------------------------------


def test_disk_full_during_a_state_save_keeps_the_previous_state(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / f"conv-1-abc{SUFFIX}"
    _save(path, 1)
    real_fdopen = os.fdopen

    class Full:
        """The temporary file's handle, as on a disk with 4 kB left."""

        def __init__(self, handle) -> None:
            self.handle, self.written = handle, 0

        def write(self, data: bytes) -> int:
            self.written += len(data)
            if self.written > 4096:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.handle.write(data)

        def __getattr__(self, name: str):
            return getattr(self.handle, name)

        def __enter__(self) -> "Full":
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.__exit__(*exc)

    monkeypatch.setattr(atomic.os, "fdopen", lambda *a, **k: Full(real_fdopen(*a, **k)))
    with pytest.raises(OSError) as caught:
        _save(path, 2)
    assert caught.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert read_header(path).tokens == [1] * 8 and read_state_file(path, expected_key=KEY)[0].tokens[0] == 1
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left to fill the disk


# -- kill -9 during a migration ------------------------------------------------------------------

_MIGRATION_CHILD = """
    import os, signal, sys
    from inglenook.engine.store import store as store_module

    def m999_test_two_tables(db):
        db["extra_one"].create({"id": int, "text": str}, pk="id")
        db["extra_one"].insert({"id": 1, "text": "first half"})
        if sys.argv[2] == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        db["extra_two"].create({"id": int}, pk="id")

    store_module.MIGRATIONS = [*store_module.MIGRATIONS, m999_test_two_tables]
    store_module.Store(sys.argv[1]).close()
    print("migrated")
"""


def test_kill_during_a_migration_leaves_the_database_as_before(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    store = Store(path)
    conversation = store.create_conversation("kept")
    store.add_message(conversation.id, "user", "saved before the upgrade")
    store.close()

    killed = _run_child(_MIGRATION_CHILD, str(path), "die")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    applied = {r[0] for r in conn.execute("SELECT name FROM _migrations")}
    conn.close()
    assert "extra_one" not in tables and "m999_test_two_tables" not in applied  # all or nothing

    again = _run_child(_MIGRATION_CHILD, str(path), "live")  # the next start applies it whole
    assert again.returncode == 0 and "migrated" in again.stdout, again.stderr
    reopened = Store(path)
    assert [m.content for m in reopened.messages(conversation.id)] == ["saved before the upgrade"]
    assert reopened.salvaged is None and not list(tmp_path.glob("*.corrupt-*"))
    assert reopened.db.conn.execute("SELECT text FROM extra_one").fetchall() == [("first half",)]
    reopened.close()

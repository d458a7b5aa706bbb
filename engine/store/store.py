"""The SQLite store: conversations, messages, models and settings.

One connection shared by every thread, guarded by a lock: writes are small and rare
next to inference, and one connection keeps WAL checkpoints simple. A user message is
committed the moment it is sent, an answer when it completes (or, marked partial, when
it is stopped), so a crash mid-turn loses nothing already saved.

Failures are told apart (rule 5 of docs/ARCHITECTURE.md): a database that is *damaged* (SQLite's CORRUPT or
NOTADB, a failed integrity check, or a schema that lacks what the migrations made) is set
aside as ``*.corrupt-<time>`` and everything still readable is copied into a fresh one; a
database that is only *unavailable* (disk full, read-only, locked by another program, an I/O
error) is left exactly as it is and every operation raises ``StorageUnavailable``: one clear
error, nothing renamed, nothing lost.

Why one file of ~460 lines: every table's queries beside the one connection, its lock and the
failure handling they all share (damaged vs unavailable).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from ..base import ConversationNotFound, StorageUnavailable, StoreError
from .migrations import MIGRATIONS
from .records import Conversation, Message
from .salvage import salvage_into
from .schema_check import missing_schema
from .sqlite_tables import inserted_id, table_named

log = logging.getLogger(__name__)

LEAF = object()  # add_message's default parent: the end of the conversation's chosen path
EMPTY_PATH = 0  # conversations.leaf_id when the chosen path is empty (no message id is 0)


# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_UNAVAILABLE_REASONS: dict[int, str] = {
    3: "permission denied",  # SQLITE_PERM
    5: "another program is using it (the database is locked)",  # SQLITE_BUSY
    6: "another program is using it (a table is locked)",  # SQLITE_LOCKED
    8: "it is read-only",  # SQLITE_READONLY
    10: "the disk reported an input/output error",  # SQLITE_IOERR
    13: "the disk is full",  # SQLITE_FULL
    14: "it cannot be opened (missing permissions or a read-only folder)",  # SQLITE_CANTOPEN
}


def owner_only(database: Path) -> None:
    """Make ``database`` (created empty if new) readable by its owner only, before SQLite opens
    it: conversations, documents' text and tool results are in it, and SQLite creates the
    ``-wal`` and ``-shm`` files with the database's own mode. Existing ones are narrowed too.
    A file system without modes (FAT, Windows) keeps what it has."""
    if os.name != "posix":
        return
    try:
        os.close(os.open(database, os.O_RDWR | os.O_CREAT, 0o600))
        for suffix in ("", "-wal", "-shm"):
            found = Path(f"{database}{suffix}")
            if found.exists() and found.stat().st_mode & 0o077:
                os.chmod(found, 0o600)
    except OSError as exc:  # a read-only folder: SQLite's own open says what is wrong
        log.debug("cannot narrow the permissions of %s: %s", database, exc)


def decode_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def is_damage(exc: sqlite3.Error) -> bool:
    """True only for errors that mean the file's contents are damaged (never full/locked/read-only)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


class Store:
    """The application database. Thread-safe; open one per process."""

    def __init__(self, path: Path, busy_timeout_s: float = 30.0, full_check: bool = False) -> None:
        """``full_check``: run SQLite's whole ``integrity_check`` at open (the app's start,
        once per session: it reads every page and index, seconds on a large store) rather
        than ``quick_check`` (the terminal's short commands), which skips only the
        index-versus-table comparison."""
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._check = "integrity_check" if full_check else "quick_check"
        self._lock = threading.RLock()
        #: Rows copied per table from a damaged database at this open; None when none was.
        self.salvaged: dict[str, int] | None = None
        #: Where the damaged file was set aside, when one was.
        self.set_aside: Path | None = None
        self.db = self._open()

    # -- opening --------------------------------------------------------------------

    def _open(self) -> sqlite_utils.Database:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailable(f"cannot create the data folder {self.path.parent}: {exc.strerror or exc}") from exc
        db: sqlite_utils.Database | None = None
        try:
            db = self._connect()
            if self._healthy(db, self._check):
                self._prepare(db)
                missing = missing_schema(db.conn)
                if not missing:
                    return db
                log.error("the database's schema is damaged, it lacks %s", ", ".join(missing[:8]))
            db.conn.close()
            self.set_aside = self._set_aside_corrupt()
            db = self._connect()
            self._prepare(db)
            self.salvaged = salvage_into(self.set_aside, db.conn)
            return db
        except sqlite3.Error as exc:
            if db is not None:
                with contextlib.suppress(sqlite3.Error):
                    db.conn.close()
            raise self._failure(exc, "open") from exc
        except OSError as exc:
            raise StorageUnavailable(f"cannot open the database {self.path}: {exc.strerror or exc}") from exc

    def _connect(self) -> sqlite_utils.Database:
        owner_only(self.path)
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=self.busy_timeout_s, factory=_Connection)
        # Text with invalid UTF-8 (a flipped bit SQLite cannot see) reads with U+FFFD instead of
        # failing the whole query: one damaged character must not hide a conversation.
        conn.text_factory = decode_text
        return sqlite_utils.Database(conn)

    def _prepare(self, db: sqlite_utils.Database) -> None:
        db.conn.execute("PRAGMA journal_mode=WAL")
        # FULL: each commit is on disk before we report it; writes here are few.
        db.conn.execute("PRAGMA synchronous=FULL")
        db.conn.execute("PRAGMA foreign_keys=ON")
        self._migrate(db)

    @staticmethod
    def _healthy(db: sqlite_utils.Database, check: str = "integrity_check") -> bool:
        """False for damage only; a locked, full or unreadable file raises instead (not damage)."""
        try:
            result = db.conn.execute(f"PRAGMA {check}").fetchone()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            log.error("database failed its integrity check: %s", exc)
            return False
        except UnicodeDecodeError as exc:  # SQLite's own message names a damaged schema entry
            log.error("database failed its integrity check: %s", exc)
            return False
        if result is None or result[0] != "ok":
            log.error("database failed its integrity check: %s", result)
            return False
        return True

    def _set_aside_corrupt(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        main = Path(f"{self.path}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(str(self.path) + suffix)
            if source.exists():
                target = Path(f"{main}{suffix}")
                source.rename(target)
                log.error("set aside a damaged database file as %s", target.name)
        return main

    def _failure(self, exc: sqlite3.Error, doing: str) -> StoreError:
        """The typed error for a SQLite failure: damage, or storage that is unavailable."""
        if is_damage(exc):
            return StoreError(
                f"the database {self.path} is damaged ({exc}); restart Inglenook to set it aside and "
                "recover what can be read"
            )
        code = getattr(exc, "sqlite_errorcode", None)
        reason = _UNAVAILABLE_REASONS.get(code & 0xFF if code is not None else -1, str(exc))
        return StorageUnavailable(f"cannot {doing} the database {self.path}: {reason}. Nothing was changed.")

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, under the store's lock, with SQLite failures mapped to typed errors."""
        with self._lock:
            try:
                yield self.db.conn
            except sqlite3.Error as exc:
                raise self._failure(exc, "read") from exc
            except UnicodeDecodeError as exc:  # an error message from a damaged schema
                raise StoreError(f"the database {self.path} is damaged; restart Inglenook to recover it") from exc

    @contextlib.contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed when the block ends, rolled back (and mapped) when it fails."""
        with self._lock:
            try:
                with self.db.conn:
                    yield self.db.conn
            except sqlite3.Error as exc:
                raise self._failure(exc, "write to") from exc

    def _migrate(self, db: sqlite_utils.Database) -> None:
        db.conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
        applied = {row[0] for row in db.conn.execute("SELECT name FROM _migrations")}
        for migration in MIGRATIONS:
            if migration.__name__ in applied:
                continue
            log.info("applying migration %s", migration.__name__)
            self._apply(db, migration)

    @staticmethod
    def _apply(db: sqlite_utils.Database, migration: Any) -> None:
        """One migration and its record in one transaction: a crash mid-migration leaves the
        database as it was before it, and the next start applies it again, whole."""
        conn: _Connection = db.conn
        conn.execute("BEGIN IMMEDIATE")  # Python's sqlite3 opens no transaction before DDL itself
        conn.hold_commits = True
        try:
            migration(db)
            conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (migration.__name__, time.time()))
        except BaseException:
            conn.hold_commits = False
            conn.rollback()
            raise
        conn.hold_commits = False
        conn.commit()

    def applied_migrations(self) -> list[str]:
        with self.reading():
            return [r[0] for r in self.db.conn.execute("SELECT name FROM _migrations ORDER BY rowid")]

    def integrity_ok(self) -> bool:
        with self.reading():
            return self._healthy(self.db)

    def close(self) -> None:
        with self.reading():
            self.db.conn.close()

    # -- conversations --------------------------------------------------------------

    def create_conversation(
        self,
        title: str = "New chat",
        model_id: str | None = None,
        system_prompt: str | None = None,
        sampling: dict[str, Any] | None = None,
    ) -> Conversation:
        now = time.time()
        row = {
            "title": title,
            "model_id": model_id,
            "system_prompt": system_prompt,
            "sampling": json.dumps(sampling or {}),
            "created_at": now,
            "updated_at": now,
        }
        with self.writing():
            inserted = table_named(self.db, "conversations").insert(row)
            return self.get_conversation(inserted_id(inserted))

    def get_conversation(self, conversation_id: int) -> Conversation:
        with self.reading():
            rows = list(self.db["conversations"].rows_where("id = ?", [conversation_id]))
        if not rows:
            raise ConversationNotFound(f"no conversation with id {conversation_id}")
        return Conversation.from_row(rows[0])

    def list_conversations(self, search: str | None = None, limit: int | None = None) -> list[Conversation]:
        """Newest activity first; ``search`` matches titles and message text."""
        sql = "SELECT * FROM conversations"
        params: list[Any] = []
        if search:
            pattern = f"%{_escape_like(search)}%"
            sql += (
                " WHERE title LIKE ? ESCAPE '\\' OR id IN "
                "(SELECT conversation_id FROM messages WHERE content LIKE ? ESCAPE '\\')"
            )
            params += [pattern, pattern]
        sql += " ORDER BY updated_at DESC, id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        with self.reading():
            cursor = self.db.conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [Conversation.from_row(dict(zip(names, row))) for row in cursor.fetchall()]

    def latest_conversation(self) -> Conversation | None:
        found = self.list_conversations(limit=1)
        return found[0] if found else None

    def update_conversation(self, conversation_id: int, touch: bool = True, **fields: Any) -> Conversation:
        """Change a conversation's fields; ``touch=False`` keeps its place in the list (a
        title written in the background is not news: the chat must not jump above newer ones)."""
        allowed = {"title", "model_id", "system_prompt", "sampling"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}")
        if "sampling" in fields:
            fields["sampling"] = json.dumps(fields["sampling"] or {})
        if touch:
            fields["updated_at"] = time.time()
        self.get_conversation(conversation_id)
        with self.writing():
            table_named(self.db, "conversations").update(conversation_id, fields)
        return self.get_conversation(conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        with self.writing():
            self.db.conn.execute("DELETE FROM messages WHERE conversation_id = ?", [conversation_id])
            self.db.conn.execute("DELETE FROM conversations WHERE id = ?", [conversation_id])

    # -- messages -------------------------------------------------------------------

    def add_message(self, conversation_id: int, role: str, content: str, *, parent_id: int | None | object = LEAF,
                    **stats: Any) -> Message:
        """Append a message after ``parent_id`` (by default the end of the chosen path), make
        it the end of the chosen path, and commit it before returning."""
        row = {"conversation_id": conversation_id, "role": role, "content": content, "created_at": time.time()}
        row.update(stats)
        row.setdefault("status", "complete")
        with self.writing():
            row["parent_id"] = self._leaf(conversation_id) if parent_id is LEAF else parent_id
            message_id = inserted_id(table_named(self.db, "messages").insert(row))
            self.db.conn.execute(
                "UPDATE conversations SET updated_at = ?, leaf_id = ? WHERE id = ?",
                [row["created_at"], message_id, conversation_id],
            )
        return self.get_message(message_id)

    def get_message(self, message_id: int) -> Message:
        with self.reading():
            rows = list(self.db["messages"].rows_where("id = ?", [message_id]))
        if not rows:
            raise KeyError(f"no message with id {message_id}")
        return Message.from_row(rows[0])

    def messages(self, conversation_id: int) -> list[Message]:
        """The conversation as the person chose it: the path from its first message to the
        chosen last one (other versions and branches are kept, not listed)."""
        with self.reading():
            rows = self.db["messages"].rows_where("conversation_id = ?", [conversation_id], order_by="id")
            by_id = {row["id"]: Message.from_row(row) for row in rows}
            if not by_id:
                return []  # none yet, or the conversation is gone
            leaf = self._leaf(conversation_id)
        path: list[Message] = []
        while leaf is not None:
            message = by_id.pop(leaf, None)  # popped: a damaged loop of parents ends here
            if message is None:
                # A message lost to damage (salvage keeps every row it can read): go on from
                # the newest earlier one that survived, so nothing readable is hidden.
                leaf = max((i for i in by_id if i < leaf), default=None)
                continue
            path.append(message)
            leaf = message.parent_id
        path.reverse()
        return path

    def update_message(self, message_id: int, **fields: Any) -> Message:
        with self.writing():
            table_named(self.db, "messages").update(message_id, fields)
        return self.get_message(message_id)

    def all_messages(self, conversation_id: int) -> list[Message]:
        """Every message of a conversation, every version and branch, oldest first."""
        with self.reading():
            rows = self.db["messages"].rows_where("conversation_id = ?", [conversation_id], order_by="id")
            return [Message.from_row(r) for r in rows]

    def leaf(self, conversation_id: int) -> int | None:
        """The id of the chosen path's last message (None: the path is empty)."""
        with self.reading():
            return self._leaf(conversation_id)

    def _leaf(self, conversation_id: int) -> int | None:
        """The chosen path's last message id (None: the path is empty). Inside a transaction."""
        row = self.db.conn.execute(
            "SELECT leaf_id, (SELECT MAX(id) FROM messages WHERE conversation_id = ?) FROM conversations WHERE id = ?",
            [conversation_id, conversation_id],
        ).fetchone()
        if row is None:
            raise ConversationNotFound(f"no conversation with id {conversation_id}")
        leaf, newest = row
        if leaf is None:
            return newest  # never chosen: the newest message, as before there were branches
        return None if leaf == EMPTY_PATH else int(leaf)

    def set_leaf(self, conversation_id: int, message_id: int | None) -> None:
        """End the chosen path at ``message_id`` (None: before the first message); the next
        message added follows it."""
        with self.writing():
            self._set_leaf_in(conversation_id, message_id)

    def versions(self, message_id: int) -> list[Message]:
        """The versions of a message: it and its siblings (same conversation, same parent,
        same role), oldest first."""
        message = self.get_message(message_id)
        with self.reading():
            rows = self.db["messages"].rows_where(
                "conversation_id = ? AND parent_id IS ? AND role = ?",
                [message.conversation_id, message.parent_id, message.role], order_by="id")
            return [Message.from_row(r) for r in rows]

    def version_sets(self, conversation_id: int) -> dict[int, list[int]]:
        """For each message that has other versions: the ids of all its versions, oldest first
        (one query for a whole conversation, for a window that shows ‹ 2/3 ›)."""
        with self.reading():
            rows = self.db.conn.execute(
                "SELECT id, parent_id, role FROM messages WHERE conversation_id = ? ORDER BY id",
                [conversation_id]).fetchall()
        groups: dict[tuple[int | None, str], list[int]] = {}
        for message_id, parent_id, role in rows:
            groups.setdefault((parent_id, role), []).append(message_id)
        return {message_id: ids for ids in groups.values() if len(ids) > 1 for message_id in ids}

    def choose_version(self, message_id: int) -> list[Message]:
        """Show ``message_id`` on the chosen path, with the newest branch below it; returns
        the new path."""
        message = self.get_message(message_id)
        with self.writing():
            leaf = message_id
            while True:
                child = self.db.conn.execute(
                    "SELECT MAX(id) FROM messages WHERE conversation_id = ? AND parent_id = ?",
                    [message.conversation_id, leaf]).fetchone()[0]
                if child is None:
                    break
                leaf = child
            self.db.conn.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?", [leaf, message.conversation_id])
        return self.messages(message.conversation_id)

    def delete_message(self, message_id: int) -> None:
        """Delete one message; what followed it follows its parent instead."""
        message = self.get_message(message_id)
        cid = message.conversation_id
        with self.writing():
            leaf = self._leaf(cid)
            self.db.conn.execute("UPDATE messages SET parent_id = ? WHERE conversation_id = ? AND parent_id = ?",
                                 [message.parent_id, cid, message_id])
            self.db.conn.execute("DELETE FROM messages WHERE id = ?", [message_id])
            if leaf == message_id:
                self._set_leaf_in(cid, message.parent_id)

    def delete_messages_from(self, conversation_id: int, message_id: int) -> int:
        """Delete a message and everything that follows it (its branch); the chosen path then
        ends at its parent."""
        message = self.get_message(message_id)
        with self.writing():
            doomed = [row[0] for row in self.db.conn.execute(
                "WITH RECURSIVE below(id) AS (SELECT ? UNION ALL SELECT m.id FROM messages AS m "
                "JOIN below ON m.parent_id = below.id WHERE m.conversation_id = ?) SELECT id FROM below",
                [message_id, conversation_id])]
            leaf = self._leaf(conversation_id)
            self.db.conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in doomed])
            if leaf in doomed:
                self._set_leaf_in(conversation_id, message.parent_id)
            return len(doomed)

    def delete_oldest_messages(self, conversation_id: int, count: int) -> int:
        """Delete the ``count`` oldest messages of the chosen path (trimming a full context);
        what followed them becomes the start of its branch."""
        doomed = [m.id for m in self.messages(conversation_id)[:max(0, int(count))]]
        with self.writing():
            self.db.conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in doomed])
            self.db.conn.executemany(
                "UPDATE messages SET parent_id = NULL WHERE conversation_id = ? AND parent_id = ?",
                [(conversation_id, i) for i in doomed])
            return len(doomed)

    def _set_leaf_in(self, conversation_id: int, message_id: int | None) -> None:
        self.db.conn.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?",
                             [EMPTY_PATH if message_id is None else message_id, conversation_id])

    # -- settings -------------------------------------------------------------------

    def get_setting(self, key: str, default: Any = None) -> Any:
        with self.reading():
            row = self.db.conn.execute("SELECT value FROM settings WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.writing():
            table_named(self.db, "settings").upsert({"key": key, "value": json.dumps(value)}, pk="key")

    def all_settings(self) -> dict[str, Any]:
        with self.reading():
            return {k: json.loads(v) for k, v in self.db.conn.execute("SELECT key, value FROM settings")}

    # -- models ---------------------------------------------------------------------

    def upsert_model(self, row: dict[str, Any]) -> None:
        with self.writing():
            self.db.conn.execute("DELETE FROM models WHERE path = ? AND id != ?", [row["path"], row["id"]])
            table_named(self.db, "models").upsert(row, pk="id")

    def model_rows(self) -> list[dict[str, Any]]:
        with self.reading():
            return list(self.db["models"].rows_where(order_by="id"))

    def delete_model(self, model_id: str) -> None:
        with self.writing():
            self.db.conn.execute("DELETE FROM model_paths WHERE model_id = ?", [model_id])
            self.db.conn.execute("DELETE FROM models WHERE id = ?", [model_id])

    def move_model(self, model_id: str, path: str) -> None:
        """Point a record at another path to its content (its own file is gone)."""
        with self.writing():
            self.db.conn.execute("DELETE FROM model_paths WHERE path = ?", [path])
            self.db.conn.execute("UPDATE models SET path = ? WHERE id = ?", [path, model_id])

    def set_model_problem(self, model_id: str, problem: str | None) -> None:
        with self.writing():
            self.db.conn.execute("UPDATE models SET problem = ? WHERE id = ?", [problem, model_id])

    # -- other paths to a model's content ----------------------------------------------

    def add_model_path(self, path: str, model_id: str) -> None:
        with self.writing():
            table_named(self.db, "model_paths").upsert({"path": path, "model_id": model_id}, pk="path")

    def model_paths(self) -> dict[str, str]:
        """{path: model id} for every extra path (a record's own path is in its row)."""
        with self.reading():
            return dict(self.db.conn.execute("SELECT path, model_id FROM model_paths"))

    def delete_model_path(self, path: str) -> None:
        with self.writing():
            self.db.conn.execute("DELETE FROM model_paths WHERE path = ?", [path])


class _Connection(sqlite3.Connection):
    """sqlite3's connection, able to hold back commits while a migration runs.

    sqlite-utils commits on its own (``with conn:`` around inserts), which would split one
    migration into several transactions; while ``hold_commits`` is set those commits wait
    for the migration's own."""

    hold_commits = False

    def commit(self) -> None:
        if not self.hold_commits:
            super().commit()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        if self.hold_commits:
            return False  # the migration's own commit or rollback decides
        return super().__exit__(exc_type, exc, tb)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

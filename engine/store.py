"""The SQLite store: conversations, messages, models and settings.

One connection shared by every thread, guarded by a lock: writes are small and rare
next to inference, and one connection keeps WAL checkpoints simple. A user message is
committed the moment it is sent, an answer when it completes (or, marked partial, when
it is stopped), so a crash mid-turn loses nothing already saved.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from .errors import ConversationNotFound, StoreError
from .migrations import MIGRATIONS

log = logging.getLogger(__name__)


@dataclass
class Conversation:
    id: int
    title: str
    model_id: str | None
    system_prompt: str | None
    sampling: dict[str, Any]
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Conversation":
        return cls(
            id=row["id"],
            title=row["title"] or "",
            model_id=row["model_id"],
            system_prompt=row["system_prompt"],
            sampling=json.loads(row["sampling"] or "{}"),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


@dataclass
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    status: str = "complete"
    finish_reason: str | None = None
    model_id: str | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_ms: float | None = None
    tokens_per_s: float | None = None
    created_at: float = field(default_factory=time.time)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Message":
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})


class Store:
    """The application database. Thread-safe; open one per process."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self.db = self._open()

    # -- opening --------------------------------------------------------------------

    def _open(self) -> sqlite_utils.Database:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = self._connect()
            if not self._healthy(db):
                db.conn.close()
                self._set_aside_corrupt()
                db = self._connect()
            db.conn.execute("PRAGMA journal_mode=WAL")
            # FULL: each commit is on disk before we report it; writes here are few.
            db.conn.execute("PRAGMA synchronous=FULL")
            db.conn.execute("PRAGMA foreign_keys=ON")
            self._migrate(db)
            return db
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the database {self.path}: {exc}") from exc
        except OSError as exc:
            raise StoreError(f"cannot open the database {self.path}: {exc.strerror or exc}") from exc

    def _connect(self) -> sqlite_utils.Database:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        return sqlite_utils.Database(conn)

    @staticmethod
    def _healthy(db: sqlite_utils.Database) -> bool:
        try:
            result = db.conn.execute("PRAGMA integrity_check").fetchone()
        except sqlite3.DatabaseError as exc:
            log.error("database failed its integrity check: %s", exc)
            return False
        if result is None or result[0] != "ok":
            log.error("database failed its integrity check: %s", result)
            return False
        return True

    def _set_aside_corrupt(self) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            source = Path(str(self.path) + suffix)
            if source.exists():
                target = Path(f"{self.path}.corrupt-{stamp}{suffix}")
                source.rename(target)
                log.error("set aside a corrupt database file as %s", target.name)

    def _migrate(self, db: sqlite_utils.Database) -> None:
        db.conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
        applied = {row[0] for row in db.conn.execute("SELECT name FROM _migrations")}
        for migration in MIGRATIONS:
            if migration.__name__ in applied:
                continue
            log.info("applying migration %s", migration.__name__)
            with db.conn:
                migration(db)
                db.conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                    (migration.__name__, time.time()),
                )

    def applied_migrations(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self.db.conn.execute("SELECT name FROM _migrations ORDER BY rowid")]

    def integrity_ok(self) -> bool:
        with self._lock:
            return self._healthy(self.db)

    def close(self) -> None:
        with self._lock:
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
        with self._lock, self.db.conn:
            table = self.db["conversations"].insert(row)
            return self.get_conversation(int(table.last_pk))

    def get_conversation(self, conversation_id: int) -> Conversation:
        with self._lock:
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
        with self._lock:
            cursor = self.db.conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [Conversation.from_row(dict(zip(names, row))) for row in cursor.fetchall()]

    def latest_conversation(self) -> Conversation | None:
        found = self.list_conversations(limit=1)
        return found[0] if found else None

    def update_conversation(self, conversation_id: int, **fields: Any) -> Conversation:
        allowed = {"title", "model_id", "system_prompt", "sampling"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}")
        if "sampling" in fields:
            fields["sampling"] = json.dumps(fields["sampling"] or {})
        fields["updated_at"] = time.time()
        self.get_conversation(conversation_id)
        with self._lock, self.db.conn:
            self.db["conversations"].update(conversation_id, fields)
        return self.get_conversation(conversation_id)

    def delete_conversation(self, conversation_id: int) -> None:
        with self._lock, self.db.conn:
            self.db.conn.execute("DELETE FROM messages WHERE conversation_id = ?", [conversation_id])
            self.db.conn.execute("DELETE FROM conversations WHERE id = ?", [conversation_id])

    # -- messages -------------------------------------------------------------------

    def add_message(self, conversation_id: int, role: str, content: str, **stats: Any) -> Message:
        """Append a message and commit it before returning."""
        row = {"conversation_id": conversation_id, "role": role, "content": content, "created_at": time.time()}
        row.update(stats)
        row.setdefault("status", "complete")
        with self._lock, self.db.conn:
            table = self.db["messages"].insert(row)
            message_id = int(table.last_pk)
            self.db.conn.execute(
                "UPDATE conversations SET updated_at = ? WHERE id = ?", [row["created_at"], conversation_id]
            )
        return self.get_message(message_id)

    def get_message(self, message_id: int) -> Message:
        with self._lock:
            rows = list(self.db["messages"].rows_where("id = ?", [message_id]))
        if not rows:
            raise KeyError(f"no message with id {message_id}")
        return Message.from_row(rows[0])

    def messages(self, conversation_id: int) -> list[Message]:
        with self._lock:
            rows = self.db["messages"].rows_where("conversation_id = ?", [conversation_id], order_by="id")
            return [Message.from_row(r) for r in rows]

    def update_message(self, message_id: int, **fields: Any) -> Message:
        with self._lock, self.db.conn:
            self.db["messages"].update(message_id, fields)
        return self.get_message(message_id)

    def delete_messages_from(self, conversation_id: int, message_id: int) -> int:
        """Delete a message and every later one in its conversation (edit, regenerate)."""
        with self._lock, self.db.conn:
            cursor = self.db.conn.execute(
                "DELETE FROM messages WHERE conversation_id = ? AND id >= ?", [conversation_id, message_id]
            )
            return cursor.rowcount

    def delete_oldest_messages(self, conversation_id: int, count: int) -> int:
        """Delete the ``count`` oldest messages of a conversation (trimming a full context)."""
        with self._lock, self.db.conn:
            cursor = self.db.conn.execute(
                "DELETE FROM messages WHERE id IN "
                "(SELECT id FROM messages WHERE conversation_id = ? ORDER BY id LIMIT ?)",
                [conversation_id, int(count)],
            )
            return cursor.rowcount

    # -- settings -------------------------------------------------------------------

    def get_setting(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self.db.conn.execute("SELECT value FROM settings WHERE key = ?", [key]).fetchone()
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        with self._lock, self.db.conn:
            self.db["settings"].upsert({"key": key, "value": json.dumps(value)}, pk="key")

    def all_settings(self) -> dict[str, Any]:
        with self._lock:
            return {k: json.loads(v) for k, v in self.db.conn.execute("SELECT key, value FROM settings")}

    # -- models ---------------------------------------------------------------------

    def upsert_model(self, row: dict[str, Any]) -> None:
        with self._lock, self.db.conn:
            self.db.conn.execute("DELETE FROM models WHERE path = ? AND id != ?", [row["path"], row["id"]])
            self.db["models"].upsert(row, pk="id")

    def model_rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.db["models"].rows_where(order_by="id"))

    def delete_model(self, model_id: str) -> None:
        with self._lock, self.db.conn:
            self.db.conn.execute("DELETE FROM models WHERE id = ?", [model_id])


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

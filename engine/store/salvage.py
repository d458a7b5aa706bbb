"""Recover what can still be read from a damaged SQLite database into a fresh one.

SQLite's own ``.recover`` lives in its command-line shell, not in Python's module, so this
does the part that matters for Inglenook's small schema: for every table of the fresh
database, copy each row of the damaged one that can still be read. A table is first read
in one scan; when the scan hits a damaged page, the rest is walked by rowid, one lookup at
a time, which goes around a damaged leaf through the tree's interior pages. A lookup that
fails, or a gap of missing rowids, is skipped; a long enough run of them ends the table.

Every step moves strictly forward in rowid: a damaged tree can hand back keys out of order
(or the same keys again, through a page that points back up the tree), and a walk that
followed them would never end. A key at or below the last one read counts as damage.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path

from .sqlite_tables import quoted

log = logging.getLogger(__name__)

#: Consecutive rowids that may be missing or unreadable before a table's walk ends.
MAX_ROWID_GAP = 2_000
#: What reading a damaged file can raise: SQLite's errors, and UnicodeDecodeError when even
#: SQLite's error message (naming a damaged schema entry) is not valid UTF-8.
_UNREADABLE = (sqlite3.Error, ValueError)
#: Tables the fresh database keeps for itself.
_SKIPPED = {"_migrations"}


class _KeysOutOfOrder(Exception):
    """A scan returned a rowid at or below one it had already returned: the tree is damaged."""


def salvage_into(damaged: Path, fresh: sqlite3.Connection) -> dict[str, int]:
    """Copy every readable row of ``damaged`` into ``fresh`` (same schema); rows per table."""
    copied: dict[str, int] = {}
    try:
        source = sqlite3.connect(damaged)
        source.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
    except sqlite3.Error as exc:
        log.error("cannot open the damaged database to salvage it: %s", exc)
        return copied
    fresh.execute("PRAGMA foreign_keys=OFF")  # a message whose conversation row was lost is still kept
    try:
        for table in _tables(fresh):
            try:
                copied[table] = _copy_table(source, fresh, table)
            except _UNREADABLE as exc:
                log.error("salvaging table %s failed: %s", table, exc)
                copied[table] = 0
    finally:
        fresh.execute("PRAGMA foreign_keys=ON")
        with contextlib.suppress(sqlite3.Error):
            source.close()
    log.warning("salvaged from the damaged database: %s", ", ".join(f"{t} {n}" for t, n in copied.items()) or "nothing")
    return copied


def _tables(conn: sqlite3.Connection) -> list[str]:
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
    return [n for n in names if n not in _SKIPPED and not n.startswith("sqlite_")]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({quoted(table)})")]


def _copy_table(source: sqlite3.Connection, fresh: sqlite3.Connection, table: str) -> int:
    try:
        source_columns = set(_columns(source, table))
    except _UNREADABLE:
        source_columns = set()
    columns = [c for c in _columns(fresh, table) if c in source_columns] if source_columns else _columns(fresh, table)
    if not columns:
        return 0
    names = ", ".join(quoted(c) for c in columns)
    select = f"SELECT rowid, {names} FROM {quoted(table)}"
    insert = f"INSERT OR IGNORE INTO {quoted(table)} (rowid, {names}) VALUES ({', '.join('?' * (len(columns) + 1))})"
    rows = _readable_rows(source, select)
    with fresh:
        fresh.executemany(insert, rows)
    return len(rows)


def _readable_rows(source: sqlite3.Connection, select: str) -> list[tuple]:
    rows: dict[int, tuple] = {}
    after = None  # None: nothing read yet
    while True:
        # Scan forward from the last row read; stop at the end or at the first damaged page.
        try:
            query = select + (" WHERE rowid > ?" if after is not None else "") + " ORDER BY rowid"
            for row in source.execute(query, () if after is None else (after,)):
                if after is not None and row[0] <= after:
                    raise _KeysOutOfOrder(f"rowid {row[0]} came after {after}")
                rows[row[0]] = row
                after = row[0]
            return list(rows.values())
        except (*_UNREADABLE, _KeysOutOfOrder) as exc:
            log.info("damaged page after rowid %s: %s", after, exc)
        resumed = _probe_past(source, select, (after or 0) + 1)
        if resumed is None:
            return list(rows.values())
        rows[resumed[0]] = resumed
        after = resumed[0]


def _probe_past(source: sqlite3.Connection, select: str, start: int) -> tuple | None:
    """The first readable row at or after ``start`` within MAX_ROWID_GAP, looked up one by one."""
    for rowid in range(start, start + MAX_ROWID_GAP):
        try:
            row = source.execute(select + " WHERE rowid = ?", (rowid,)).fetchone()
        except _UNREADABLE:
            continue
        if row is not None and row[0] == rowid:  # a damaged tree may answer with another key
            return row
    return None

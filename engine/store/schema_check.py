"""Whether an opened database still has the tables and columns the migrations made.

A byte changed inside a table's ``CREATE TABLE`` text (kept in ``sqlite_master``) renames a
column or a table, and SQLite's integrity checks do not look at it: every page is sound.
Queries would then fail later, one by one, with errors that say nothing about damage. The
store compares the schema once at open against the one the migrations build in memory;
anything missing counts as damage (set aside and salvaged like any other).
"""

from __future__ import annotations

import functools
import sqlite3

import sqlite_utils

from .migrations import MIGRATIONS
from .sqlite_tables import quoted


@functools.cache
def expected_columns() -> dict[str, frozenset[str]]:
    """Each table's columns as the migrations create them (built once per process, in memory)."""
    db = sqlite_utils.Database(sqlite3.connect(":memory:"))
    for migration in MIGRATIONS:
        migration(db)
    columns = _columns_of(db.conn)
    db.conn.close()
    return columns


def missing_schema(conn: sqlite3.Connection) -> list[str]:
    """What the database lacks of the expected schema: ``table`` or ``table.column`` names."""
    found = _columns_of(conn)
    missing: list[str] = []
    for table, columns in expected_columns().items():
        if table not in found:
            missing.append(table)
        else:
            missing.extend(f"{table}.{column}" for column in sorted(columns - found[table]))
    return missing


def _columns_of(conn: sqlite3.Connection) -> dict[str, frozenset[str]]:
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        table: frozenset(r[1] for r in conn.execute(f"PRAGMA table_info({quoted(table)})"))
        for table in tables
        if not table.startswith("sqlite_")
    }
